"""Graph retrieval on knowledge bases built by the real pipeline (nlp extraction, communities on)."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path

import pytest

from kbgraph.engine import Engine
from kbgraph.config import Settings
from kbgraph.data import SAMPLE_CORPUS_DIR, SAMPLE_QUESTIONS
from kbgraph.meta.schemas import GraphConfig
from kbgraph.search.context import render_context
from kbgraph.search.retrieve import retrieve
from support.graph_model import GraphModel
from support.scripted_llm import ScriptedLLM

GRAPH = GraphConfig(enabled=True, method="nlp", community=True)

# The second document shares only the guild's name with the first and no word with the question,
# while the distractors repeat the question's words: plain similarity fills the top 3 with them.
BRIDGE_DOCS = {
    "mira.md": "Mira Castell was a surveyor from the port of Varrow. In her fortieth year Mira Castell founded "
               "the Lumen Cartographers Guild.",
    "lumen.md": "The Lumen Cartographers Guild keeps its charts in a tall hall by the harbour. Members of the Lumen "
                "Cartographers Guild wear a silver heron on their coats.",
    "bakers.md": "The Bakers Guild was founded long ago. Its emblem is a golden loaf, and the guild emblem hangs "
                 "over every bakery in the town.",
    "weavers.md": "The Weavers Guild was founded beside the river. The weavers chose an emblem of a spindle; the "
                  "guild emblem is stitched on every bolt of cloth.",
    "masons.md": "The Masons Guild was founded in the hills. Its emblem is a chisel, and the guild carves that "
                 "emblem over every door it builds.",
}
BRIDGE_QUESTION = "What is the emblem of the guild founded by Mira Castell?"


def _names(engine: Engine, kb_id: str, question: str, mode: str, top_n: int) -> list[str]:
    result = retrieve(engine.store, engine.tenant, [kb_id], question, mode, embedder=engine.embedder,
                      settings=engine.settings, top_n=top_n)
    return [c.doc_name for c in result.chunks]


def _indexed(engine: Engine, tmp_path: Path, name: str, docs: dict[str, str]):  # type: ignore[no-untyped-def]
    """A knowledge base ``name`` with a graph, holding ``docs`` (file name -> text)."""
    folder = tmp_path / name
    folder.mkdir()
    for file_name, text in docs.items():
        (folder / file_name).write_text(text, encoding="utf-8")
    kb = engine.create_kb(name, graph=GRAPH)
    engine.index_paths(name, [folder])
    return kb


def test_kg_follows_the_shared_entity_where_naive_misses(settings: Settings, tmp_path: Path) -> None:
    with Engine.open(settings) as engine:
        kb = _indexed(engine, tmp_path, "bridge", BRIDGE_DOCS)
        naive = _names(engine, kb.id, BRIDGE_QUESTION, "naive", 3)
        assert "mira.md" in naive and "lumen.md" not in naive
        if engine.store.engine == "elasticsearch":
            # five pages: Lucene's statistics also count the copies of rewritten rows, which lifts
            # naive's distractors (masons 0.86 against SQLite's 0.71) to within 10% of the best page,
            # where the chains keep them as matching passages; open issue (see bench/README.md)
            pytest.xfail("tiny-corpus BM25 statistics on Elasticsearch keep the distractors as matching passages")
        kg = _names(engine, kb.id, BRIDGE_QUESTION, "kg", 3)
        assert {"mira.md", "lumen.md"} <= set(kg)
        # ppr's passage chains: Mira's page leads through the guild (cited by two pages only, and the
        # far end of her relation that matches "founded") to the guild's own page
        ppr = _names(engine, kb.id, BRIDGE_QUESTION, "ppr", 3)
        assert {"mira.md", "lumen.md"} <= set(ppr), ppr
        result = retrieve(engine.store, engine.tenant, [kb.id], BRIDGE_QUESTION, "kg", embedder=engine.embedder,
                          settings=engine.settings, top_n=3)
        # the context says why: the guild is reached from Mira Castell through their relation
        assert result.entities[0].name == "Mira Castell"
        assert any({r.src_name, r.tgt_name} == {"Mira Castell", "Lumen Cartographers Guild"} for r in result.relations)
        cited = [c.chunk_id for c in result.chunks]
        assert result.citations == dict(enumerate(cited))


# A second hop the question never names: the society's page about who led it shares no name and few
# words with the question; three other societies' pages repeat "first president", "society",
# "publishes" and "journal". Only the entity the journal's page shares with it leads there.
CHAIN_DOCS = {
    "journal.md": "The Journal of Quiet Rivers is a quarterly publication. It is published by the Brenford "
                  "Hydrology Society in the town of Kelm.",
    "presidents.md": "Alma Reyes was elected to lead the Brenford Hydrology Society when it was founded in 1902.",
    "survey.md": "The Brenford Hydrology Society measures rainfall in the hills each spring and prints the gauges "
                 "in a yearly survey.",
    "archivists.md": "The Ostrava Archivists Society publishes a journal on old maps. Its first president was "
                     "Karel Dvorak.",
    "botany.md": "The Lindqvist Botanical Society publishes a journal of ferns. The first president of the society "
                 "was Greta Holm.",
    "chess.md": "The Marrow Chess Society publishes a monthly journal. Its first president was Ivo Brandt.",
}
CHAIN_QUESTION = "Who was the first president of the society that publishes the Journal of Quiet Rivers?"


def test_ppr_chains_never_push_down_the_passages_that_match_the_question(settings: Settings, tmp_path: Path) -> None:
    with Engine.open(settings) as engine:
        kb = _indexed(engine, tmp_path, "chain", CHAIN_DOCS)
        naive = _names(engine, kb.id, CHAIN_QUESTION, "naive", 4)
        assert naive[0] == "journal.md" and "presidents.md" not in naive, naive
        ppr = _names(engine, kb.id, CHAIN_QUESTION, "ppr", 5)
        # the distractors repeat the question's words ("first president", "society", "publishes",
        # "journal") and no fact of the question leads past them (the journal's page names its
        # society in a sentence of its own): they keep their places. The society's page comes next,
        # through the one entity it shares with the journal's page, ahead of the society's other page
        assert ppr[:4] == naive, ppr
        assert ppr[4] == "presidents.md", ppr


@pytest.fixture(scope="module")
def sample_engine(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    from kbgraph.config import load_settings

    settings = load_settings(data_dir=tmp_path_factory.mktemp("sample"), embedding_provider="hash", embedding_dim=64)
    engine = Engine.open(settings)
    kb = engine.create_kb("sample", graph=GRAPH)
    report = engine.index_paths("sample", [SAMPLE_CORPUS_DIR])
    assert report.count("failed") == 0 and report.refresh is not None and report.refresh.reports_generated > 0
    yield engine, kb
    engine.close()


def test_sample_graph_modes_follow_the_relation_where_naive_takes_the_distractor(sample_engine) -> None:  # type: ignore[no-untyped-def]
    # The shipped corpus holds a registry of another city's guilds, their founders and emblems: it
    # repeats the question's words ("emblem", "guild", "founded") and shares no entity with Mira
    # Castell, so plain similarity ranks it above the guild's own document. The graph links Mira
    # Castell to the Lumen Cartographers Guild by the relation that says she founded it.
    engine, kb = sample_engine
    question = next(q for q in json.loads(Path(SAMPLE_QUESTIONS).read_text(encoding="utf-8"))
                    if q["question"] == "What is the emblem of the guild founded by Mira Castell?")
    supporting = set(question["supporting_docs"])
    assert supporting == {"mira_castell.md", "lumen_cartographers_guild.md"}
    naive = _names(engine, kb.id, question["question"], "naive", 2)
    assert "guild_registry.md" in naive and not supporting <= set(naive), naive
    # every graph mode keeps the question's own best match (the registry) first; the chain from
    # Mira Castell's page along the question's fact (she *founded* the guild) brings the guild's
    # page, which shares no word with the question, in right after it; the default (mix) is held to
    # never doing worse than naive (test_sample_default_mode_is_never_below_naive)
    found = _names(engine, kb.id, question["question"], "kg", 3)
    assert supporting <= set(found), ("kg", found)
    found = _names(engine, kb.id, question["question"], "ppr", 3)
    assert supporting <= set(found), ("ppr", found)
    assert supporting <= set(_names(engine, kb.id, question["question"], "mix", 3))


def test_sample_two_hop_questions_find_both_documents(sample_engine) -> None:  # type: ignore[no-untyped-def]
    # On this small corpus naive search already finds both documents of every two-hop question in its
    # top 3 (with the hash embedder: BM25 matches the names), so this checks that the graph modes do
    # at least as well; the bridge test above and the MuSiQue evaluation show where they do better.
    engine, kb = sample_engine
    questions = [q for q in json.loads(Path(SAMPLE_QUESTIONS).read_text(encoding="utf-8")) if q["hops"] == 2]
    assert len(questions) >= 6
    found = {mode: 0 for mode in ("naive", "kg", "ppr", "mix")}
    for q in questions:
        for mode in found:
            found[mode] += set(q["supporting_docs"]) <= set(_names(engine, kb.id, q["question"], mode, 3))
    # with the 64-dim hash embedder on 15 documents every cosine lies within ~1 z of a random
    # passage's, and the Salt War's fact about Corran leads to the observatory's page (a place the
    # treaty is named after): ppr and mix lose one two-hop question that naive finds
    assert found["ppr"] >= len(questions) - 2 and found["mix"] >= len(questions) - 2, found
    # kg trades breadth for precision (loose word matches count less once the question's own entity
    # is found); with nlp extraction some bridges are never linked ("the guild is headquartered in
    # the Glass Tower" names no guild), so kg may miss up to three of the nine here
    assert found["kg"] >= len(questions) - 3, found


# questions where mix may find fewer supporting documents than naive on a page of 2: the flood's
# page states a fact about the Long Quay that leads to the Glass Tower's page (a co-occurrence, not
# a bridge); naive's second and third documents for the academy question lie 0.003 apart (BM25's
# statistics move with every graph row the store holds), and the graph supports the third (the
# Glass Tower, Tobias Wren's work) above the second, whose support (the academy's, 0.09 of the best)
# is under the graph floor; the Salt War's page states the Treaty of Corran, and the best chain along
# that fact reaches the Kestrel Observatory on the Isle of Corran (one name, two things) and goes
# ahead of the treaty's record, which only the question's words match (at most one chain along a
# fact goes early: two used to overflow a page of two and neither went)
PAGE_OF_TWO_LOSSES = {"Which order is led by the captain who commanded the rescue during the Great Flood of Varrow?",
                      "Who founded the academy where Tobias Wren studied?",
                      "Who negotiated the treaty that ended the Salt War?"}


@pytest.mark.parametrize("top", [2, 5])
def test_sample_default_mode_is_never_below_naive(sample_engine, top: int) -> None:  # type: ignore[no-untyped-def]
    # the default mode with a graph (mix) finds at least as many supporting documents as naive search
    # on every sample question (one- and two-hop, English and Chinese) on a full page, and on a short
    # one everywhere but the questions named above
    engine, kb = sample_engine
    questions = json.loads(Path(SAMPLE_QUESTIONS).read_text(encoding="utf-8"))
    lost = []
    for q in questions:
        found = {mode: len(set(q["supporting_docs"]) & set(_names(engine, kb.id, q["question"], mode, top)))
                 for mode in ("naive", "mix")}
        if found["mix"] < found["naive"]:
            lost.append(q["question"])
    allowed = PAGE_OF_TWO_LOSSES if top == 2 else set()
    assert set(lost) <= allowed, lost


def test_mix_takes_the_kg_parts_support(sample_engine) -> None:  # type: ignore[no-untyped-def]
    # the treaty's record (a JSON sheet) shares few words with the question; the kg part reaches it
    # from the Salt War through the treaty, and mix fuses that support with the chains' ranking
    # (MixParams.kg_weight): without it the page of 3 keeps two pages that only echo the question
    engine, kb = sample_engine
    question = "Who negotiated the treaty that ended the Salt War?"
    assert {"salt_war.md", "varrow_records.json"} <= set(_names(engine, kb.id, question, "mix", 3))
    assert {"salt_war.md", "varrow_records.json"} <= set(_names(engine, kb.id, question, "kg", 3))


def test_sample_context_and_citations(sample_engine) -> None:  # type: ignore[no-untyped-def]
    engine, kb = sample_engine
    question = "Who designed the building where the Lumen Cartographers Guild has its headquarters?"
    first = retrieve(engine.store, engine.tenant, [kb.id], question, "mix", embedder=engine.embedder,
                     settings=engine.settings, top_n=4)
    again = retrieve(engine.store, engine.tenant, [kb.id], question, "mix", embedder=engine.embedder,
                     settings=engine.settings, top_n=4)
    assert first.citations == again.citations and first.context == again.context
    assert first.reports, "communities are on: the guild's community report should be in the context"
    assert "---- Community reports ----" in first.context and "[ID:0]" in first.context
    assert any("Lumen Cartographers Guild" == e.name for e in first.entities)
    assert all(c.doc_id and c.content and 0.0 <= c.score <= 1.0 for c in first.chunks)
    for mode in ("kg", "mix", "ppr"):  # each mode's context shows exactly what the result holds
        found = retrieve(engine.store, engine.tenant, [kb.id], question, mode, embedder=engine.embedder,
                         settings=engine.settings, top_n=4)
        assert found.chunks and found.context == render_context(found.chunks, found.entities, found.relations,
                                                                found.reports)


def test_each_refresh_embeds_the_rows_its_run_changed(settings: Settings, tmp_path: Path) -> None:
    from kbgraph.store.base import eq

    first, second = tmp_path / "first", tmp_path / "second"
    for folder, names in ((first, ["mira.md", "lumen.md", "bakers.md"]), (second, ["masons.md"])):
        folder.mkdir()
        for name in names:
            (folder / name).write_text(BRIDGE_DOCS[name], encoding="utf-8")

    def graph_rows(engine: Engine, kb_id: str) -> list[dict]:
        return [d for kind in ("entity", "relation") for d in engine.store.scan(
            engine.tenant, [kb_id], [eq("knowledge_graph_kwd", kind)], fields=["id", "embedded_int"])]

    with Engine.open(settings) as engine:
        kb = engine.create_kb("runs", graph=GRAPH)
        report = engine.index_paths("runs", [first])
        rows = graph_rows(engine, kb.id)
        assert rows and all(r["embedded_int"] == 1 for r in rows)
        assert report.refresh is not None and report.refresh.embedded == len(rows)

        report = engine.index_paths("runs", [second])
        after = graph_rows(engine, kb.id)
        assert len(after) > len(rows) and all(r["embedded_int"] == 1 for r in after)
        # the rows the first run embedded and the second left alone are not embedded again
        assert report.refresh is not None and 0 < report.refresh.embedded < len(after)
        assert report.refresh.embedded >= len(after) - len(rows)


def test_the_question_is_embedded_while_the_model_analyses_it(settings: Settings, scripted_llm: ScriptedLLM,
                                                               tmp_path: Path) -> None:
    """A hosted embedder's round trip goes beside the query analysis' model call, not after it."""
    model = GraphModel()

    def slow(request):  # type: ignore[no-untyped-def]
        time.sleep(0.3)
        return model(request)

    with Engine.open(scripted_llm.settings(settings, embedding_provider="openai")) as engine:
        kb = _indexed(engine, tmp_path, "overlap", BRIDGE_DOCS)
        scripted_llm.reset()
        scripted_llm.responder, scripted_llm.embedding_delay_s = slow, 0.3
        for mode in ("kg", "ppr", "mix"):
            result = retrieve(engine.store, engine.tenant, [kb.id], f"{BRIDGE_QUESTION} ({mode})", mode,
                              embedder=engine.embedder, chat=engine.chat, settings=engine.settings, top_n=3)
            assert result.analysis is not None and result.analysis.source == "llm"
            assert "Mira Castell" in result.analysis.entities
        assert model.kinds == ["query"] * 3
        # each question's analysis and its own embedding were at the server together
        assert scripted_llm.max_in_flight == 2


@pytest.mark.parametrize("top_k", [1024, 100])
def test_graph_modes_search_a_smaller_chunk_pool_than_naive(settings: Settings, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch, top_k: int) -> None:
    # the graph modes fuse a page of MixParams.candidates chunks: their chunk search asks for
    # MixParams.chunk_pool candidates (the settings' top_k when that is fewer); naive keeps top_k
    import kbgraph.search.chunks as chunks_module
    import kbgraph.search.retrieve as retrieve_module

    asked: list[int] = []
    real = chunks_module.chunk_request

    def recording(query, vector, floor):  # type: ignore[no-untyped-def]
        request = real(query, vector, floor)
        asked.append(request.candidates)
        return request

    monkeypatch.setattr(retrieve_module, "chunk_request", recording)
    monkeypatch.setattr(chunks_module, "chunk_request", recording)
    settings = replace(settings, top_k=top_k)
    with Engine.open(settings) as engine:
        kb = _indexed(engine, tmp_path, "pool", BRIDGE_DOCS)
        pool = retrieve_module.MixParams().chunk_pool
        for mode in ("kg", "ppr", "mix"):
            asked.clear()
            _names(engine, kb.id, BRIDGE_QUESTION, mode, 3)
            assert asked == [min(top_k, pool)], mode
        asked.clear()
        _names(engine, kb.id, BRIDGE_QUESTION, "naive", 3)
        assert asked == [top_k]


def test_a_walk_that_settles_only_the_entities_stops_at_the_looser_tolerance(sample_engine, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # with chains ranking the chunks, the ppr walk only picks the result's entities: it stops at
    # entity_tol, and the entities are those of the walk run to the chunk ranking's tolerance
    import kbgraph.search.ppr_search as ppr_search
    from kbgraph.search.ppr_search import PPRParams

    engine, kb = sample_engine
    question = "Who founded the academy where Tobias Wren studied?"
    stops: list[float] = []
    walk = ppr_search.ppr_vector

    def recorded(*args, **kwargs):  # type: ignore[no-untyped-def]
        stops.append(kwargs["tol"])
        return walk(*args, **kwargs)

    monkeypatch.setattr(ppr_search, "ppr_vector", recorded)

    def entities(params: PPRParams) -> list[str]:
        result = retrieve(engine.store, engine.tenant, [kb.id], question, "ppr", embedder=engine.embedder,
                          settings=engine.settings, ppr_params=params)
        return [e.name for e in result.entities]

    defaults = PPRParams()
    loose = entities(defaults)
    assert stops == [defaults.entity_tol] and defaults.entity_tol > defaults.tol
    assert loose and loose == entities(PPRParams(entity_tol=defaults.tol))
    stops.clear()
    entities(PPRParams(chains=None))  # the walk ranks the chunks: the chunk ranking's tolerance
    assert stops == [defaults.tol]
