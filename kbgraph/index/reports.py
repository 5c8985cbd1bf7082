"""Community reports: what a report is written from (its members, the relations among them, and
who writes it: the model, or its rows put together), whether a stored one still describes it, and
writing one.

``CommunityReports`` holds one refresh's communities under their report ids; the communities phase
(kbgraph/index/communities.py) decides with it which reports to write and when.
"""

from __future__ import annotations

import hashlib
import queue
from collections.abc import Callable, Sequence
from concurrent.futures import Executor

import orjson

from kbgraph.graph.communities import Community, largest_component
from kbgraph.graph.reports import extractive_order, extractive_report, llm_report, report_text
from kbgraph.index.context import KBContext, check_cancel
from kbgraph.index.refresh_state import RefreshResult
from kbgraph.index.schedule import _SummariesFirst, _SummaryWatch
from kbgraph.llm.base import CancelCheck
from kbgraph.parse.tokenize import token_string
from kbgraph.store.base import eq
from kbgraph.store.records import CommunityReport, Entity, Relation, report_id


def _existing_reports(ctx: KBContext) -> dict[str, str]:
    """Report id -> the hash of the input it was written from ("" for none or a fallback)."""
    return {d["id"]: d.get("input_hash_kwd", "") for d in ctx.store.scan(
        ctx.tenant, [ctx.kb_id], [eq("knowledge_graph_kwd", CommunityReport.KIND)], fields=["id", "input_hash_kwd"])}


def _report_input_hash(members: Sequence[Entity], relations: Sequence[Relation], by_llm: bool,
                       order: tuple[list[str], list[tuple[str, str]]] | None = None) -> str:
    """What a report is written from, as one hash: its members' names, types and descriptions and the
    relations among them. A report is reused only while this stays the same, so it never describes
    an earlier graph (members alone are not enough: a description or relation may have changed).
    A put-together report also tells its members and relations in an ``order`` (by PageRank and
    mentions) that a deletion elsewhere can change while its rows stay the same: the order is part
    of its hash (a model's report is not asked again for that)."""
    digest = hashlib.sha256(b"llm" if by_llm else b"extractive")
    for e in sorted(members, key=lambda e: e.key):
        digest.update(orjson.dumps([e.key, e.name, e.type, e.description]))
    for r in sorted(relations, key=lambda r: (r.src_key, r.tgt_key)):
        digest.update(orjson.dumps([r.src_key, r.tgt_key, r.description, r.weight]))
    if not by_llm and order is not None:
        digest.update(orjson.dumps(order))
    return digest.hexdigest()


_BY_MODEL = "by the model"


def _report_author(ctx: KBContext, entities: int, component: str, largest: str) -> str:
    """Who writes a community's report: the model (``_BY_MODEL``), else its rows, for the reason given.
    A single entity has nothing to summarize beyond its own description, and a community under
    ``report_min_entities`` (a pair and its one relation) little beyond its rows. Under
    ``report_scope = "largest"`` only the largest component's communities are written by the model:
    the islands outside it are what one or two documents say on their own, which their rows and
    chunks already hold, and they cost half the report calls or more (100 MuSiQue passages: 62 of
    122; a book five times over, names renamed per copy: 116 of 144)."""
    if ctx.chat is None:
        return "from rows: no model"
    if entities < max(2, ctx.settings.report_min_entities):
        return "from rows: small community"
    if ctx.settings.report_scope != "all" and component != largest:
        return "from rows: outside the largest component"
    return _BY_MODEL


class CommunityReports:
    """The communities of one refresh under their report ids, and what each report is written from.
    ``todo``: the reports whose input changed (so are written again); ``events``: what the report
    threads hand back, as it comes: a written report's future, None for a report kept as it was, or
    the summary pass's failure."""

    def __init__(self, ctx: KBContext, communities: Sequence[Community], entities: list[Entity],
                 relations: list[Relation]) -> None:
        self.ctx = ctx
        self.by_key = {e.key: e for e in entities}
        self._relations = relations
        self._touching: dict[str, list[int]] = {}
        for number, r in enumerate(relations):
            self._touching.setdefault(r.src_key, []).append(number)
        largest = largest_component(communities)
        self.existing = _existing_reports(ctx)
        self.wanted = {report_id(ctx.kb_id, c.level, c.member_keys): c for c in communities}
        self.authors = {rid: _report_author(ctx, sum(1 for k in c.member_keys if k in self.by_key), c.component,
                                            largest) for rid, c in self.wanted.items()}
        self.inputs: dict[str, str] = {}
        self.todo: list[str] = []
        self.events: queue.SimpleQueue = queue.SimpleQueue()

    def by_model(self, rid: str) -> bool:
        return self.authors[rid] == _BY_MODEL

    def members(self, rid: str) -> list[Entity]:
        return [self.by_key[k] for k in self.wanted[rid].member_keys if k in self.by_key]

    def member_relations(self, members: set[str]) -> list[Relation]:
        # through an index by source key, not a scan of every relation per community; in the
        # relations' own order, as the scan gave them
        found = sorted(n for key in members for n in self._touching.get(key, ())
                       if self._relations[n].tgt_key in members)
        return [self._relations[n] for n in found]

    def waits(self, rid: str, summaries: _SummaryWatch | None) -> frozenset[str]:
        """The rows of the community the running summary pass rewrites (none without one)."""
        if summaries is None or not summaries.pending:
            return frozenset()
        members = set(self.wanted[rid].member_keys)
        return summaries.waits([self.by_key[k].id for k in members if k in self.by_key]
                               + [r.id for r in self.member_relations(members)])

    def changed(self, rid: str) -> bool:
        """Whether the stored report (if any) was written from another input than the community's now."""
        community, members = self.wanted[rid], self.members(rid)
        inner = self.member_relations(set(community.member_keys))
        by_model = self.by_model(rid)
        self.inputs[rid] = _report_input_hash(members, inner, by_model,
                                              None if by_model else extractive_order(community, members, inner))
        return not self.existing.get(rid) or self.existing[rid] != self.inputs[rid]

    def start(self, rid: str, write: Callable[[str], CommunityReport], pools: tuple[Executor, Executor],
              summaries: _SummaryWatch | None) -> None:
        """Hand the report to the model's pool or the rows' (``pools``) if it is to be written again."""
        # run by the summary thread for a report that waited: anything going wrong is handed on
        try:
            failure = summaries.failure() if summaries is not None else None
            if failure is not None:
                self.events.put(failure)
            elif self.changed(rid):
                self.todo.append(rid)
                by_model, by_rows = pools
                (by_model if self.by_model(rid) else by_rows).submit(write, rid).add_done_callback(self.events.put)
            else:
                self.events.put(None)
        except BaseException as exc:  # the pool closed after a failure: nobody waits any more
            self.events.put(exc)


def write_report(reports: CommunityReports, rid: str, *, gate: _SummariesFirst, version: int,
                 result: RefreshResult, cancel: CancelCheck) -> CommunityReport:
    """One community's report, by the model (within ``gate``'s calls) or put together from its rows."""
    check_cancel(cancel)
    ctx = reports.ctx
    community = reports.wanted[rid]
    members = set(community.member_keys)
    member_entities = reports.members(rid)
    if reports.by_model(rid):
        with gate:
            content = llm_report(ctx.chat, community, member_entities, reports.member_relations(members),
                                 language=ctx.settings.language)
    else:
        content = extractive_report(community, member_entities, reports.member_relations(members))
    if getattr(content, "fallback", False):
        result.report_fallbacks += 1
    return CommunityReport(
        kb_id=ctx.kb_id, level=community.level, community=community.label, parent=community.parent,
        member_keys=sorted(community.member_keys), title=content.title, summary=content.summary,
        findings=list(content.findings), rating=float(content.rating),
        rating_explanation=content.rating_explanation, graph_version=version,
        content_tokens=token_string(report_text(content)),
        # a fallback is written again at the next refresh, when the model may answer
        input_hash="" if getattr(content, "fallback", False) else reports.inputs[rid],
    )
