"""Summaries asked for in an indexing run's last seconds of extraction, before the merge needs them.

With a hosted model most of a run is spent waiting for answers, ``llm_concurrency`` at a time. Once
every chunk has been handed to extraction, fewer chunks remain than calls may be in flight, and the
free calls would idle until the last chunk's gleaning is in, then the merge, then the summary pass
(kbgraph.index.summaries.summarize_pending) asking for every description over the budget at once.

This asks for those summaries in the free calls instead, for the entities and relations no
unfinished chunk can still add to: none of the words of their names (3 letters or more) occurs in
the text of a chunk still being extracted. A name the model gave that the chunk's text does not hold
is the one way an entity can still change; then the summary pass asks again, with its fragments as
they are (a call spent, never a wrong description). The summary pass asks exactly what this asked
(the same describer, the same fragments in the same order), so it gets the answer from the chat
model's cache, or waits for it while it is still on its way (kbgraph.llm.layers.CachedChat). Only a
chat model that remembers answers is asked ahead; ``summarize_ahead = false`` turns it off.
"""

from __future__ import annotations

import re
import threading
from collections import defaultdict
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from kbgraph.graph.derive.aliases import AliasMap, load_aliases
from kbgraph.graph.derive.entities import display_name, entity_summary_input
from kbgraph.graph.derive.mentions import stored_entity_mentions, stored_relation_mentions
from kbgraph.graph.derive.relations import relation_summary_input
from kbgraph.graph.describe import Describer
from kbgraph.index.context import KBContext
from kbgraph.store.records import Chunk, EntityMention, RelationMention

# words this short, and these, occur in nearly any text: they say nothing about a name
_NAME_WORD = re.compile(r"\w{3,}")
_COMMON_WORDS = frozenset({"the", "and"})

# a run holds its mentions until the merge only up to this many (a book's worth many times over):
# past it, asking ahead stops and the memory is given back
_MAX_MENTIONS = 200_000

Item = tuple[str, str, tuple[str, ...]]  # (kind, name, fragments): one summary
Words = frozenset[str]


@dataclass
class _Candidate:
    """An entity or relation whose description is over the budget with what is known now."""

    item: Item
    # it may still change while one unfinished chunk holds a word of every one of these (an
    # entity: its names; a relation: each end's names, as a new mention needs both in one chunk)
    names: tuple[Words, ...]

    def unsettled(self, texts: Sequence[str]) -> bool:
        return any(all(any(w in text for w in words) for words in self.names) for text in texts)


def name_words(names: Sequence[str]) -> Words:
    """The words of these names that say which text they occur in (a name of short words only: itself)."""
    lowered = [n.lower() for n in names if n.strip()]
    words = frozenset(w for name in lowered for w in _NAME_WORD.findall(name) if w not in _COMMON_WORDS)
    return words or frozenset(lowered)


def can_ask_ahead(ctx: KBContext) -> bool:
    return (ctx.settings.summarize_ahead and ctx.chat is not None and ctx.chat.remembers_answers
            and ctx.graph.method != "nlp")


class SummariesAhead:
    """Fed an indexing run's chunks and mentions; asks for settled summaries in free model calls."""

    def __init__(self, ctx: KBContext, calls: int) -> None:
        self.ctx = ctx
        self.calls = max(1, calls)
        self.describer = ctx.describer()
        self.asked = 0
        self._cv = threading.Condition()
        self._open: dict[str, str] = {}  # chunk id -> its text, lowercased
        self._run_docs: set[str] = set()
        self._entities: dict[str, list[EntityMention]] = defaultdict(list)  # raw key -> this run's
        self._relations: dict[tuple[str, str], list[RelationMention]] = defaultdict(list)
        self._changed_keys: set[str] = set()
        self._changed_pairs: set[tuple[str, str]] = set()
        self._closed = False
        self._in_flight = 0
        self._held = 0
        self._asked_items: set[Item] = set()
        self._planner: threading.Thread | None = None
        self._pool = ThreadPoolExecutor(max_workers=self.calls, thread_name_prefix="kbgraph-summary-ahead")

    # -- what the run tells it ------------------------------------------------------------------

    def chunk_submitted(self, chunk: Chunk) -> None:
        with self._cv:
            self._open[chunk.id] = chunk.content.lower()
            self._run_docs.add(chunk.doc_id)

    def chunk_done(self, chunk: Chunk, entities: Sequence[EntityMention], relations: Sequence[RelationMention]) -> None:
        with self._cv:
            self._open.pop(chunk.id, None)
            if self._closed:
                return
            self._held += len(entities) + len(relations)
            if self._held > _MAX_MENTIONS:
                self._closed = True
                self._entities.clear()
                self._relations.clear()
                self._cv.notify_all()
                return
            for m in entities:
                self._entities[m.key].append(m)
                self._changed_keys.add(m.key)
            for r in relations:
                self._relations[(r.src_key, r.tgt_key)].append(r)
                self._changed_pairs.add((r.src_key, r.tgt_key))
            self._cv.notify_all()

    def all_submitted(self) -> None:
        """Every chunk of the run is with extraction: from now on, calls may come free."""
        with self._cv:
            if self._planner is None and not self._closed:
                self._planner = threading.Thread(target=self._plan, name="kbgraph-summary-ahead-plan", daemon=True)
                self._planner.start()
            self._cv.notify_all()

    def close(self) -> None:
        """Ask for nothing more (calls already on their way finish, and their answers are kept)."""
        with self._cv:
            self._closed = True
            self._cv.notify_all()
            asked = self.asked
        self._pool.shutdown(wait=False, cancel_futures=True)
        if asked:
            self.ctx.ledger.count("summary: asked ahead, in the calls the last chunks left free", asked)

    # -- planning -------------------------------------------------------------------------------

    def _free_calls(self) -> int:
        # an unfinished chunk holds one call at a time (its first pass, then its gleaning)
        return self.calls - len(self._open) - self._in_flight

    def _plan(self) -> None:
        try:
            known = _KnownMentions(self.ctx, self._run_docs)
        except Exception:  # the store cannot be read now: the summary pass asks for everything, as without this
            return
        candidates: dict[tuple, _Candidate] = {}
        while True:
            with self._cv:
                while not self._closed and (self._free_calls() <= 0 or not (
                        self._changed_keys or self._changed_pairs or self._ready(candidates))):
                    self._cv.wait()
                if self._closed:
                    return
                keys, self._changed_keys = self._changed_keys, set()
                pairs, self._changed_pairs = self._changed_pairs, set()
                entities, relations = known.snapshot(keys, pairs, self._entities, self._relations)
            try:
                candidates.update(known.over_budget(self.describer, entities, relations))
            except Exception:
                return
            with self._cv:
                if self._closed:  # closed while they were worked out: its pool takes no more calls
                    return
                # what changed while they were worked out is worked out again first
                stale = known.canonical(self._changed_keys, self._changed_pairs)
                for ident in self._ready(candidates):
                    if self._free_calls() <= 0:
                        break
                    if not stale.isdisjoint(ident[1:]) or ident[1:] in stale:
                        continue
                    item = candidates.pop(ident).item
                    self._asked_items.add(item)
                    self._in_flight += 1
                    self.asked += 1
                    self._pool.submit(self._ask, item)

    def _ready(self, candidates: dict[tuple, _Candidate]) -> list[tuple]:
        """The candidates not asked for yet that no unfinished chunk can add to (holding the lock)."""
        texts = list(self._open.values())
        return [ident for ident, c in candidates.items()
                if c.item not in self._asked_items and not c.unsettled(texts)]

    def _ask(self, item: Item) -> None:
        kind, name, fragments = item
        try:
            self.describer.summary(kind, name, list(fragments))
        except Exception:  # the summary pass asks again and reports what went wrong
            pass
        finally:
            with self._cv:
                self._in_flight -= 1
                self._cv.notify_all()


class _KnownMentions:
    """Every mention an entity or relation of the run will be derived from: the run's own, and the
    stored ones of the knowledge base's other documents (read once per key)."""

    def __init__(self, ctx: KBContext, run_docs: set[str]) -> None:
        self.ctx = ctx
        self.run_docs = run_docs
        self.aliases: AliasMap = load_aliases(ctx.store, ctx.tenant, ctx.kb_id)
        self._raw_keys: dict[str, set[str]] = defaultdict(set)  # canonical key -> the run's raw keys
        self._raw_pairs: dict[tuple[str, str], set[tuple[str, str]]] = defaultdict(set)
        self._other_entities: dict[str, list[EntityMention]] = {}
        self._other_relations: dict[tuple[str, str], list[RelationMention]] = {}

    def canonical(self, keys: set[str], pairs: set[tuple[str, str]]) -> set:
        """The canonical keys and pairs of these raw ones."""
        return {self.aliases.canon(k) for k in keys} | {self.aliases.pair(*p) for p in pairs}

    def snapshot(self, keys: set[str], pairs: set[tuple[str, str]],
                 run_entities: dict[str, list[EntityMention]],
                 run_relations: dict[tuple[str, str], list[RelationMention]]
                 ) -> tuple[dict[str, list[EntityMention]], dict[tuple[str, str], list[RelationMention]]]:
        """The run's mentions of the canonical keys and pairs these raw ones belong to, and of the
        changed pairs' ends (taken while the run cannot add to them)."""
        for key in keys:
            self._raw_keys[self.aliases.canon(key)].add(key)
        for pair in pairs:
            self._raw_pairs[self.aliases.pair(*pair)].add(pair)
        canon_pairs = {self.aliases.pair(*p) for p in pairs}
        canon_keys = {self.aliases.canon(k) for k in keys} | {k for p in canon_pairs for k in p}
        entities = {k: [m for raw in self._raw_keys.get(k, ()) for m in run_entities.get(raw, ())]
                    for k in canon_keys}
        relations = {p: [m for raw in self._raw_pairs[p] for m in run_relations.get(raw, ())] for p in canon_pairs}
        return entities, relations

    def over_budget(self, describer: Describer, entities: dict[str, list[EntityMention]],
                    relations: dict[tuple[str, str], list[RelationMention]]) -> dict[tuple, _Candidate]:
        """Of these (canonical) entities and relations, the ones whose descriptions do not fit."""
        self._fetch_entities(list(entities))
        self._fetch_relations(list(relations))
        every = {k: mentions + self._other_entities[k] for k, mentions in entities.items()}
        found: dict[tuple, _Candidate] = {}
        for key, mentions in every.items():
            if not mentions:
                continue
            kind, name, fragments = entity_summary_input(key, mentions)
            if describer.needs_summary(fragments):
                found[("entity", key)] = _Candidate((kind, name, tuple(fragments)), (name_words([m.name for m in mentions]),))
        for (src, tgt), mentions in relations.items():
            mentions = mentions + self._other_relations[(src, tgt)]
            names = {src: display_name(src, every[src]), tgt: display_name(tgt, every[tgt])}
            kind, subject, fragments = relation_summary_input(src, tgt, mentions, names)
            if describer.needs_summary(fragments):
                ends = tuple(name_words([m.name for m in every[k]] or [names[k]]) for k in (src, tgt))
                found[("relation", src, tgt)] = _Candidate((kind, subject, tuple(fragments)), ends)
        return found

    def _fetch_entities(self, keys: list[str]) -> None:
        self._fetch(self._other_entities, keys, stored_entity_mentions)

    def _fetch_relations(self, pairs: list[tuple[str, str]]) -> None:
        self._fetch(self._other_relations, pairs, stored_relation_mentions)

    def _fetch(self, known: dict, wanted: list, read: Callable[..., dict]) -> None:
        """The other documents' stored mentions of the ``wanted`` keys (or pairs) not read yet."""
        missing = [w for w in wanted if w not in known]
        if not missing:
            return
        stored = read(self.ctx.store, self.ctx.tenant, self.ctx.kb_id, missing, self.aliases)
        for item in missing:
            known[item] = [m for m in stored.get(item, ()) if m.doc_id not in self.run_docs]
