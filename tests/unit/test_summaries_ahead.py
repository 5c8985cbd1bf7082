"""Which entities and relations an indexing run's unfinished chunks can still add to."""

from __future__ import annotations

from kbgraph.index.summaries_ahead import _Candidate, name_words

ITEM = ("entity", "x", ("a",))


def test_an_entity_is_unsettled_while_an_unfinished_chunk_holds_a_word_of_its_names():
    scrooge = _Candidate(ITEM, (name_words(["EBENEZER SCROOGE", "Scrooge"]),))
    assert scrooge.unsettled(["mr. scrooge's counting-house was cold"])
    assert not scrooge.unsettled(["marley was dead: to begin with"])
    assert not scrooge.unsettled([])


def test_short_and_common_words_say_nothing_but_a_name_of_short_words_is_itself():
    assert name_words(["The Ghost of Christmas Past"]) == {"ghost", "christmas", "past"}
    assert name_words(["Bo Li"]) == {"bo li"}
    assert name_words(["南屿港"]) == {"南屿港"}


def test_a_relation_is_unsettled_only_where_one_chunk_names_both_ends():
    ends = _Candidate(("relation", "a -- b", ("f",)), (name_words(["Scrooge"]), name_words(["Marley"])))
    assert ends.unsettled(["scrooge and marley signed it"])
    assert not ends.unsettled(["scrooge alone", "marley alone"])
