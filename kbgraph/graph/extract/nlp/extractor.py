"""Extraction without an LLM ("nlp"): proper names + sentence co-occurrence. No model download.

Entities are the chunk's proper names (detect.py: Latin script in names.py, Chinese in chinese.py).
Types come from cheap cues, voted per entity within the chunk (names.py, chinese.py); a name sharing
a word with a person's name is a person too; a name without votes is a "concept". Then each kind
is given the knowledge base's type that takes it, or the fallback type "other" (types.py).
Description: the first one or
two sentences the entity appears in (about 300 characters, cut around the mention). Weight: the
number of sentences mentioning it. Relations: two entities in one sentence (relations.py).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from kbgraph.graph.extract.base import DEFAULT_ENTITY_TYPES, ChunkExtraction, ExtractedEntity
from kbgraph.graph.extract.finalize import finalize
from kbgraph.graph.extract.nlp.candidates import _Candidate
from kbgraph.graph.extract.nlp.detect import find_names, proper_names
from kbgraph.graph.extract.nlp.relations import cooccurrence_relations, sentence_mentions
from kbgraph.graph.extract.nlp.sentences import MAX_DESCRIPTION_CHARS, _excerpt
from kbgraph.graph.extract.nlp.types import kind_types
from kbgraph.graph.extract.nlp.words import _CONNECTORS, _TITLE_ABBR, _TITLES_KEEP
from kbgraph.llm.base import Cancelled, CancelCheck


class NLPExtractor:
    method = "nlp"

    def __init__(self, entity_types: Sequence[str] = DEFAULT_ENTITY_TYPES,
                 max_description_chars: int = MAX_DESCRIPTION_CHARS) -> None:
        self.entity_types = list(entity_types) or list(DEFAULT_ENTITY_TYPES)
        self.max_description_chars = max_description_chars
        self.kind_types = kind_types(self.entity_types)

    # -- entry -----------------------------------------------------------------------------------
    def extract(self, text: str, *, cancel: CancelCheck | None = None) -> ChunkExtraction:
        if cancel is not None and cancel():
            raise Cancelled("extraction cancelled")
        if not text.strip():
            return ChunkExtraction()
        spans, cands, occurrences, keep = find_names(text)
        self._type_by_tokens(cands, keep)
        return self._build(text, spans, cands, keep, occurrences)

    def names(self, text: str) -> list[str]:
        """The proper names ``extract`` would list for ``text`` (``detect.proper_names``)."""
        return proper_names(text)

    # -- typing, relations, output -----------------------------------------------------------------
    @staticmethod
    def _type_by_tokens(cands: dict[str, _Candidate], keep: set[str]) -> None:
        """A name sharing a word with a person's name is a person too ("Bob" -> "Bob Cratchit")."""
        person_words: set[str] = set()
        for k in keep:
            c = cands[k]
            if c.votes and c.votes.most_common(1)[0][0] == "person":
                person_words.update(w for w in c.key.split() if w not in _TITLES_KEEP and w not in _CONNECTORS
                                    and w.rstrip(".") not in _TITLE_ABBR)
        for k in keep:
            c = cands[k]
            if not c.votes and any(w in person_words for w in c.key.split()):
                c.votes["person"] += 1

    def _type(self, cand: _Candidate) -> str:
        if cand.votes:
            # ties break on a fixed order, so the result does not depend on dict order
            order = ("person", "organization", "geo", "event", "concept")
            best = max(cand.votes.items(), key=lambda kv: (kv[1], -order.index(kv[0]) if kv[0] in order else -9))
            guessed = best[0]
        else:
            guessed = "concept"
        return self.kind_types.get(guessed, self.kind_types["concept"])

    def _build(self, text: str, spans: list[tuple[int, int]], cands: dict[str, _Candidate], keep: set[str],
               occurrences: list[tuple[int, int, str]]) -> ChunkExtraction:
        first_offset, by_sentence = sentence_mentions(occurrences, keep)
        sentence_count: Counter[str] = Counter()
        for keys in by_sentence.values():
            sentence_count.update(keys)
        entities = self._entities(text, spans, cands, keep, first_offset, sentence_count)
        relations = cooccurrence_relations(text, spans, cands, first_offset, by_sentence, sentence_count,
                                           self.max_description_chars)
        return finalize(entities, relations, self.entity_types)

    def _entities(self, text: str, spans: list[tuple[int, int]], cands: dict[str, _Candidate], keep: set[str],
                  first_offset: dict[tuple[int, str], int], sentence_count: Counter[str]) -> list[ExtractedEntity]:
        limit = self.max_description_chars

        def sentence_excerpt(si: int, key: str) -> str:
            s, e = spans[si]
            return _excerpt(text[s:e], first_offset[(si, key)] - s, limit)

        entities: list[ExtractedEntity] = []
        ordered = sorted(keep, key=lambda k: (cands[k].first_pos, k))
        for key in ordered:
            cand = cands[key]
            sents = sorted({si for si, k in first_offset if k == key})
            desc = sentence_excerpt(sents[0], key) if sents else ""
            if len(sents) > 1 and len(desc) < limit // 2:
                desc = f"{desc} {sentence_excerpt(sents[1], key)}"[:limit + 2]
            entities.append(ExtractedEntity(name=cand.name, type=self._type(cand), description=desc,
                                            weight=float(max(1, sentence_count[key]))))
        return entities
