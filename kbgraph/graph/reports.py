"""Community reports: an extractive one for `nlp` mode, an LLM-written one otherwise.

Both take one community and plain entity/relation records and return a ``ReportContent``; storing
it as a ``CommunityReport`` (ids, graph version, vectors) is the caller's job.
"""

from __future__ import annotations

import ast
import csv
import io
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from kbgraph.graph.communities import Community
from kbgraph.llm.base import CancelCheck, ChatModel, Message
from kbgraph.parse.token_count import count_tokens
from kbgraph.prompts import prompt_version, render
from kbgraph.store.records import Entity, Finding, Relation

PHASE = "report"
PROMPT = "community_report"


@dataclass
class ReportContent:
    title: str
    summary: str
    findings: list[Finding] = field(default_factory=list)
    rating: float = 0.0
    rating_explanation: str = ""
    fallback: bool = False  # the LLM answer was unusable twice, so this is the extractive report


def report_text(content: ReportContent) -> str:
    """The report as one text, for embedding, BM25 and the retrieval context."""
    parts = [f"# {content.title}", content.summary]
    for finding in content.findings:
        parts.append(f"## {finding.summary}\n{finding.explanation}".rstrip())
    return "\n\n".join(p for p in parts if p.strip())


# ---------------------------------------------------------------------------------------------
# shared ordering


def _members(community: Community, entities: Sequence[Entity]) -> list[Entity]:
    """The community's entities, most central first (PageRank, then mentions, then key)."""
    keys = set(community.member_keys)
    chosen = [e for e in entities if e.key in keys]
    chosen.sort(key=lambda e: (-e.pagerank, -e.mention_count, e.key))
    return chosen


def extractive_order(community: Community, entities: Sequence[Entity], relations: Sequence[Relation]
                     ) -> tuple[list[str], list[tuple[str, str]]]:
    """What a put-together report's text depends on beyond its rows' contents: the order its
    members and relations are told in (by PageRank and mentions, which shift as documents come
    and go while the rows themselves stay the same)."""
    return ([e.key for e in _members(community, entities)],
            [(r.src_key, r.tgt_key) for r in _relations(community, relations)])


def _relations(community: Community, relations: Sequence[Relation]) -> list[Relation]:
    """Relations inside the community first, then those leaving it; heaviest first within each."""
    keys = set(community.member_keys)
    touching = [r for r in relations if r.src_key in keys or r.tgt_key in keys]
    touching.sort(key=lambda r: (not (r.src_key in keys and r.tgt_key in keys), -r.weight,
                                 -r.mention_count, r.src_key, r.tgt_key))
    return touching


_SENTENCE_END = re.compile(r"[.!?。！？]")


def _shorten(text: str, limit: int) -> str:
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    head = text[:limit]
    ends = [m.end() for m in _SENTENCE_END.finditer(head)]
    if ends and ends[-1] > limit // 2:
        return head[: ends[-1]]
    space = head.rfind(" ")
    return (head[:space] if space > limit // 2 else head).rstrip() + "…"


# ---------------------------------------------------------------------------------------------
# extractive (no LLM)


def _rating(members: int, relations: Sequence[Relation], keys: set[str]) -> tuple[float, str]:
    internal = [r for r in relations if r.src_key in keys and r.tgt_key in keys]
    weight = sum(max(r.weight, 0.0) for r in internal)
    # grows with size and connection strength, saturating at 10: a rough stand-in for "importance"
    rating = round(min(10.0, 2.0 * math.log1p(members) + math.log1p(weight)), 1)
    return rating, f"{members} entities, {len(internal)} relations, total relation weight {weight:.1f}."


def extractive_report(community: Community, entities: Sequence[Entity], relations: Sequence[Relation],
                      max_summary_chars: int = 1500, max_findings: int = 8) -> ReportContent:
    members = _members(community, entities)
    known = {e.key for e in members}
    names = [e.name or e.key for e in members] + [k for k in community.member_keys if k not in known]
    by_key = {e.key: e for e in members}
    title = ", ".join(names[:3]) + (f" (+{len(names) - 3})" if len(names) > 3 else "")

    pieces: list[str] = []
    used = 0
    for e in members:
        desc = _shorten(e.description, 300)
        piece = f"{e.name or e.key} ({e.type}): {desc}" if desc else ""
        if not piece:
            continue
        if pieces and used + len(piece) + 1 > max_summary_chars:
            break
        pieces.append(_shorten(piece, max_summary_chars))
        used += len(piece) + 1
    summary = " ".join(pieces) or ", ".join(names)

    keys = set(community.member_keys)
    findings: list[Finding] = []
    for r in _relations(community, relations):
        if len(findings) >= max_findings or not (r.src_key in keys and r.tgt_key in keys):
            break
        src = r.src_name or getattr(by_key.get(r.src_key), "name", "") or r.src_key
        tgt = r.tgt_name or getattr(by_key.get(r.tgt_key), "name", "") or r.tgt_key
        explanation = _shorten(r.description or ", ".join(r.keywords), 500)
        findings.append(Finding(f"{src} — {tgt}", explanation))
    if not findings:  # no internal relation to speak of: let the central entities be the findings
        findings = [Finding(f"{e.name or e.key} ({e.type})", _shorten(e.description, 500))
                    for e in members[:max_findings] if e.description]

    rating, explanation = _rating(len(community.member_keys), relations, keys)
    return ReportContent(title, summary, findings, rating, explanation)


# ---------------------------------------------------------------------------------------------
# LLM


def _csv(rows: Sequence[Sequence[Any]]) -> str:
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows(rows)
    return buffer.getvalue()


_ENTITY_HEAD = ["id", "entity", "type", "description"]
_RELATION_HEAD = ["id", "source", "target", "description", "weight"]


@lru_cache(maxsize=1)
def _heads_tokens() -> int:
    return count_tokens(_csv([_ENTITY_HEAD])) + count_tokens(_csv([_RELATION_HEAD]))


def build_tables(community: Community, entities: Sequence[Entity], relations: Sequence[Relation],
                 max_tokens: int) -> tuple[str, str]:
    """The entity and relation CSV tables, most central rows first, within ``max_tokens`` together.

    Entities get the first 40% of the budget, relations what is left, and entities that did not fit
    at first may then use what relations left over. At least one row of each goes in.
    """
    members = _members(community, entities)
    touching = _relations(community, relations)
    names = {e.key: e.name or e.key for e in members}
    entity_rows = [[i, e.name or e.key, e.type, _shorten(e.description, 1500)] for i, e in enumerate(members)]
    relation_rows = [[i, r.src_name or names.get(r.src_key, r.src_key), r.tgt_name or names.get(r.tgt_key, r.tgt_key),
                      _shorten(r.description, 1500), round(r.weight, 3)] for i, r in enumerate(touching)]
    # one CSV line per row, written once: a table is its head line and the lines it takes
    entity_lines = [_csv([row]) for row in entity_rows]
    relation_lines = [_csv([row]) for row in relation_rows]
    used = _heads_tokens()
    # A token is at least one byte: when all rows together have no more bytes than the budget,
    # the three fills below take every row, so none needs tokenizing (most communities are small).
    whole = _table(_ENTITY_HEAD, entity_lines), _table(_RELATION_HEAD, relation_lines)
    if used + sum(len(line.encode("utf-8")) for line in entity_lines + relation_lines) <= max_tokens:
        return whole
    # English runs ~4 bytes a token: tables of up to a few times the budget in bytes usually fit in
    # tokens, which one count of their whole text tells (~1 ms) before rows are counted one by one
    if count_tokens(whole[0] + whole[1]) <= max_tokens:
        return whole
    taken_e: list[str] = []
    taken_r: list[str] = []

    def fill(rows: list[list[Any]], lines: list[str], taken: list[str], limit: int) -> None:
        nonlocal used
        while len(taken) < len(rows):
            cost = _row_tokens(rows[len(taken)], lines[len(taken)])
            if taken and used + cost > limit:
                return
            taken.append(lines[len(taken)])
            used += cost

    fill(entity_rows, entity_lines, taken_e, int(max_tokens * 0.4))
    fill(relation_rows, relation_lines, taken_r, max_tokens)
    fill(entity_rows, entity_lines, taken_e, max_tokens)
    return _table(_ENTITY_HEAD, taken_e), _table(_RELATION_HEAD, taken_r)


def _table(head: list[str], lines: list[str]) -> str:
    return _csv([head]) + "".join(lines)


def _row_tokens(row: list[Any], text: str) -> int:
    """Tokens of one CSV row (``text``, its line). The row number is a token run of its own (the
    tokenizer never joins digits with the comma after them), so the rest of the row, which is the
    same in every community an entity or relation belongs to, is counted once per text."""
    number = str(row[0])
    if isinstance(row[0], int) and text.startswith(number + ","):
        return _number_tokens(number) + _tail_tokens(text[len(number):])
    return count_tokens(text)


@lru_cache(maxsize=4096)
def _number_tokens(number: str) -> int:
    return count_tokens(number)


@lru_cache(maxsize=65536)
def _tail_tokens(tail: str) -> int:
    return count_tokens(tail)


@lru_cache(maxsize=16)
def _skeleton_tokens(language: str) -> int:
    """Tokens of the report prompt without its tables: the same for every community."""
    return count_tokens(render(PROMPT, entities_csv="", relations_csv="", language=language, min_findings=3,
                               max_findings=8))


def _parses(answer: str) -> bool:
    return parse_report(answer) is not None


def llm_report(chat: ChatModel, community: Community, entities: Sequence[Entity], relations: Sequence[Relation],
               language: str = "English", max_input_tokens: int = 8000,
               cancel: CancelCheck | None = None) -> ReportContent:
    """An LLM-written report; a garbled answer is asked again once, then the extractive report stands in.

    LLM failures (``LLMError``) and ``Cancelled`` propagate: only an answer we cannot read falls back.
    """
    entities_csv, relations_csv = build_tables(community, entities, relations,
                                               max(200, max_input_tokens - _skeleton_tokens(language)))
    prompt = render(PROMPT, entities_csv=entities_csv, relations_csv=relations_csv, language=language,
                    min_findings=3, max_findings=8)
    version = prompt_version(PROMPT)
    for suffix in ("", "#retry1"):
        # the suffix changes the cache key, so the retry is a fresh answer, not the cached garbage
        answer = chat.chat([Message("user", prompt)], phase=PHASE, prompt_version=version + suffix, cancel=cancel,
                           accept=_parses)
        parsed = parse_report(answer)
        if parsed is not None:
            if parsed.rating < 0:
                rating, explanation = _rating(len(community.member_keys), relations, set(community.member_keys))
                parsed.rating, parsed.rating_explanation = rating, parsed.rating_explanation or explanation
            return parsed
    extractive = extractive_report(community, entities, relations)
    extractive.fallback = True
    return extractive


# ---------------------------------------------------------------------------------------------
# parsing what models actually return

_THINK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"```[a-zA-Z0-9_-]*\s*\n?(.*?)```", re.DOTALL)
_TRAILING_COMMA = re.compile(r",\s*([}\]])")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def _balanced_object(text: str) -> str | None:
    """The first {...} of ``text`` with braces balanced outside string literals."""
    start = text.find("{")
    if start < 0:
        return None
    depth, quote, escaped = 0, "", False
    for i in range(start, len(text)):
        ch = text[i]
        if quote:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == quote:
                quote = ""
        elif ch in "\"'":
            # an apostrophe inside a word ("it's") is not a string delimiter
            if ch == "'" and i > 0 and text[i - 1].isalnum():
                continue
            quote = ch
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return text[start: i + 1]
    return None


def _plain_object(text: str) -> dict[str, Any] | None:
    """The answer as a JSON object when it is nothing else (what the prompt asks for): the object
    the scan for a balanced one would find, without the character-by-character scan."""
    stripped = text.strip()
    if not (stripped.startswith("{") and stripped.endswith("}")) or "```" in stripped:
        return None
    try:
        data = json.loads(stripped, strict=False)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def _load(candidate: str) -> Any:
    for attempt in (candidate, _TRAILING_COMMA.sub(r"\1", candidate)):
        try:
            return json.loads(attempt, strict=False)
        except ValueError:
            pass
    pythonish = re.sub(r"\btrue\b", "True", re.sub(r"\bfalse\b", "False", re.sub(r"\bnull\b", "None", candidate)))
    try:
        return ast.literal_eval(_TRAILING_COMMA.sub(r"\1", pythonish))
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, (list, tuple)):
        return " ".join(_text(v) for v in value)
    return " ".join(str(value).split())


def _field(data: dict[str, Any], *names: str) -> Any:
    for name in names:
        if name in data:
            return data[name]
    return None


def parse_report(answer: str) -> ReportContent | None:
    """A report from a model's answer, or None when there is no usable JSON object with a title or summary.

    A missing or unreadable rating comes back as -1 for the caller to fill in.
    """
    text = _THINK.sub("", answer or "")
    if "</think>" in text.lower():  # an unclosed think block whose opening tag was cut off
        text = text[text.lower().rindex("</think>") + len("</think>"):]
    data: Any = _plain_object(text)
    if data is None:
        for candidate in [m.group(1) for m in _FENCE.finditer(text)] + [text]:
            obj = _balanced_object(candidate)
            if obj is not None:
                data = _load(obj)
                if isinstance(data, dict):
                    break
    if not isinstance(data, dict):
        return None
    data = {str(k).strip().lower(): v for k, v in data.items()}
    title = _text(_field(data, "title", "name"))
    summary = _text(_field(data, "summary", "description", "overview"))
    if not (title or summary):
        return None
    rating = -1.0
    raw = _field(data, "rating", "importance", "impact_rating", "score")
    if isinstance(raw, (int, float)) and not isinstance(raw, bool) and math.isfinite(raw):
        rating = float(raw)
    elif isinstance(raw, str) and (m := _NUMBER.search(raw)):
        rating = float(m.group())
    if rating != -1.0:
        rating = min(10.0, max(0.0, rating))
    findings: list[Finding] = []
    raw_findings = _field(data, "findings", "insights")
    for item in raw_findings if isinstance(raw_findings, list) else []:
        if isinstance(item, dict):
            item = {str(k).strip().lower(): v for k, v in item.items()}
            finding = Finding(_text(_field(item, "summary", "title", "insight")),
                              _text(_field(item, "explanation", "description", "detail", "details")))
        else:
            finding = Finding(_text(item), "")
        if finding.summary or finding.explanation:
            findings.append(finding)
    explanation = _text(_field(data, "rating_explanation", "rating explanation", "explanation"))
    return ReportContent(title or summary[:80], summary, findings, rating, explanation)
