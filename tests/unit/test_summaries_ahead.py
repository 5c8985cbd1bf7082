"""Which entities and relations an indexing run's unfinished chunks can still add to."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest

import kbgraph.index.summaries_ahead as summaries_ahead
from kbgraph.index.summaries_ahead import SummariesAhead, _Candidate, name_words

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


def test_closing_while_the_planner_works_out_candidates_asks_nothing_and_raises_nothing(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The run closes the planner while it weighs what changed, outside its lock: it must then stop,
    not hand a call to the closed pool (CI once saw "cannot schedule new futures after shutdown")."""
    weighing, release = threading.Event(), threading.Event()
    asked: list[tuple] = []

    class Known:
        def __init__(self, ctx, run_docs):  # type: ignore[no-untyped-def]
            pass

        def snapshot(self, keys, pairs, entities, relations):  # type: ignore[no-untyped-def]
            return {}, {}

        def over_budget(self, describer, entities, relations):  # type: ignore[no-untyped-def]
            weighing.set()
            release.wait(10)
            return {("entity", "x"): _Candidate(ITEM, ())}

        def canonical(self, keys, pairs):  # type: ignore[no-untyped-def]
            return set()

    monkeypatch.setattr(summaries_ahead, "_KnownMentions", Known)
    describer = SimpleNamespace(summary=lambda kind, name, fragments: asked.append((kind, name)))
    ctx = SimpleNamespace(describer=lambda: describer, ledger=SimpleNamespace(count=lambda *a: None))
    failures: list[BaseException] = []
    monkeypatch.setattr(threading, "excepthook", lambda hook: failures.append(hook.exc_value))
    ahead = SummariesAhead(ctx, calls=2)  # type: ignore[arg-type]
    with ahead._cv:
        ahead._changed_keys.add("x")
    ahead.all_submitted()
    assert weighing.wait(10)
    ahead.close()
    release.set()
    assert ahead._planner is not None
    ahead._planner.join(10)
    assert not ahead._planner.is_alive()
    assert failures == [] and asked == [] and ahead.asked == 0
