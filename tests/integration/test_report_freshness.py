"""Community reports follow the graph they describe: a report is written again when its members'
descriptions or relations change, not only when its membership does, so the reports of a knowledge
base do not depend on when its documents arrived."""

from __future__ import annotations

from pathlib import Path

from kbgraph.engine import Engine
from kbgraph.config import Settings
from kbgraph.meta import GraphConfig
from kbgraph.store.base import eq
from kbgraph.store.records import CommunityReport

GRAPH = GraphConfig(enabled=True, method="nlp", community=True)
FIRST = "Mira Castell founded the Lumen Guild in Varrow. The Lumen Guild mapped the coast near Varrow.\n"
SECOND = ("Mira Castell led the Lumen Guild for thirty years. Mira Castell taught in Varrow, and the Lumen Guild "
          "kept its charts in Varrow.\n")


def _reports(engine: Engine, kb: str) -> dict[tuple[str, ...], tuple[str, str, list[tuple[str, str]]]]:
    kb_id = engine.kb(kb).id
    rows = [CommunityReport.from_doc(d) for d in engine.store.scan(
        engine.tenant, [kb_id], [eq("knowledge_graph_kwd", CommunityReport.KIND)])]
    return {tuple(r.member_keys): (r.title, r.summary, [(f.summary, f.explanation) for f in r.findings]) for r in rows}


def test_reports_do_not_depend_on_arrival_order(settings: Settings, tmp_path: Path) -> None:
    (tmp_path / "first.txt").write_text(FIRST)
    (tmp_path / "second.txt").write_text(SECOND)
    with Engine.open(settings) as engine:
        engine.create_kb("one by one", graph=GRAPH)
        engine.index_paths("one by one", [tmp_path / "first.txt"])
        early = _reports(engine, "one by one")
        report = engine.index_paths("one by one", [tmp_path / "second.txt"])
        assert report.refresh is not None and report.refresh.reports_generated >= 1
        engine.create_kb("together", graph=GRAPH)
        engine.index_paths("together", [tmp_path / "first.txt", tmp_path / "second.txt"])
        late, together = _reports(engine, "one by one"), _reports(engine, "together")
    assert early and late == together
    # the same members as before, described anew: the old text would have described half the graph
    same_members = early.keys() & late.keys()
    assert same_members and any(early[k] != late[k] for k in same_members)
