"""bulk_gc: the collector is tuned inside the scope and exactly restored after it."""

from __future__ import annotations

import gc
import threading

import pytest

from kbgraph.index.chunks import parse_document
from kbgraph.index.context import KBContext
from kbgraph.index.delete import delete_document
from kbgraph.index.extraction import extract_document
from kbgraph.index.merge import merge_document
from kbgraph.index.refresh import refresh_kb
from kbgraph.utils.gc_scope import YOUNG_THRESHOLD, bulk_gc


@pytest.fixture(autouse=True)
def _clean_collector():
    before = gc.get_threshold()
    gc.unfreeze()
    yield
    gc.unfreeze()
    gc.set_threshold(*before)


def test_inside_objects_that_existed_are_frozen_and_young_collections_wait():
    gc.set_threshold(700, 10, 10)
    with bulk_gc():
        assert gc.get_freeze_count() > 0
        assert gc.get_threshold() == (YOUNG_THRESHOLD, 10, 10)
    assert gc.get_freeze_count() == 0
    assert gc.get_threshold() == (700, 10, 10)


def test_cycles_made_inside_are_collected_after():
    class Node:
        pass

    with bulk_gc():
        a, b = Node(), Node()
        a.other, b.other = b, a
        probe = [a]
        import weakref

        ref = weakref.ref(a)
        del a, b, probe
    gc.collect()
    assert ref() is None


def test_nested_scopes_restore_once_at_the_outermost_exit():
    gc.set_threshold(900, 11, 12)
    with bulk_gc():
        with bulk_gc():
            assert gc.get_threshold()[0] == YOUNG_THRESHOLD
        assert gc.get_threshold()[0] == YOUNG_THRESHOLD  # the outer scope still runs
        assert gc.get_freeze_count() > 0
    assert gc.get_threshold() == (900, 11, 12)
    assert gc.get_freeze_count() == 0


def test_an_exception_inside_still_restores():
    gc.set_threshold(700, 10, 10)
    with pytest.raises(RuntimeError):
        with bulk_gc():
            raise RuntimeError("boom")
    assert gc.get_threshold() == (700, 10, 10)
    assert gc.get_freeze_count() == 0


def test_overlapping_scopes_on_threads_restore_when_the_last_leaves():
    gc.set_threshold(700, 10, 10)
    inside, release = threading.Event(), threading.Event()

    def worker() -> None:
        with bulk_gc():
            inside.set()
            release.wait(10)

    thread = threading.Thread(target=worker)
    with bulk_gc():
        thread.start()
        assert inside.wait(10)
    assert gc.get_threshold()[0] == YOUNG_THRESHOLD  # the worker's scope is still open
    release.set()
    thread.join(10)
    assert gc.get_threshold() == (700, 10, 10)
    assert gc.get_freeze_count() == 0


def test_objects_the_process_froze_itself_stay_frozen():
    gc.freeze()  # as a server does before forking workers
    frozen = gc.get_freeze_count()
    with bulk_gc():
        assert gc.get_threshold()[0] == YOUNG_THRESHOLD
    # still frozen (a few frozen objects may have been freed by reference counting meanwhile)
    assert gc.get_freeze_count() > frozen // 2


def test_a_larger_threshold_of_the_process_is_kept():
    gc.set_threshold(200_000, 10, 10)
    with bulk_gc():
        assert gc.get_threshold()[0] == 200_000
    assert gc.get_threshold() == (200_000, 10, 10)


class _ThresholdSpy:
    """A store that notes the collector's young threshold at every call of the store inside it."""

    def __init__(self, inner: object, seen: list[int]) -> None:
        self._inner, self._seen = inner, seen

    def __getattr__(self, name: str):
        attr = getattr(self._inner, name)
        if not callable(attr):
            return attr

        def call(*args, **kwargs):
            self._seen.append(gc.get_threshold()[0])
            return attr(*args, **kwargs)

        return call


def test_every_indexing_step_works_inside_the_scope(tmp_path):
    """Real parts: the SQLite store, the chunker, the nlp extractor, the hash embedder."""
    from kbgraph.config import load_settings
    from kbgraph.llm.embedders import HashEmbedder
    from kbgraph.meta.schemas import GraphConfig
    from kbgraph.parse.readers import ParsedDocument
    from kbgraph.store import open_store

    settings = load_settings(data_dir=tmp_path, store="sqlite", embedding_provider="hash", embedding_dim=16)
    store = open_store(settings)
    gc.set_threshold(700, 10, 10)
    text = ("Mira Castell travelled to Varrow with the Lumen Guild. Tobias Wren met Mira Castell in Varrow. "
            "The Lumen Guild hired Tobias Wren.")
    steps = {
        "parse": lambda ctx: parse_document(ctx, "d1", ParsedDocument("d1.txt", text, [], "text/plain")),
        "extract": lambda ctx: extract_document(ctx, "d1"),
        "merge": lambda ctx: merge_document(ctx, "d1"),
        "refresh": lambda ctx: refresh_kb(ctx),
        "delete": lambda ctx: delete_document(ctx, "d1"),
    }
    for name, step in steps.items():
        seen: list[int] = []
        ctx = KBContext(store=_ThresholdSpy(store, seen), tenant="t", kb_id="kb", settings=settings,
                                 embedder=HashEmbedder(dim=16), graph=GraphConfig(enabled=True, method="nlp"),
                                 chunk_tokens=64, chunk_overlap=8)
        step(ctx)
        assert seen and set(seen) == {YOUNG_THRESHOLD}, name
        assert gc.get_threshold() == (700, 10, 10), name
    store.close()
