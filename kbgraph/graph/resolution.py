"""Entity resolution: find likely duplicate entities, let the LLM judge them, plan merges.

Three cheap blockers propose candidate pairs (equal loose keys, character n-gram overlap, close
embeddings); only pairs of compatible types are kept. The LLM answers yes/no per pair in batches.
Merges are planned as alias -> canonical key from the "yes" decisions, so a merge is undone by
dropping its decision and recomputing; persisting decisions is the caller's job.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from kbgraph.graph.extract.nlp.types import CATCH_ALL_TYPES
from kbgraph.llm.base import CancelCheck, ChatModel, Message
from kbgraph.prompts import prompt_version, render
from kbgraph.store.records import Entity

PHASE = "resolution"
PROMPT = "resolve_entities"


@dataclass(frozen=True)
class Decision:
    a: str  # a < b
    b: str
    same: bool

    def __post_init__(self) -> None:
        if self.a > self.b:
            low, high = self.b, self.a
            object.__setattr__(self, "a", low)
            object.__setattr__(self, "b", high)


# ---------------------------------------------------------------------------------------------
# blocking keys

# honorifics and corporate forms that do not change what a name refers to
_AFFIXES = {
    "the", "mr", "mrs", "ms", "miss", "dr", "prof", "sir", "lady", "lord", "st", "saint",
    "inc", "ltd", "llc", "plc", "corp", "corporation", "co", "company", "gmbh", "ag", "sa", "limited",
}
_CJK_AFFIXES = ("股份有限公司", "有限责任公司", "有限公司", "集团", "公司", "先生", "女士", "小姐")
_TYPE_GROUPS = [
    {"person", "people", "character", "human", "individual"},
    {"organization", "organisation", "org", "company", "institution", "agency"},
    {"location", "place", "geo", "city", "country", "region"},
]
# a type that says nothing, so it is compatible with any type (the nlp method's catch-all types
# among them: "category" is what it gives a name its cues cannot place, a person's surname as well)
_GENERIC_TYPES = {"", "unknown", "none", "n/a"} | CATCH_ALL_TYPES


def _fold(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold()


def _is_cjk(ch: str) -> bool:
    code = ord(ch)
    return (0x3040 <= code <= 0x30FF or 0x3400 <= code <= 0x4DBF or 0x4E00 <= code <= 0x9FFF
            or 0xAC00 <= code <= 0xD7AF or 0xF900 <= code <= 0xFAFF or 0x20000 <= code <= 0x2FA1F)


def _words(text: str) -> list[str]:
    """Folded words with punctuation removed ("J. Smith" and "J Smith" give the same words)."""
    cleaned = "".join(ch if ch.isalnum() or ch.isspace() else " " for ch in _fold(text))
    return cleaned.split()


def loose_key(name: str) -> str:
    words = _words(name)
    while len(words) > 1 and words[0] in _AFFIXES:
        words = words[1:]
    while len(words) > 1 and words[-1] in _AFFIXES:
        words = words[:-1]
    key = " ".join(words)
    for affix in _CJK_AFFIXES:
        if key.endswith(affix) and len(key) > len(affix) + 1:
            key = key[: -len(affix)]
            break
    return key


def ngrams(name: str) -> set[str]:
    """Character bigrams for CJK runs (names are 2-4 characters) and padded trigrams for other runs."""
    text = loose_key(name)
    grams: set[str] = set()
    for run in re.findall(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]+|[^\u3040-\u30ff"
                          r"\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]+", text):
        if _is_cjk(run[0]):
            grams.update(run[i: i + 2] for i in range(max(1, len(run) - 1)))
        else:
            run = run.strip()
            if run:
                padded = f" {run} "
                grams.update(padded[i: i + 3] for i in range(len(padded) - 2))
    return grams


def _type_class(entity_type: str) -> str:
    folded = " ".join(_words(entity_type))
    for group in _TYPE_GROUPS:
        if folded in group:
            return min(group)
    return folded


def compatible_types(a: str, b: str) -> bool:
    ta, tb = _type_class(a), _type_class(b)
    return ta == tb or ta in _GENERIC_TYPES or tb in _GENERIC_TYPES


# ---------------------------------------------------------------------------------------------
# candidates


def candidate_pairs(entities: Sequence[Entity], vectors: Mapping[str, np.ndarray] | None, max_pairs: int,
                    ngram_threshold: float = 0.5, cosine_threshold: float = 0.9, neighbours: int = 5,
                    skip: Collection[tuple[str, str]] = ()) -> list[tuple[str, str]]:
    """Likely-duplicate pairs (a < b), most likely first, at most ``max_pairs``.

    ``skip`` holds pairs already decided, so they do not use up the budget.
    """
    by_key = {e.key: e for e in entities}
    keys = sorted(by_key)
    done = {tuple(sorted(p)) for p in skip}
    scores: dict[tuple[str, str], float] = {}

    def propose(a: str, b: str, score: float) -> None:
        pair = (a, b) if a < b else (b, a)
        if a == b or pair in done or not compatible_types(by_key[a].type, by_key[b].type):
            return
        if score > scores.get(pair, 0.0):
            scores[pair] = score

    # (a) equal loose keys: "J. Smith" / "J Smith", "Acme Inc." / "Acme"
    groups: dict[str, list[str]] = defaultdict(list)
    for key in keys:
        groups[loose_key(by_key[key].name or key)].append(key)
    for members in groups.values():
        for i, a in enumerate(members[:50]):  # a huge group is a bad key, not 1000 duplicates
            for b in members[i + 1: 50]:
                propose(a, b, 2.0)

    # (b) character n-gram Jaccard, through an inverted index that ignores very common grams
    grams = {key: ngrams(by_key[key].name or key) for key in keys}
    postings: dict[str, list[int]] = defaultdict(list)
    for i, key in enumerate(keys):
        for gram in grams[key]:
            postings[gram].append(i)
    common = max(50, len(keys) // 100)
    for i, key in enumerate(keys):
        mine = grams[key]
        if not mine:
            continue
        shared: Counter[int] = Counter()
        for gram in mine:
            hits = postings[gram]
            if len(hits) <= common:
                shared.update(j for j in hits if j > i)
        for j, overlap in shared.items():
            other = grams[keys[j]]
            jaccard = overlap / (len(mine) + len(other) - overlap)
            if jaccard >= ngram_threshold:
                propose(key, keys[j], 1.0 + jaccard)

    # (c) embedding nearest neighbours
    if vectors:
        with_vec = [k for k in keys if k in vectors]
        if len(with_vec) > 1:
            matrix = np.asarray([vectors[k] for k in with_vec], dtype=np.float32)
            matrix /= np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12)
            for start in range(0, len(with_vec), 1024):  # blocks bound the similarity matrix's memory
                sims = matrix[start: start + 1024] @ matrix.T
                rows, cols = np.nonzero(sims >= cosine_threshold)  # far cheaper than a top-k per row
                values = sims[rows, cols]
                order = np.lexsort((cols, -values, rows))
                taken: Counter[int] = Counter()
                for row, col, sim in zip(rows[order].tolist(), cols[order].tolist(), values[order].tolist()):
                    a = with_vec[start + row]
                    if with_vec[col] != a and taken[row] < neighbours:
                        taken[row] += 1
                        propose(a, with_vec[col], sim)

    ranked = sorted(scores.items(), key=lambda item: (-item[1], item[0]))
    return [pair for pair, _ in ranked[:max_pairs]]


# ---------------------------------------------------------------------------------------------
# judging

_ANSWER = re.compile(r"^\W*(?:pair\s*)?(\d+)\s*[:.)\-]?\s*\W*\s*(yes|no|true|false|same|different|是|否|不是)\b",
                     re.IGNORECASE | re.MULTILINE)
_YES = {"yes", "true", "same", "是"}


def _describe(entity: Entity | None, key: str) -> tuple[str, str, str]:
    if entity is None:
        return key, "unknown", ""
    description = " ".join(entity.description.split())
    if len(description) > 200:
        description = description[:200].rstrip() + "…"
    return entity.name or key, entity.type or "unknown", description


def parse_answers(answer: str, count: int) -> dict[int, bool]:
    """Pair number (1-based) -> same?, for the lines that answer a pair; contradicted pairs are dropped."""
    seen: dict[int, bool] = {}
    conflicted: set[int] = set()
    for m in _ANSWER.finditer(answer or ""):
        n = int(m.group(1))
        if not 1 <= n <= count:
            continue
        value = m.group(2).lower() in _YES
        if n in seen and seen[n] != value:
            conflicted.add(n)
        seen.setdefault(n, value)
    return {n: v for n, v in seen.items() if n not in conflicted}


def judge_pairs(chat: ChatModel, pairs: Sequence[tuple[str, str]], entities_by_key: Mapping[str, Entity],
                batch_size: int = 20, cancel: CancelCheck | None = None) -> list[Decision]:
    """Decisions for the pairs the model answered; unanswered pairs get none and can be asked later."""
    decisions: list[Decision] = []
    version = prompt_version(PROMPT)
    for start in range(0, len(pairs), batch_size):
        batch = pairs[start: start + batch_size]
        rows = []
        for n, (a, b) in enumerate(batch, 1):
            a_name, a_type, a_desc = _describe(entities_by_key.get(a), a)
            b_name, b_type, b_desc = _describe(entities_by_key.get(b), b)
            rows.append({"n": n, "a_name": a_name, "a_type": a_type, "a_description": a_desc,
                         "b_name": b_name, "b_type": b_type, "b_description": b_desc})
        prompt = render(PROMPT, pairs=rows)
        answer = chat.chat([Message("user", prompt)], phase=PHASE, prompt_version=version, cancel=cancel)
        for n, same in sorted(parse_answers(answer, len(batch)).items()):
            a, b = batch[n - 1]
            decisions.append(Decision(a, b, same))
    return decisions


# ---------------------------------------------------------------------------------------------
# merging


def plan_merges(decisions: Iterable[Decision]) -> dict[str, str]:
    """Alias key -> canonical key, from the union of "same" decisions.

    A pure function of the decisions, so the derived graph stays equal to a rebuild from mentions
    and decisions whatever order things happened in: the canonical key of a group is its smallest
    key (the entity's display name is still its most frequent surface form). A "no" decision is a
    cannot-link: a "yes" that would put two keys judged different into one group is ignored.
    """
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    valid = sorted({d for d in decisions if d.a != d.b}, key=lambda d: (d.a, d.b, d.same))
    apart: dict[str, set[str]] = defaultdict(set)
    for d in valid:
        if not d.same:
            apart[d.a].add(d.b)
            apart[d.b].add(d.a)
    groups: dict[str, set[str]] = {}
    for d in valid:
        if not d.same:
            continue
        ra, rb = find(d.a), find(d.b)
        if ra == rb:
            continue
        members_a, members_b = groups.get(ra, {ra}), groups.get(rb, {rb})
        if any(apart[x] & members_b for x in members_a if x in apart):
            continue
        parent[rb] = ra
        groups[ra] = members_a | members_b
        groups.pop(rb, None)

    merges: dict[str, str] = {}
    for members in groups.values():
        canonical = min(members)
        for key in sorted(members):
            if key != canonical:
                merges[key] = canonical
    return merges
