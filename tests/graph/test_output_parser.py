"""The record parser against the kinds of answer real models give."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kbgraph.graph.extract.answer_json import load_json_lenient
from kbgraph.graph.extract.output_parser import parse_records
from kbgraph.graph.extract.record_fields import parse_strength


def names(out) -> list[str]:
    return [e.name for e in out.entities]


def pairs(out) -> list[tuple[str, str]]:
    return [(r.source, r.target) for r in out.relations]


CLEAN = (
    '("entity"<|>Ebenezer Scrooge<|>person<|>A miser who runs a counting-house.)##\n'
    '("entity"<|>Jacob Marley<|>person<|>Scrooge\'s dead business partner.)##\n'
    '("relationship"<|>Ebenezer Scrooge<|>Jacob Marley<|>They were partners for years.<|>9)\n'
    "<|COMPLETE|>"
)


def test_clean_general_format() -> None:
    out = parse_records(CLEAN)
    assert names(out) == ["Ebenezer Scrooge", "Jacob Marley"]
    assert out.entities[0].type == "person"
    assert out.entities[1].description == "Scrooge's dead business partner."
    assert pairs(out) == [("Ebenezer Scrooge", "Jacob Marley")]
    assert out.relations[0].weight == 9.0 and out.relations[0].keywords == []
    assert out.dropped == 0 and out.complete


def test_light_format_keywords_by_field_count() -> None:
    out = parse_records('("relationship"<|>Bob Cratchit<|>Scrooge<|>Bob is Scrooge\'s clerk.<|>employment, '
                        'poverty<|>8)##<|COMPLETE|>')
    rel = out.relations[0]
    assert rel.keywords == ["employment", "poverty"] and rel.weight == 8.0
    assert rel.description == "Bob is Scrooge's clerk."


def test_think_block_code_fence_and_prose() -> None:
    text = (
        "<think>The user wants entities. Maybe (\"entity\"<|>Draft<|>person<|>not final)?</think>\n"
        "Sure! Here are the entities I found:\n\n```text\n" + CLEAN + "\n```\n\nLet me know if you need more."
    )
    out = parse_records(text)
    assert names(out) == ["Ebenezer Scrooge", "Jacob Marley"]
    assert len(out.relations) == 1 and out.dropped == 0


def test_orphan_closing_think_tag() -> None:
    out = parse_records("reasoning that lost its opening tag...</think>\n" + CLEAN)
    assert names(out) == ["Ebenezer Scrooge", "Jacob Marley"]


def test_wrong_case_tags_and_relation_spelling() -> None:
    text = ('("Entity"<|>Fezziwig<|>PERSON<|>A kind employer)##\n'
            '("RELATIONSHIP"<|>Fezziwig<|>Scrooge<|>Scrooge was his apprentice<|>7)##\n'
            '("relation"<|>Fezziwig<|>Dick Wilkins<|>Dick was apprenticed with Scrooge<|>5)')
    out = parse_records(text)
    assert names(out) == ["Fezziwig"]
    assert pairs(out) == [("Fezziwig", "Scrooge"), ("Fezziwig", "Dick Wilkins")]


def test_newline_separated_records_without_record_delimiter_or_parens() -> None:
    text = ("entity<|>Belle<|>person<|>A young woman Scrooge once loved\n"
            "entity<|>Fan<|>person<|>Scrooge's little sister\n"
            "relationship<|>Belle<|>Fan<|>Both loved young Scrooge<|>3\n")
    out = parse_records(text)
    assert names(out) == ["Belle", "Fan"]
    assert out.relations[0].weight == 3.0


def test_other_tuple_delimiters() -> None:
    pipe = '("entity"|Tiny Tim|person|Bob\'s youngest son)\n("relationship"|Tiny Tim|Bob Cratchit|father and son|9)'
    double = '("entity"<||>Tiny Tim<||>person<||>the son)##("entity"<||>Martha<||>person<||>the daughter)'
    hashed = "entity<|#|>Topper<|#|>person<|#|>a friend of Fred\nrelation<|#|>Topper<|#|>Fred<|#|>friends<|#|>4"
    tab = '("entity"\tCamden Town\tgeo\twhere the Cratchits live)'
    assert names(parse_records(pipe)) == ["Tiny Tim"] and pairs(parse_records(pipe)) == [("Tiny Tim", "Bob Cratchit")]
    assert names(parse_records(double)) == ["Tiny Tim", "Martha"]
    out = parse_records(hashed)
    assert names(out) == ["Topper"] and pairs(out) == [("Topper", "Fred")]
    assert parse_records(tab).entities[0].type == "geo"


def test_broken_delimiter_halves() -> None:
    # weak models drop one side of "<|>" now and then
    out = parse_records('("entity"<|>Old Joe<|person<|>A rag-and-bone dealer)##'
                        '("relationship"<|>Old Joe|>Mrs. Dilber<|>she sells him goods<|>6)')
    assert out.entities[0].name == "Old Joe" and out.entities[0].type == "person"
    assert pairs(out) == [("Old Joe", "Mrs. Dilber")]


def test_quotes_and_markdown_around_fields() -> None:
    out = parse_records('("entity"<|>"**London**"<|>"geo"<|>"The city where Scrooge lives")')
    ent = out.entities[0]
    assert (ent.name, ent.type, ent.description) == ("London", "geo", "The city where Scrooge lives")


def test_missing_and_extra_parentheses() -> None:
    text = ('"entity"<|>Mrs. Cratchit<|>person<|>Bob\'s wife (a good cook))##\n'
            '(("entity"<|>Peter Cratchit<|>person<|>the eldest son))\n'
            '("relationship"<|>Mrs. Cratchit<|>Peter Cratchit<|>mother and son<|>8')
    out = parse_records(text)
    assert names(out) == ["Mrs. Cratchit", "Peter Cratchit"]
    assert out.entities[0].description == "Bob's wife (a good cook)"
    assert out.relations[0].weight == 8.0


def test_strength_written_in_many_ways() -> None:
    assert parse_strength("8") == 8.0
    assert parse_strength('"0.8"') == 0.8
    assert parse_strength("8/10") == 8.0
    assert parse_strength("4 out of 5") == 8.0
    assert parse_strength("70%") == 7.0
    assert parse_strength("strength: 6") == 6.0
    assert parse_strength("high") == 1.0  # a word gives the default
    assert parse_strength("-3") == 1.0 and parse_strength("nan") is None
    assert parse_strength("they were partners") is None
    out = parse_records('("relationship"<|>A<|>B<|>linked<|>high)##("relationship"<|>A<|>C<|>linked<|>"7/10")')
    assert [r.weight for r in out.relations] == [1.0, 7.0]


def test_missing_strength_and_missing_description() -> None:
    out = parse_records('("relationship"<|>Scrooge<|>Fred<|>uncle and nephew)##("relationship"<|>Scrooge<|>Belle)')
    assert [(r.description, r.weight) for r in out.relations] == [("uncle and nephew", 1.0), ("", 1.0)]


def test_completion_marker_anywhere_and_variants() -> None:
    out = parse_records('("entity"<|>Scrooge<|>person<|>a miser)<|COMPLETE|>("entity"<|>Marley<|>person<|>ghost)'
                        "\n<COMPLETE>")
    assert names(out) == ["Scrooge", "Marley"] and out.complete
    assert parse_records("<|COMPLETE|>").complete and parse_records("<|COMPLETE|>").empty


def test_duplicate_records_are_kept_once() -> None:
    rec = '("entity"<|>Scrooge<|>person<|>a miser)'
    out = parse_records("##".join([rec, rec, rec]))
    assert names(out) == ["Scrooge"]


def test_json_object_output() -> None:
    text = """```json
{"entities": [{"entity_name": "Scrooge", "entity_type": "person", "description": "a miser"},
              {"name": "Marley", "type": "person", "description": "his partner"},],
 "relationships": [{"source": "Scrooge", "target": "Marley", "description": "partners",
                    "keywords": ["business"], "strength": "9"}]}
```"""
    out = parse_records(text)
    assert names(out) == ["Scrooge", "Marley"]
    assert pairs(out) == [("Scrooge", "Marley")]
    assert out.relations[0].keywords == ["business"] and out.relations[0].weight == 9.0


def test_json_list_of_mixed_records_and_python_quotes() -> None:
    text = ("Here is the result: [{'type': 'entity', 'name': 'Fred', 'entity_type': 'person', "
            "'description': 'the nephew'}, {'source': 'Fred', 'target': 'Scrooge', 'relation': 'nephew of'},"
            " ['entity', 'Topper', 'person', 'a guest']]")
    out = parse_records(text)
    assert sorted(names(out)) == ["Fred", "Topper"]
    assert out.relations[0].description == "nephew of"


def test_unreadable_records_are_counted_not_raised() -> None:
    text = ('("entity"<|><|>person<|>no name)##("relationship"<|>only one end)##'
            '("entity"<|>Scrooge<|>person<|>fine)##garbage<|>x')
    out = parse_records(text)
    assert names(out) == ["Scrooge"]
    assert out.dropped == 3


def test_prose_only_is_empty_without_drops() -> None:
    out = parse_records("I could not find any entities in this text, sorry.")
    assert out.empty and out.dropped == 0 and not out.complete


def test_untagged_records_guessed_by_shape() -> None:
    out = parse_records("(Scrooge<|>person<|>a miser)\n(Scrooge<|>Marley<|>partners<|>9)")
    assert names(out) == ["Scrooge"] and pairs(out) == [("Scrooge", "Marley")]


def test_python_tuple_style_with_commas() -> None:
    out = parse_records('("entity", "Bob Cratchit", "person", "Scrooge\'s clerk, poorly paid")\n'
                        '("relationship", "Bob Cratchit", "Scrooge", "clerk of", 8)')
    assert out.entities[0].description == "Scrooge's clerk, poorly paid"
    assert pairs(out) == [("Bob Cratchit", "Scrooge")] and out.relations[0].weight == 8.0


def test_numbered_markdown_list_of_records() -> None:
    text = ("1. (\"entity\"<|>Ghost of Christmas Past<|>person<|>the first spirit)\n"
            "2. **(\"entity\"<|>Ghost of Christmas Present<|>person<|>the second spirit)**\n"
            "- (\"relationship\"<|>Ghost of Christmas Past<|>Ghost of Christmas Present<|>both visit Scrooge<|>4)")
    out = parse_records(text)
    assert names(out) == ["Ghost of Christmas Past", "Ghost of Christmas Present"]
    assert len(out.relations) == 1


def test_chinese_output_with_fullwidth_parens() -> None:
    text = ('（"entity"<|>张伟<|>人物<|>清华大学毕业生）##\n'
            '("entity"<|>清华大学<|>组织<|>北京的大学)##\n'
            '("relationship"<|>张伟<|>清华大学<|>张伟毕业于清华大学<|>校友，教育<|>9)<|COMPLETE|>')
    out = parse_records(text)
    assert names(out) == ["张伟", "清华大学"]
    assert out.relations[0].keywords == ["校友", "教育"]


def test_custom_delimiters() -> None:
    out = parse_records('("entity";;Scrooge;;person;;a miser)%%("entity";;Fred;;person;;nephew)[[DONE]]',
                        tuple_delim=";;", record_delim="%%", completion="[[DONE]]")
    assert names(out) == ["Scrooge", "Fred"] and out.complete


def test_description_containing_tag_word() -> None:
    out = parse_records('("entity"<|>Guild<|>organization<|>an entity that merged with another relationship'
                        ' network)##("entity"<|>Fred<|>person<|>nephew)')
    assert names(out) == ["Guild", "Fred"]


def test_load_json_lenient() -> None:
    assert load_json_lenient('noise {"a": [1, 2,],} trailing') == {"a": [1, 2]}
    assert load_json_lenient("no json here") is None


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list('()"<|>#\n\t,{}[]:entityrelationship 0123456789ABC')), max_size=200))
def test_never_raises(text: str) -> None:
    out = parse_records(text)
    assert out.dropped >= 0


@pytest.mark.parametrize("text", ["", "   ", "\n\n", "<think>only thinking</think>"])
def test_empty_inputs(text: str) -> None:
    out = parse_records(text)
    assert out.empty and out.dropped == 0


def test_brackets_inside_descriptions() -> None:
    text = ('("entity"<|>Cornhill<|>geo<|>[Illustration: _Bob went down a slide on Cornhill_])##\n'
            '("relationship"<|>Bob<|>Cornhill<|>he slid there [see plate 3] (twice)<|>2)')
    out = parse_records(text)
    assert out.entities[0].description == "[Illustration: _Bob went down a slide on Cornhill_]"
    assert out.relations[0].description == "he slid there [see plate 3] (twice)" and out.dropped == 0


# --- the fast path for answers in exactly the requested format -----------------------------------

_FIELD_TEXT = st.lists(st.sampled_from(
    ["Scrooge", " ", "said", "entity", "Edge", "node", "rel", "relations", "quarrel", ",", ".", "'", '"', "“", "”",
     "’", "*", "**", "(", ")", "[", "]", "<", ">", "|", "#", "##", "{", "}", "`", "\t", "\n", "complete", "8", "0.5",
     "high", "é", "港口", "ſ", "K", "_", ":", "-"]), max_size=8).map("".join)


def _record(kind: str, fields: list[str]) -> str:
    return f'("{kind}"<|>' + "<|>".join(fields) + ")"


@settings(max_examples=600, deadline=None)
@given(records=st.lists(st.tuples(st.sampled_from(["entity", "relationship"]),
                                  st.lists(_FIELD_TEXT, min_size=1, max_size=5)), max_size=6),
       gap=st.sampled_from(["##\n", "##", "\n##\n", " ## "]),
       ending=st.sampled_from(["<|COMPLETE|>", "\n<|COMPLETE|>\n", "", "##<|COMPLETE|>"]))
def test_fast_path_reads_canonical_answers_as_the_general_reader_does(records, gap, ending) -> None:
    from kbgraph.graph.extract.output_parser import _parse_canonical, _parse_general

    text = gap.join(_record(kind, fields) for kind, fields in records) + ending
    fast = _parse_canonical(text)
    if fast is not None:
        assert fast == _parse_general(text, "<|>", "##", "<|COMPLETE|>"), text


def test_fast_path_takes_plain_answers_and_declines_lookalikes() -> None:
    from kbgraph.graph.extract.output_parser import _parse_canonical

    plain = ('("entity"<|>Scrooge<|>person<|>A miser, “cold as ever.”)##\n'
             '("relationship"<|>Scrooge<|>Bob Cratchit<|>Bob is Scrooge\'s clerk.<|>8)##\n<|COMPLETE|>')
    out = _parse_canonical(plain)
    assert out is not None and out.complete and len(out.entities) == 1 and out.relations[0].weight == 8
    assert out == parse_records(plain)
    for lookalike in [
        plain.replace("person", "node"),  # a tag word as a field: the general reader starts a record there
        plain.replace("A miser", "A miser (old)"),
        "Here you go:\n" + plain,
        plain + "\nHope this helps",
        plain.replace("##\n<|COMPLETE|>", "##\n<think>x</think><|COMPLETE|>"),
    ]:
        assert _parse_canonical(lookalike) is None, lookalike
