"""The nlp extractor on text of the kinds users index, read as structure where it is structure (issue
41): chat logs with a header and speaker prefixes, e-mails, IRC logs, spreadsheet rows, Chinese news.
No ordinary word or interjection is an entity; a field label, header or subject tag is none either."""

from __future__ import annotations

from kbgraph.graph.extract.nlp.extractor import NLPExtractor
from kbgraph.graph.extract.nlp.structure import read_structure
from kbgraph.parse.readers.structured import _read_csv


def entities(text: str) -> dict[str, str]:
    return {e.name: e.type for e in NLPExtractor().extract(text).entities}


CHAT_LOG = (
    "Time: 2024-03-14 09:12\n"
    "Participants: Jennifer Moore, Tom Reyes\n"
    "Jennifer Moore: Absolutely, the Harbour Street lease is signed\n"
    "Tom Reyes: Got it\n"
    "Jennifer Moore: Keep me posted on the movers\n"
    "Tom Reyes: Sounds good. Bye\n"
    "Jennifer Moore: Thanks Tom, see you in Dublin\n"
)


def test_a_chat_logs_header_and_its_ordinary_words_are_no_entities() -> None:
    found = entities(CHAT_LOG)
    assert found["Jennifer Moore"] == "person" and found["Tom Reyes"] == "person"
    assert {"Harbour Street", "Dublin"} <= set(found)
    ordinary = {"Time", "Participants", "Absolutely", "Got", "Keep", "Sounds", "Bye", "Thanks"}
    assert not ordinary & set(found), ordinary & set(found)
    # "Tom" in the last line is Tom Reyes, not an entity of its own
    assert "Tom" not in found


def test_an_emails_headers_and_subject_tag_are_structure_and_its_sender_a_person() -> None:
    mail = ("Re: [ILUG] Backup solutions\nFrom: Wynne, Conor\nDate: Fri, 16 Aug 2002 10:35:36 +0100\n\n"
            "Eircom took the Zyxel 643 back. I use Amanda for backups.\n\nCW\n")
    found = entities(mail)
    assert found.get("Conor Wynne") == "person"  # "Wynne, Conor" read as the name it is
    assert not {"Re", "ILUG", "Date", "From", "IST", "Backup", "Wynne", "Conor", "CW"} & set(found)
    assert {"Eircom", "Zyxel 643", "Amanda"} <= set(found)


def test_an_irc_logs_nicks_are_people_whatever_their_case() -> None:
    log = ("[02:26] <zelot> hi, where can i get some help with mount?\n"
           "[02:27] <Bashing-om> zelot: If you are on a supported release, this is a good place to ask.\n"
           "=== tim241_ is now known as Tim241\n"
           "[02:31] <ObrienDave> motherboard\n"
           "[02:31] <TuxThePenguin> Makes sense to me :)\n")
    found = entities(log)
    assert {"zelot", "Bashing-om", "ObrienDave", "TuxThePenguin"} <= set(found)
    assert "tim241" in {name.lower().rstrip("_") for name in found}  # one key for tim241_ and Tim241
    assert found["zelot"] == "person"
    assert "Makes" not in found  # an utterance's first word is capitalized by its place


def test_an_irc_nick_is_found_however_it_is_addressed_unless_it_is_a_word() -> None:
    log = ("[19:00] <ActionParsnip> Usuario: set a password, makes things work\n"
           "[19:00] <Usuario> actionparsnip, how??\n"
           "[19:01] <home> hello\n"
           "[19:01] <Usuario> ACTIONPARSNIP: Home folder is full\n")
    people = read_structure(log).people
    assert [log[a:b] for a, b in people["ActionParsnip"]] == ["ActionParsnip", "actionparsnip", "ACTIONPARSNIP"]
    assert [log[a:b] for a, b in people["home"]] == ["home"]  # "Home folder": the word, not the nick


def test_spreadsheet_column_headers_and_categories_are_no_entities() -> None:
    text, _ = _read_csv("sales.csv", b"Region,Name,Sector,Revenue\nNorth,Jennifer Moore,Health Care,1200\n"
                                     b"South,Acme Robotics,Information Technology,900\n")
    found = entities(text)
    assert {"Jennifer Moore", "Acme Robotics"} <= set(found)
    assert not {"Region", "Name", "Sector", "Revenue", "North", "South", "Health Care",
                "Information Technology"} & set(found)


def test_chinese_ordinary_words_are_no_persons_and_names_stay_whole() -> None:
    found = entities("西兰花今天上午去滑冰。凯尔·内斯宣布退役。法国国王路易九世到访。鑫诺二号由长征三号乙发射。"
                     "他曾加盟成都谢菲联，后来回到河南建业，建业给了他队长袖标。")
    assert not {"西兰花", "今天上午", "滑冰", "内斯", "易九世", "加盟"} & set(found)
    assert found["凯尔·内斯"] == "person" and found["路易九世"] == "person"
    assert {"鑫诺二号", "长征三号乙", "成都谢菲联"} <= set(found)
    assert "建业" not in found  # the club's short name is 河南建业 in this text


def test_chinese_names_end_where_an_enumeration_says_and_organizations_keep_their_nouns() -> None:
    found = entities("服务对象包括中国教育网、新华社、国家气象局、佛山车务段等单位。代表来自美国消费科技协会。"
                     "西格尔提出开办一所武术学校。\"最新的事件\"是指那次攻击。")
    # a list item of a name and generic nouns is one name; a name, nouns and an organization word too
    assert {"中国教育网", "国家气象局", "佛山车务段", "美国消费科技协会"} <= set(found)
    assert found["美国消费科技协会"] == "organization"
    # ...and no piece of them is a name of its own; a kind of school and a quoted phrase are none
    assert not {"中国", "美国", "佛山", "武术学校", "最新的事件"} & set(found)


def test_chinese_list_items_that_are_places_in_places_or_roles_stay_apart() -> None:
    found = entities("他走访了广东省广州市、深圳市和珠海市。他曾任元朗区议会主席、立法会议员、古物咨询委员会成员。")
    assert {"广东省", "广州市", "深圳市"} <= set(found)  # a place in a place: two names
    assert not {"广东省广州市", "立法会议员", "元朗区议会主席", "古物咨询委员会成员"} & set(found)


def test_chinese_transliterated_names_keep_every_part() -> None:
    found = entities("马其顿国王阿闵塔斯一世接受了统治。克里斯蒂安·沃尔玛尔将在12月1日参赛。"
                     "产自凯尔特海的鳕鱼可能会灭绝。俄国联邦安全局的特工很活跃。")
    assert found["阿闵塔斯一世"] == "person" and found["克里斯蒂安·沃尔玛尔"] == "person"
    assert found["凯尔特海"] == "geo" and found["俄国联邦安全局"] == "organization"
    assert not {"阿闵", "塔斯一世", "克里斯蒂安·沃尔玛", "凯尔特", "俄国"} & set(found)


def test_chinese_list_items_end_at_their_name() -> None:
    found = entities("资料来自国防部所有部门、中国足球俱乐部上海浦东、国家经济和香港新闻处服务。"
                     "他效力于天津一汽夏利汽车股份有限公司原、国家气象局。")
    # a verb's noun, a one-character word, a state word without an agency: no part of the name;
    # an organization and a place after it are two names
    assert {"国防部", "中国足球俱乐部", "上海浦东", "香港新闻处", "天津一汽夏利汽车股份有限公司"} <= set(found)
    assert not {"国防部所有部门", "中国足球俱乐部上海浦东", "国家经济", "香港新闻处服务"} & set(found)


def test_chinese_person_names_lose_the_particle_jieba_ran_onto_them() -> None:
    found = entities("孙亮即位后，潘淑的地位上升。尼高·高华为球队打进一球。资金由金晨提供。战争之前，同盟国有优势。")
    assert found["潘淑"] == "person" and found["尼高·高华"] == "person" and found["金晨"] == "person"
    assert not {"潘淑的", "尼高·高华为", "由金晨", "盟国"} & set(found)
    assert not entities("某些昆虫的幼虫以荨麻叶为食，长约3英里。")  # "叶" + "为" and a unit: no person, no place
    assert "同盟国" in found  # a word jieba's dictionary knows keeps its first character


def test_chinese_foreign_names_cut_by_jieba_are_joined() -> None:
    found = entities("也向其致敬的伊斯内尔（Isner）。1770年格拉夫顿政府分裂。潘沃尔卡先生说。巴罗佐的调离引起轩然大波。"
                     "他访问了伊朗伊拉克和叙利亚。")
    assert {"伊斯内尔", "格拉夫顿", "潘沃尔卡", "巴罗佐"} <= set(found)
    assert not {"伊斯", "内尔", "格拉夫", "沃尔卡", "巴罗"} & set(found)
    assert {"伊朗", "伊拉克"} <= set(found)  # two places jieba knows stay two


def test_an_encyclopedias_glosses_in_other_languages_are_no_names() -> None:
    found = entities("The Normans (Norman: Nourmands; French: Normands; Latin: Normanni) were the people who "
                     "gave their name to Normandy, a region in France.")
    assert {"Normandy", "France"} <= set(found)
    assert not {"Norman", "Nourmands", "Normands", "Normanni", "Latin"} & set(found)


def test_an_emails_editing_marks_and_signature_fields_are_no_speakers() -> None:
    found = entities("From: Sean Rima\nDate: Sun, 04 Aug 2002 19:24:23 +0100\n\nA nice followon for Procmail:\n"
                     "\t<snip>\nand Mutt works.\n\nSean\n  Linux User:      231986          Jabber:   tcobone@jabber.org\n")
    assert found["Sean Rima"] == "person" and {"Procmail", "Mutt"} <= set(found)
    assert not {"snip", "Linux User"} & set(found)


def test_plural_abbreviations_and_chat_interjections_are_no_names() -> None:
    found = entities("I burned the ISOs to CDs last night, Grrr. AFAICS the FAQs are wrong. Ta, Kevin Lyda")
    assert "Kevin Lyda" in found
    assert not {"ISOs", "CDs", "Grrr", "AFAICS", "FAQs", "Ta"} & set(found)


def test_a_rare_noun_listed_among_places_is_a_place() -> None:
    found = entities("铁路向西跨越北江、西江，经佛山、三水、肇庆、云浮、阳江至茂名市。他爱吃苹果、香蕉和梨。")
    assert found["三水"] == "geo" and {"佛山", "肇庆", "云浮"} <= set(found)
    assert not {"苹果", "香蕉"} & set(found)


def test_a_ticker_field_names_its_company_and_compound_adjectives_of_peoples_are_none() -> None:
    found = entities("Symbol: MMM; Security: Acme Robotics; GICS Sector: Industrials\n"
                     "They mixed with the native Frankish and Roman-Gaulish populations of Gaul.")
    assert found["MMM"] == "organization" and "Acme Robotics" in found
    assert not {"Roman-Gaulish", "Frankish"} & set(found)


def test_the_singular_of_a_people_the_text_names_is_no_entity() -> None:
    found = entities("Some Normans joined Turkish forces. A Norman named Oursel led them, and Amalfi was under "
                     "Norman rule. Ryan Duggan wrote to Ryan.")
    assert {"Normans", "Oursel", "Amalfi", "Ryan Duggan"} <= set(found)
    assert "Norman" not in found


def test_chinese_language_names_are_no_entities() -> None:
    found = entities("加拿大广场（英文：Canada Place）位于温哥华。该台以粤语和国语双语广播，也有西班牙语和拉丁文版本。"
                     "建文帝即位后，建文年间的政策改变。")
    assert {"加拿大广场", "温哥华"} <= set(found) or {"加拿大", "温哥华"} <= set(found)
    assert not {"英文", "粤语", "国语", "双语", "西班牙语", "拉丁文"} & set(found)
    assert "建文" in found  # an era, not a language


def test_a_latin_gloss_after_a_chinese_name_is_that_entity() -> None:
    ents = NLPExtractor().extract("霍普利（Hopley）女士补充道。加拿大广场公司（Canada Place Corporation）管理码头。"
                                  "艾达（Dündar）警告欧洲。").entities
    found = {e.name: e for e in ents}
    assert {"霍普利", "加拿大广场公司", "艾达", "欧洲"} <= set(found)
    assert not {"Hopley", "Canada Place Corporation", "Dündar"} & set(found)


def test_scientific_names_of_species_are_no_entities() -> None:
    found = entities("最常见的品种为异株荨麻（\"Urtica dioica\"），原生于欧洲。The nettle (Urtica dioica) grows in "
                     "Europe; Mozilla (Mozilla Firefox) does not.")
    assert {"欧洲", "Europe", "Mozilla Firefox"} <= set(found)
    assert not {"Urtica", "Urtica dioica"} & set(found)


def test_ordinary_words_jieba_tags_as_names_are_none() -> None:
    found = entities("黎明时分，孔雀走过小镇的钟楼，巴士载着马匹驶向共和国大道。他曾任教于北京大学，后晋升为教授，"
                     "该剧改编自小说，票价为45欧元。")
    assert not {"黎明", "孔雀", "小镇", "钟楼", "巴士", "马匹", "共和国", "欧元"} & set(found)
    # a verb jieba's guessing ran into a particle is no name ("任教" + "于")
    assert "北京大学" in found and not {"任教于", "任教", "晋升为", "晋升", "改编自", "改编"} & set(found)


def test_a_compound_title_before_a_name_is_cut() -> None:
    found = entities("The settlement was established under Lieutenant-Governor David Collins at Sullivan Bay. "
                     "Major League Baseball came later. Earlier Google engineers left.")
    assert found["David Collins"] == "person" and {"Major League Baseball", "Google"} <= set(found)
    assert not {"Lieutenant-Governor David Collins", "Earlier Google"} & set(found)


def test_the_word_as_after_a_name_is_no_legal_form() -> None:
    found = entities("The state is split into Northern and Southern California as the region grew. Norsk Hydro AS sold.")
    assert {"Southern California", "Norsk Hydro AS"} <= set(found)
    assert "Southern California as" not in found


def test_chinese_administrative_divisions_are_places_not_persons() -> None:
    found = entities("位于乌克兰（敖德萨州）境内。他来到张家村，又前往肯特郡和萨里郡。美国州政府很忙。")
    assert found["敖德萨州"] == "geo" and found["张家村"] == "geo" and found["肯特郡"] == "geo"
    assert "敖德萨" not in found and "美国州" not in found


def test_chinese_battles_wars_and_treaties_after_a_name_are_events() -> None:
    found = entities("签订了天津条约。凡尔登会战中伤亡惨重。各国签订了国际条约。这场战争很长。")
    assert found["天津条约"] == "event" and found["凡尔登会战"] == "event"
    assert not {"国际条约", "天津", "凡尔登", "战争"} & set(found)


IRC_LINES = (
    "[22:02] <Kromel> Kitu what errors do you get when Apache2 starts\n"
    "[22:03] <Fryguy--> karname run the resetpanel factoid\n"
    "=== geoffe is now known as geo\n"
    "[22:03] <Kitu> kromel httpd not running\n"
    "[22:04] <karname> thanks it worked\n"
)


def test_each_line_of_a_chat_log_is_a_sentence_of_its_own() -> None:
    """Lines of a chat log are utterances: two names are related when one line names both (the
    speaker and whom they answer), not when their lines follow each other without a full stop."""
    from kbgraph.graph.extract.base import normalize_key

    out = NLPExtractor().extract(IRC_LINES)
    related = {frozenset((normalize_key(r.source), normalize_key(r.target))): r.description for r in out.relations}
    assert frozenset(("kromel", "kitu")) in related and frozenset(("fryguy", "karname")) in related
    assert frozenset(("geoffe", "geo")) in related
    for pair in (("kitu", "karname"), ("kromel", "fryguy"), ("karname", "geo")):
        assert frozenset(pair) not in related, pair
    assert "resetpanel" not in related[frozenset(("kromel", "kitu"))]
