"""The `global` retrieval mode: map-reduce over community reports (GraphRAG's global search).

Mapping every report through the LLM is what makes global search slow and costly on big graphs,
so reports are first cut to the ``max_reports`` most relevant ones (hybrid search over report
content, optionally at one level and above a rating). The survivors are packed into batches of
``batch_tokens``; each batch is one map call returning scored key points; the best points that fit
``reduce_tokens`` go to one reduce call that writes the answer.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from kbgraph.graph.extract.answer_json import json_values
from kbgraph.llm.base import CancelCheck, ChatModel, LLMNotConfigured, Message
from kbgraph.parse.token_count import count_tokens
from kbgraph.parse.tokenize import tokenize_query
from kbgraph.prompts import prompt_version, render
from kbgraph.search.context import ReportHit, report_block
from kbgraph.search.kg.rows import REPORT_FIELDS, _report_hit, kind_search
from kbgraph.store.base import Condition, DocStore, SearchRequest, eq
from kbgraph.store.records import CommunityReport, graph_text_fields

MAP_PROMPT, REDUCE_PROMPT = "global_map", "global_reduce"
MAP_PHASE, REDUCE_PHASE = "global_map", "global_reduce"


@dataclass(frozen=True)
class GlobalParams:
    level: int | None = None  # None: reports of every level compete on relevance
    min_rating: float = 0.0
    max_reports: int = 24
    batch_tokens: int = 6000
    reduce_tokens: int = 4000
    vector_weight: float = 0.5
    concurrency: int = 4


@dataclass
class KeyPoint:
    description: str
    score: int
    batch: int


@dataclass
class GlobalResult:
    answer: str
    points: list[KeyPoint] = field(default_factory=list)
    reports: list[ReportHit] = field(default_factory=list)
    context: str = ""  # the key points the reduce step saw
    map_calls: int = 0


def select_reports(store: DocStore, tenant: str, kb_ids: Sequence[str], question: str, vector: np.ndarray | None,
                   params: GlobalParams) -> list[ReportHit]:
    where: list[Condition] = []
    if params.level is not None:
        where.append(eq("level_int", params.level))
    if params.min_rating > 0:
        where.append(Condition("rating_flt", "gte", params.min_rating))
    tokens = tokenize_query(question)
    if tokens or vector is not None:
        hits = kind_search(store, tenant, kb_ids, CommunityReport.KIND, tokens, graph_text_fields(), vector,
                           params.max_reports, params.vector_weight, where=where, returned=REPORT_FIELDS)
    else:
        hits = store.search(tenant, SearchRequest(
            kb_ids=list(kb_ids), where=[eq("knowledge_graph_kwd", CommunityReport.KIND), *where],
            order_by=[("rating_flt", "desc")], limit=params.max_reports, fields=REPORT_FIELDS)).hits
    return [_report_hit(h.doc, round(h.score, 6)) for h in hits]


def batches(reports: Sequence[ReportHit], budget: int) -> list[list[ReportHit]]:
    """Reports packed in rank order into groups of at most ``budget`` tokens (a longer report
    goes alone)."""
    out: list[list[ReportHit]] = []
    current: list[ReportHit] = []
    used = 0
    for report in reports:
        cost = count_tokens(report_block(report))
        if current and used + cost > budget:
            out.append(current)
            current, used = [], 0
        current.append(report)
        used += cost
    if current:
        out.append(current)
    return out


def parse_points(answer: str, batch: int) -> list[KeyPoint]:
    """Scored points from a map answer; [] when none can be read (the batch then adds nothing)."""
    text = re.sub(r"<think>.*?(</think>|$)", "", answer or "", flags=re.DOTALL | re.IGNORECASE)
    text = re.sub(r"```(?:json|JSON)?", "", text)
    for value in json_values(text):
        items = value.get("points") if isinstance(value, dict) else value
        if not isinstance(items, list):
            continue
        points = []
        for item in items:
            if not isinstance(item, dict):
                continue
            description = str(item.get("description") or item.get("answer") or "").strip()
            try:
                score = round(float(item.get("score", 0)))
            except (TypeError, ValueError):
                score = 0
            if description and score > 0:
                points.append(KeyPoint(description, max(0, min(100, score)), batch))
        return points
    return []


def reduce_input(points: Sequence[KeyPoint], budget: int) -> str:
    lines: list[str] = []
    used = 0
    for point in sorted(points, key=lambda p: (-p.score, p.batch)):
        line = f"- (importance {point.score}) {' '.join(point.description.split())}"
        cost = count_tokens(line)
        if lines and used + cost > budget:
            break
        lines.append(line)
        used += cost
    return "\n".join(lines)


def global_search(store: DocStore, tenant: str, kb_ids: Sequence[str], question: str, chat: ChatModel | None,
                  vector: np.ndarray | None, *, params: GlobalParams = GlobalParams(), language: str = "English",
                  empty_response: str = "I cannot find this in the knowledge base.",
                  cancel: CancelCheck | None = None) -> GlobalResult:
    if chat is None:
        raise LLMNotConfigured(
            "global search writes its answer with a chat model, and none is configured; set KBGRAPH_LLM_BASE_URL "
            "and KBGRAPH_LLM_MODEL (and KBGRAPH_LLM_API_KEY), or use the kg, ppr, mix or naive mode, which need no LLM")
    reports = select_reports(store, tenant, kb_ids, question, vector, params)
    if not reports:
        return GlobalResult(answer=empty_response)
    groups = batches(reports, params.batch_tokens)

    def run_map(numbered: tuple[int, list[ReportHit]]) -> list[KeyPoint]:
        number, group = numbered
        prompt = render(MAP_PROMPT, question=question, language=language,
                        reports="\n\n".join(report_block(r) for r in group))
        answer = chat.chat([Message("user", prompt)], phase=MAP_PHASE, prompt_version=prompt_version(MAP_PROMPT),
                           temperature=0.0, cancel=cancel)
        return parse_points(answer, number)

    with ThreadPoolExecutor(max_workers=max(1, min(params.concurrency, len(groups)))) as pool:
        points = [p for found in pool.map(run_map, enumerate(groups)) for p in found]
    if not points:
        return GlobalResult(answer=empty_response, reports=reports, map_calls=len(groups))
    context = reduce_input(points, params.reduce_tokens)
    prompt = render(REDUCE_PROMPT, question=question, language=language, points=context,
                    empty_response=empty_response)
    answer = chat.chat([Message("user", prompt)], phase=REDUCE_PHASE, prompt_version=prompt_version(REDUCE_PROMPT),
                       cancel=cancel)
    return GlobalResult(answer=answer.strip() or empty_response, points=sorted(points, key=lambda p: (-p.score, p.batch)),
                        reports=reports, context=context, map_calls=len(groups))
