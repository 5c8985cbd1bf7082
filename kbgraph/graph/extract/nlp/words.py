"""The English words the Latin-script name finder reads its cues from: stop words that are never a
name's first or last word, honorifics and roles in front of names, connectors inside them
("Bank of England"), and the head words, holidays and given names that vote for a name's type.
Kept apart because they are data, long, and shared by the name finder (names.py), the candidates
(candidates.py) and the sentence splitter (sentences.py, its abbreviations).
"""

from __future__ import annotations

_STOP = frozenset("""
a about above across after afterwards again against ah alas all almost alone along already also although always
am among an and another any anybody anyhow anyone anything anyway anywhere are around as at aye back be because
been before beforehand behind being below beside besides between beyond both but by can cannot could dear did
do does doing done down during each eh either else elsewhere enough even ever every everybody everyone everything
everywhere except far few first for former formerly from further furthermore good great had has have having he
hello hence her here hereafter hereby herein hers herself hey hi him himself his how however hullo hum i if in
indeed instead into is it its itself just last later latter least less let like little lo look many may maybe me
meanwhile might mine more moreover most mostly much must my myself namely nay neither never nevertheless nonetheless
earlier next no
nobody none noone nor not nothing now nowhere o of off often oh ok okay on once one only onto or other others
otherwise ought our ours ourselves out over own perhaps please quite rather really said same say see seem several
shall she should since so some somebody somehow someone something sometime sometimes somewhere soon still such
than that the thee their theirs them themselves then thence there thereafter thereby therefore therein these they
thine this those thou though through throughout thus thy till to together too toward towards twas tis under
unless until up upon us very via was we well were what whatever when whence whenever where whereas wherever
whether which while whither who whoever whole whom whose why will with within without would ye yes yet you your
yours yourself yourselves hallo hah ha ho halloa whoa why aye amen alas bah humbug pooh pshaw
two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen twenty thirty forty fifty
hundred thousand million second third
january february march april may june july august september october november december
monday tuesday wednesday thursday friday saturday sunday
chapter stave illustration contents title author note footnote figure table section page volume part appendix
end start beginning introduction preface index copyright license
regards sincerely rgds
thanks thank thx sorry yeah yep yup nope lol omg wow haha hmm oops congrats congratulations cheers welcome
great nice cool sure looking hey hiya morning evening afternoon night tonight today tomorrow yesterday
asap fyi btw tbd eta eod imo imho tl dr dm pm am ps nb aka ok ooo wfh rsvp faq re fwd cc bcc
mondays tuesdays wednesdays thursdays fridays saturdays sundays weekend weekends
jan feb mar apr jun jul aug sep sept oct nov dec mon tue tues wed thu thurs fri sat sun
""".split())
# words that name a role in front of a name or an organization ("CEO of Corvid Interactive"): cut, no vote
_ROLES = frozenset("ceo cto cfo coo cmo vp chairman chairwoman director head founder manager".split())
_CONNECTORS = frozenset("of the de von van der den da di du la le del des".split())
_TITLES_DROP = frozenset("mr mister dr doctor prof professor sir captain capt uncle aunt master general colonel "
                         "col president rev reverend sgt sergeant lieutenant lt duke duchess earl emperor empress "
                         "senator bishop archbishop pope mayor governor judge".split())
_TITLES_KEEP = frozenset("mrs miss ms madame mme mlle lady lord king queen prince princess".split())
_TITLE_ABBR = _TITLES_DROP | _TITLES_KEEP | {"st"}
# offices that are no name on their own ("the Premier"), though they begin names ("Premier League")
_LONE_TITLES = frozenset("premier chancellor minister ambassador commissioner secretary".split())
# what a mail subject or a forum title asks about its name: no part of it ("Linux Install",
# "PHP Question", "Sendmail Problem")
_REQUEST_WORDS = frozenset("question questions problem problems help install installation issue issues query "
                           "howto".split())
# given names a place's adjective could be mistaken for ("Julian" beside "Julia")
_GIVEN_NAMES_IN_AN = frozenset("julian lillian vivian adrian christian dorian damian gillian marian brian "
                               "sebastian florian cyprian maximilian".split())
_ABBREVIATIONS = frozenset("mr mrs ms dr st jr sr prof mt no vs etc co inc ltd capt col gen lt sgt rev fig vol".split())
_SPEECH = frozenset("said says say cried replied asked answered exclaimed returned observed whispered shouted "
                    "muttered added continued rejoined inquired enquired remarked declared murmured repeated "
                    "thought laughed sighed".split())
_ORG_HEADS = frozenset("guild company co corporation corp inc ltd llc plc bank university college school council "
                       "society association institute institution foundation committee party church ministry "
                       "department agency club union army navy court parliament academy museum group press "
                       "commission federation league office bureau board trust firm partners brothers services".split())
_ORG_FIRST = frozenset("university bank college institute house church ministry department order".split())
_GEO_HEADS = frozenset("city river street st road lane square mountain mountains mount lake sea ocean island islands "
                       "bay valley county province state kingdom republic hill hills bridge park forest desert coast "
                       "town village harbour harbor port strait gulf peninsula avenue alley market court states "
                       "cathedral abbey castle palace".split())
_GEO_FIRST = frozenset("mount mt lake port cape fort isle gulf".split())
_GEO_NOUNS = frozenset("town city village port county kingdom province state island river isle duchy".split())
_GEO_PREPS = frozenset("in near across throughout".split())
_EVENT_HEADS = frozenset("war wars festival battle treaty revolution conference summit games olympics election "
                         "crisis cup championship eve fair expedition massacre rebellion uprising congress "
                         "ceremony coronation siege day agreement accord accords referendum protocol".split())
_HOLIDAYS = frozenset("christmas easter halloween thanksgiving hanukkah ramadan diwali passover pentecost "
                      "michaelmas whitsun".split())
_FIRST_NAMES = frozenset("""
adam alan albert alex alice amy andrew ann anna anne arthur belle ben benjamin beth betty bill billy bob carl
caroline catherine charles charlie charlotte chris christopher clara daniel david dick edward elizabeth ellen emily
emma eric fanny frank fred frederick george harry helen henry jack jacob james jane jenny jim joan joe john joseph
kate katherine laura lily lucy margaret maria mark martha mary matthew michael molly nancy ned nell oliver paul
peter philip polly richard robert rose ruth sally sam samuel sarah simon sophia steve susan thomas tim tom tony
victoria walter william aaron ahmed ali amir ana andrea angela anton astrid carlos chen dev diego elena elif
felix fatima gwen hana hans ines ivan jonas juan julia kenji li lin luca lucas malcolm maria marta mei mohammed
nina nora olga omar owen pablo priya raj rosa sofia sven tomasz wei yuki zara
""".split())

# compass words before a nationality make an adjective of it ("South Korean"), not a name
_COMPASS = frozenset("north south east west northern southern eastern western central".split())
