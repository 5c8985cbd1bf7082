"""An indexing run of many documents (kbgraph/index/run.py) with a model over real HTTP (scripted):
documents extracted at once within the limits, summaries left to the refresh and equal to a rebuild
after deletions, per-minute budgets and a 429's Retry-After shared by every call."""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path

import pytest

from kbgraph.engine import Engine
from kbgraph.config import Settings
from kbgraph.data import SAMPLE_CORPUS_DIR
from kbgraph.graph.invariants import check_graph
from kbgraph.llm import build_chat
from kbgraph.llm.base import Message
from kbgraph.llm.layers.budget import RequestBudget
from kbgraph.meta.schemas import GraphConfig
from kbgraph.store.base import any_of
from support.graph_model import GraphModel
from support.scripted_llm import ScriptedError, ScriptedLLM

GRAPH = GraphConfig(enabled=True, method="general", community=True, max_gleanings=0)


def _corpus(tmp_path: Path) -> tuple[Path, list[str]]:
    folder = tmp_path / "corpus"
    folder.mkdir()
    names = sorted(p.name for p in SAMPLE_CORPUS_DIR.iterdir() if p.suffix in (".md", ".txt"))
    for name in names:
        shutil.copy(SAMPLE_CORPUS_DIR / name, folder / name)
    return folder, names


def _engine(settings: Settings, llm: ScriptedLLM, **overrides) -> Engine:
    return Engine.open(llm.settings(settings, embedding_provider="hash", llm_max_retries=3, **overrides))


def test_documents_are_extracted_together_within_the_knowledge_bases_limit(settings, scripted_llm, tmp_path):
    model = GraphModel()

    def slow(request):
        time.sleep(0.05)  # a model that takes a while: calls in flight together show at the server
        return model(request)

    scripted_llm.responder = slow
    folder, names = _corpus(tmp_path)
    events = []
    # chunks larger than any sample file: one chunk, one extraction call per document
    with _engine(settings, scripted_llm, llm_concurrency=16, llm_kb_concurrency=3) as engine:
        engine.create_kb("kb", graph=GRAPH, chunk_tokens=4000, chunk_overlap=10)
        report = engine.index_paths("kb", [folder], progress=events.append)
    assert report.count("indexed") == len(names) > 3
    # several documents' calls at once, never more than the knowledge base's limit
    assert scripted_llm.max_in_flight == 3
    assert any(e.phase == "documents" and "in flight" in e.message for e in events)
    assert {"summaries", "reports"} & {e.phase for e in events}


@pytest.mark.parametrize("ahead", [True, False])
def test_summaries_are_asked_in_the_calls_the_last_chunks_leave_free(settings, scripted_llm, tmp_path, ahead):
    model = GraphModel()
    lock = threading.Lock()
    asked: list[tuple[str, float]] = []  # (kind, when the request came)
    extracted: list[float] = []  # when each extraction was answered
    extracting = [0]
    summary_asked = threading.Event()

    def timed(request):
        start = time.monotonic()
        kind, answer = model.answer(request)
        if kind == "summarize":
            summary_asked.set()
        if kind == "extract":
            with lock:
                extracting[0] += 1
            time.sleep(0.05)
            with lock:
                last = extracting[0] == 1 and len(extracted) >= 10
            if last and ahead:
                # the run's last chunk, alone in flight: the calls it leaves free ask for the summaries
                # of what it does not name meanwhile (held long enough for a loaded machine)
                summary_asked.wait(10)
            with lock:
                extracting[0] -= 1
        with lock:
            asked.append((kind, start))
            if kind == "extract":
                extracted.append(time.monotonic())
        return answer

    scripted_llm.responder = timed
    folder, _ = _corpus(tmp_path)
    with _engine(settings, scripted_llm, summary_max_tokens=24, llm_concurrency=4, summarize_ahead=ahead) as engine:
        engine.create_kb("kb", graph=GRAPH, chunk_tokens=120, chunk_overlap=10)
        report = engine.index_paths("kb", [folder])
        kb = engine.kb("kb")
        assert check_graph(engine.store, engine.tenant, kb.id, engine.context(kb).describer()) == []
    assert report.refresh is not None and report.refresh.summarized > 0
    last_extraction = max(extracted)
    early = [when for kind, when in asked if kind == "summarize" and when < last_extraction]
    if ahead:
        assert early, "no summary was asked while the last chunks were extracted"
    else:
        assert not early
    # asked ahead or not, each row's summary is asked once (none for fragments that changed after)
    assert model.kinds.count("summarize") == report.refresh.summarized


def test_summaries_are_asked_once_per_row_after_the_merges_and_deletes_equal_a_rebuild(settings, scripted_llm,
                                                                                      tmp_path):
    model = GraphModel()
    scripted_llm.responder = model
    folder, names = _corpus(tmp_path)
    with _engine(settings, scripted_llm, summary_max_tokens=24) as engine:
        engine.create_kb("kb", graph=GRAPH, chunk_tokens=120, chunk_overlap=10)
        report = engine.index_paths("kb", [folder])
        kb = engine.kb("kb")
        ctx = engine.context(kb)
        assert report.refresh is not None and report.refresh.summarized > 0
        # each row over the budget summarized once for the whole run, however many documents touched it
        assert model.kinds.count("summarize") == report.refresh.summarized
        rows = list(engine.store.scan(engine.tenant, [kb.id], [any_of("knowledge_graph_kwd", ["entity", "relation"])]))
        assert rows and not any(r.get("summary_pending_int") for r in rows)
        assert check_graph(engine.store, engine.tenant, kb.id, ctx.describer()) == []

        for name in names[: max(1, len(names) // 4)]:
            engine.delete_document("kb", name)
        rows = list(engine.store.scan(engine.tenant, [kb.id], [any_of("knowledge_graph_kwd", ["entity", "relation"])]))
        assert not any(r.get("summary_pending_int") for r in rows)
        assert check_graph(engine.store, engine.tenant, kb.id, ctx.describer()) == []


def test_a_retry_after_pauses_every_call_to_the_model(settings, scripted_llm):
    scripted_llm.push(ScriptedError(429, "slow down", headers={"Retry-After": "1"}), "fine")
    chat = build_chat(scripted_llm.settings(settings, llm_max_retries=2), cache=False, backoff_base=0.01)
    started = time.monotonic()
    assert chat.chat([Message("user", "hello")]) == "fine"
    assert time.monotonic() - started >= 0.9  # the retry waited out the server's second
    budgeted = chat.inner  # without the cache: Retrying -> Budgeted -> ...
    assert budgeted.budget._paused_until > 0  # every later call to the model waited that second out too


def test_a_token_budget_makes_a_request_wait_for_its_share():
    budget = RequestBudget(requests_per_minute=0, tokens_per_minute=60_000)  # 1,000 tokens a second
    budget.take(60_000, lambda: None)  # the whole minute's budget at once
    budget.take(100, lambda: None)  # must wait for ~0.1 s of refill
    assert budget.waited > 0


def test_reports_are_written_while_the_summaries_run_and_from_the_summaries(settings, scripted_llm, tmp_path):
    model = GraphModel()
    spans: dict[str, list[tuple[float, float]]] = {}

    def slow(request):
        started = time.monotonic()
        kind, answer = model.answer(request)
        # summaries take longer than the rest, as a loaded machine's scheduling cannot undo: reports
        # that do not wait for them start while they run, and reports that waited for all would not
        time.sleep(0.4 if kind == "summarize" else 0.1)
        spans.setdefault(kind, []).append((started, time.monotonic()))
        return answer

    scripted_llm.responder = slow
    folder, _ = _corpus(tmp_path)
    with _engine(settings, scripted_llm, summary_max_tokens=24, report_min_entities=2, report_scope="all") as engine:
        engine.create_kb("kb", graph=GRAPH, chunk_tokens=120, chunk_overlap=10)
        report = engine.index_paths("kb", [folder])
        assert report.refresh is not None and report.refresh.summarized > 0 and report.refresh.reports_generated > 0
        # reports of communities no summary touches went out before the last summary came back
        assert min(start for start, _ in spans["report"]) < max(end for _, end in spans["summarize"])
        # and every report was written from its members' final descriptions: a forced refresh finds
        # each one's inputs unchanged and writes none again
        again = engine.refresh_graph("kb", force=True)
        assert again.reports_generated == 0 and again.reports_reused == report.refresh.reports_generated
        kb = engine.kb("kb")
        assert check_graph(engine.store, engine.tenant, kb.id, engine.context(kb).describer()) == []


def test_only_chunks_whose_first_pass_left_names_out_are_gleaned(settings, scripted_llm, tmp_path):
    model = GraphModel()
    lock = threading.Lock()
    left_out: list[int] = []  # per extraction call: how many of the chunk's names the answer left out

    def forgetful(request):
        kind, answer = model._answer(next(m["content"] for m in reversed(request["messages"]) if m["role"] == "user"))
        with lock:
            model.kinds.append(kind)
            if kind != "extract":
                return answer
            names = answer.count('("entity"')
            if len(left_out) % 2:  # every other chunk: an answer that lists nothing
                left_out.append(names)
                return "<|COMPLETE|>"
            left_out.append(0)
            return answer

    scripted_llm.responder = forgetful
    folder, _ = _corpus(tmp_path)
    graph = GraphConfig(enabled=True, method="general", community=False, max_gleanings=1)
    with _engine(settings, scripted_llm, glean_min_tokens=0, glean_missed_names=2) as engine:
        engine.create_kb("kb", graph=graph, chunk_tokens=120, chunk_overlap=10)
        report = engine.index_paths("kb", [folder])
    expected = sum(1 for n in left_out if n >= 2)
    assert 0 < expected < len(left_out)
    assert model.kinds.count("glean_continue") == expected
    assert report.ledger.decisions == {"glean: missed names": expected,
                                       "glean: names covered": len(left_out) - expected}


def test_the_summaries_go_ahead_of_the_reports_that_do_not_wait_for_them(settings, scripted_llm, tmp_path):
    model = GraphModel()
    lock = threading.Lock()
    calls: list[tuple[str, float, float]] = []

    def slow(request):
        started = time.monotonic()
        time.sleep(0.05)
        answer = model(request)
        with lock:
            calls.append((model.kinds[-1], started, time.monotonic()))
        return answer

    scripted_llm.responder = slow
    folder, _ = _corpus(tmp_path)
    workers = 4
    with _engine(settings, scripted_llm, summary_max_tokens=24, report_min_entities=2, report_scope="all",
                 llm_concurrency=workers, llm_kb_concurrency=workers) as engine:
        engine.create_kb("kb", graph=GRAPH, chunk_tokens=120, chunk_overlap=10)
        report = engine.index_paths("kb", [folder])
    assert report.refresh is not None and report.refresh.summarized >= workers - 1
    summaries_done = max(end for kind, _, end in calls if kind == "summarize")
    reports = [(start, end) for kind, start, end in calls if kind == "report"]
    early = [start for start, _ in reports if start < summaries_done]
    assert early  # reports that need no summary are written meanwhile...
    # ...on the calls the summaries leave them: one while they need the rest, one more as each of
    # the last summaries comes in, never on the share of the summaries still to come
    summary_ends = [end for kind, _, end in calls if kind == "summarize"]
    for t in early:
        unfinished = sum(1 for end in summary_ends if end > t)
        assert sum(1 for s, e in reports if s <= t < e) <= max(1, workers - unfinished)


def test_a_long_document_s_first_model_calls_go_out_while_it_is_still_being_chunked(settings, scripted_llm, tmp_path,
                                                                                   monkeypatch):
    from kbgraph.index import run as index_run

    model = GraphModel()
    first_call = threading.Event()

    def answer(request):
        first_call.set()
        return model(request)

    cut = index_run.iter_document_chunks

    def slow_chunker(ctx, doc_id, parsed):
        for number, chunk in enumerate(cut(ctx, doc_id, parsed)):
            yield chunk
            if number == 0:  # the rest of the document is cut once the first chunk's call is out
                first_call.wait(timeout=10)

    monkeypatch.setattr(index_run, "iter_document_chunks", slow_chunker)
    scripted_llm.responder = answer
    folder = tmp_path / "corpus"
    folder.mkdir()
    (folder / "book.txt").write_text("\n\n".join((SAMPLE_CORPUS_DIR / name).read_text(encoding="utf-8")
                                                 for name in sorted(p.name for p in SAMPLE_CORPUS_DIR.glob("*.md"))),
                                     encoding="utf-8")
    began = time.monotonic()
    with _engine(settings, scripted_llm) as engine:
        engine.create_kb("kb", graph=GRAPH, chunk_tokens=120, chunk_overlap=10)
        report = engine.index_paths("kb", [folder])
    assert report.count("indexed") == 1
    assert first_call.is_set() and time.monotonic() - began < 10  # it never waited out the timeout
    assert model.kinds.count("extract") == report.documents[0].chunks > 3  # every chunk, once
