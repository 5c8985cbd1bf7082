"""The graph must never make answers worse: a narrator named in every document (the hub of a chat
log) must not take over the ranking when the question's answer is told by its topic words."""

from __future__ import annotations

from collections import Counter
import pytest

from kbgraph.engine import Engine
from kbgraph.config import load_settings
from kbgraph.meta.schemas import GraphConfig
from kbgraph.search.retrieve import retrieve
from kbgraph.store.base import eq
from kbgraph.store.records import Entity

# Each log is the narrator talking with someone about one topic. The narrator is in every log and
# in every question, so an entity-first ranking anchors on her and cannot tell the logs apart; only
# the topic words can.
LOGS = {
    "tomatoes.txt": "OliveQuill: my tomatoes keep splitting after the rain\nRuthAnning: water them evenly, "
                    "a deep soak twice a week, and add mulch so the soil stays moist\nOliveQuill: mulch it is",
    "bicycle.txt": "OliveQuill: the bicycle chain skips on the steep hill\nMarcoVenn: the chain is stretched, "
                   "replace it together with the rear cassette\nOliveQuill: thanks, ordering both",
    "sourdough.txt": "OliveQuill: my sourdough loaf came out flat and dense\nRuthAnning: your starter is weak, "
                     "feed it twice a day for a week before baking\nOliveQuill: I'll feed it more",
    "passport.txt": "OliveQuill: how long does a passport renewal take?\nDinaKorr: about six weeks by post, "
                    "so book the appointment early\nOliveQuill: ugh, ok",
    "violin.txt": "OliveQuill: the violin strings squeak when I bow\nMarcoVenn: put more rosin on the bow hair "
                  "and keep the bow straight\nOliveQuill: will try",
    "roof.txt": "OliveQuill: water is dripping from the roof near the chimney\nDinaKorr: the flashing around "
                "the chimney has cracked, a roofer can reseal it\nOliveQuill: calling one tomorrow",
    "cat.txt": "OliveQuill: the cat scratches the sofa all day\nRuthAnning: give her a tall scratching post "
               "next to the sofa and reward her there\nOliveQuill: good idea",
    "laptop.txt": "OliveQuill: my laptop battery drains in an hour\nMarcoVenn: the battery is worn out, check "
                  "its cycle count and replace the battery\nOliveQuill: it's at 900 cycles",
    "chess.txt": "OliveQuill: I keep losing chess games in the opening\nDinaKorr: learn one opening well, "
                 "the Italian Game, and control the centre early\nOliveQuill: sounds good",
    "paint.txt": "OliveQuill: the new wall paint is peeling off in strips\nRuthAnning: the wall was not "
                 "primed, sand it and use a primer before painting again\nOliveQuill: lesson learned",
}
QUESTIONS = {
    "What did Olive Quill hear about tomatoes splitting after rain?": "tomatoes.txt",
    "What should Olive Quill do about the bicycle chain that skips?": "bicycle.txt",
    "Why was Olive Quill's sourdough loaf flat?": "sourdough.txt",
    "How long does Olive Quill's passport renewal take?": "passport.txt",
    "How can Olive Quill stop the violin strings squeaking?": "violin.txt",
    "Why is water dripping from Olive Quill's roof near the chimney?": "roof.txt",
    "How can Olive Quill stop the cat scratching the sofa?": "cat.txt",
    "Why does Olive Quill's laptop battery drain so fast?": "laptop.txt",
    "How can Olive Quill stop losing chess games in the opening?": "chess.txt",
    "Why is Olive Quill's wall paint peeling?": "paint.txt",
}


@pytest.fixture(scope="module")
def hub_engine(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    root = tmp_path_factory.mktemp("hub")
    folder = root / "logs"
    folder.mkdir()
    for name, text in LOGS.items():
        (folder / name).write_text(text, encoding="utf-8")
    settings = load_settings(data_dir=root / "data", embedding_provider="hash", embedding_dim=64)
    engine = Engine.open(settings)
    kb = engine.create_kb("logs", graph=GraphConfig(enabled=True, method="nlp", community=True))
    report = engine.index_paths("logs", [folder])
    assert report.count("failed") == 0
    yield engine, kb
    engine.close()


def _ranked(engine: Engine, kb_id: str, question: str, mode: str) -> list[str]:
    result = retrieve(engine.store, engine.tenant, [kb_id], question, mode, embedder=engine.embedder,
                      settings=engine.settings, top_n=5)
    return list(dict.fromkeys(c.doc_name for c in result.chunks))


def test_the_narrator_is_one_entity_in_every_log(hub_engine) -> None:  # type: ignore[no-untyped-def]
    # the premise: the nlp extractor reads "OliveQuill:" as the person Olive Quill, in all ten logs
    engine, kb = hub_engine
    rows = {d["entity_key_kwd"]: d for d in engine.store.scan(
        engine.tenant, [kb.id], [eq("knowledge_graph_kwd", Entity.KIND)],
        fields=["entity_key_kwd", "entity_type_kwd", "chunk_ids_kwd"])}
    assert rows["olive quill"]["entity_type_kwd"] == "person"
    assert len(rows["olive quill"]["chunk_ids_kwd"]) == len(LOGS)


@pytest.mark.parametrize("mode", ["naive", "kg", "ppr", "mix"])
def test_topic_words_find_the_log_when_the_question_names_the_hub(hub_engine, mode: str) -> None:  # type: ignore[no-untyped-def]
    engine, kb = hub_engine
    firsts: Counter[str] = Counter()
    missed = []
    for question, gold in QUESTIONS.items():
        ranked = _ranked(engine, kb.id, question, mode)
        firsts[ranked[0] if ranked else ""] += 1
        if gold not in ranked[:2]:
            missed.append((question, ranked[:3]))
    assert not missed, missed
    # no log comes first for more than one question: the hub's logs do not take over
    assert firsts.most_common(1)[0][1] == 1, firsts
