"""Seed relevance r(e): the entities a question matches, by the whole question's search, by each
analysed entity (its key and its own search: these are the question's anchors) and by the answer
type, combined by probabilistic OR."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from kbgraph.graph.extract.nlp.lexicon import ordinary_word
from kbgraph.graph.keys import normalize_key
from kbgraph.graph.scores import ranked_entities
from kbgraph.llm.base import Embedder
from kbgraph.parse.tokenize import tokenize, tokenize_query
from kbgraph.search.batch import RowsTicket, SearchBatch, Ticket
from kbgraph.search.context import any_of_scores
from kbgraph.search.graph_cache import LISTING_ENTRIES, GraphState, cached, entity_types, graph_state
from kbgraph.search.kg.params import KGParams
from kbgraph.search.kg.rows import ENTITY_FIELDS, Node, kind_request
from kbgraph.search.kg.scoring import name_match, ramp
from kbgraph.search.query_analysis import QueryAnalysis
from kbgraph.store.base import DocStore, Hit, any_of
from kbgraph.store.records import Entity, entity_id, graph_text_fields


@dataclass
class Seeds:
    scores: dict[Node, float]  # seed relevance r(e)
    docs: dict[Node, dict]  # their rows
    anchored: set[Node]  # matched by an analysed entity (by key or by its own search)
    loose_factor: float = 1.0  # what question-only matches were scaled by (< 1 when anchors were found)

    def anchor_weights(self, low: float, high: float) -> dict[Node, float]:
        """Anchored entity -> how much it counts as one of the question's anchors (``ramp`` of its
        score between ``low`` and ``high``), for those above ``low``."""
        weights = {n: ramp(self.scores.get(n, 0.0), low, high) for n in self.anchored}
        return {n: w for n, w in weights.items() if w > 0}


def typed_entities(store: DocStore, tenant: str, kb_ids: Sequence[str], types: Sequence[str], limit: int,
                   fields: Sequence[str], state: GraphState) -> list[Hit]:
    """The ``limit`` entities of these types with the highest PageRank, best first.

    The same few answer types ("organization", "person") come back question after question and
    their listing walks the PageRank index, so it is kept until the graph changes (``graph_cache``).
    Types the graph does not hold are not listed (``graph_cache.entity_types``).
    """
    known = entity_types(store, tenant, kb_ids, state)
    held = [t for t in types if known is None or t in known]
    if not held:
        return []

    def listing() -> list[Hit]:
        # the score rows (PageRank) ordered, then the rows they name (kbgraph.graph.scores)
        return [Hit(id=doc["id"], doc=doc, score=0.0) for doc in ranked_entities(
            store, tenant, kb_ids, limit, where=[any_of("entity_type_kwd", held)], fields=list(fields))]

    key = ("typed", tenant, tuple(sorted(kb_ids)), tuple(held), limit, tuple(fields))
    # callers keep the rows they are handed: each gets its own copies
    return [Hit(id=h.id, doc=dict(h.doc), score=h.score) for h in
            cached(store, key, state, listing, LISTING_ENTRIES)]


def seed_entities(store: DocStore, tenant: str, kb_ids: Sequence[str], analysis: QueryAnalysis,
                  vector: np.ndarray | None, params: KGParams, embedder: Embedder | None = None,
                  state: GraphState | None = None, batch: SearchBatch | None = None) -> Seeds:
    """Seed relevance r(e) of entities matched by the question.

    Each analysed entity is looked up by its key (exact, score 1) and searched on its own (its
    tokens over names, its embedding over entity vectors; the best ``entity_matches`` hits score by
    name overlap and vector similarity), so one entity of the question cannot be crowded out by
    another. The whole question is searched as well, at ``question_weight``, because an analysis
    can miss entities; generic words of the question that happen to be entity names ("country",
    "charge") then stay weak seeds. ``state`` (read when not given) lets the answer-type listing
    come from the cache. The searches go to the store together, with any the caller asked of
    ``batch`` before.
    """
    batch = batch if batch is not None else SearchBatch(store, tenant)
    asked = ask_seed_searches(batch, kb_ids, analysis, vector, params, embedder)
    docs: dict[Node, dict] = {}
    parts: dict[Node, list[float]] = defaultdict(list)  # question-only (loose) evidence
    anchor_parts: dict[Node, list[float]] = defaultdict(list)  # evidence from an analysed entity
    anchored: set[Node] = set()

    def note(doc: dict, score: float, anchor: bool = False, row: bool = True) -> None:
        node = (doc.get("kb_id", ""), doc.get("entity_key_kwd", ""))
        if row:
            docs.setdefault(node, doc)
        (anchor_parts if anchor else parts)[node].append(score)
        if anchor:
            anchored.add(node)

    for hit in batch.hits(asked.question) if asked.question is not None else []:
        note(hit.doc, params.question_weight * hit.score, row=False)
    for doc, score in _named_entity_hits(params, batch, asked):
        note(doc, score, anchor=True)
    if analysis.keywords:
        for doc, score, row in _answer_type_hits(store, tenant, kb_ids, analysis, params, state, batch,
                                                 asked.answer_type):
            note(doc, score, row=row)
    return _seeds(docs, parts, anchor_parts, anchored, params)


# what the seed searches return
SEED_FIELDS = [*ENTITY_FIELDS, "name_ltks"]
# what the loose ones return (the question's and the answer type's searches): the entity's key,
# read with its id (no row read: a round trip less on Elasticsearch, where their close cosines
# left most of their pages' rows to a read of their own after the cosines); whoever needs a loose
# seed's row reads it with its other rows
SEED_KEYS = ["kb_id", "entity_key_kwd"]


@dataclass
class _NameSearch:
    """One analysed entity's own search: its tokens, whether it was searched with a vector, its hits."""

    tokens: list[str]
    has_vector: bool
    ticket: Ticket | None


@dataclass
class SeedSearches:
    """The seed searches of a question, asked of a batch (``ask_seed_searches``)."""

    question: Ticket | None
    named: list[_NameSearch]
    answer_type: Ticket | None
    keyed: RowsTicket | None  # the rows whose keys are the analysed entities' (read by id)


def ask_seed_searches(batch: SearchBatch, kb_ids: Sequence[str], analysis: QueryAnalysis,
                      vector: np.ndarray | None, params: KGParams, embedder: Embedder | None) -> SeedSearches:
    """Ask the batch for the searches ``seed_entities`` reads: asked early (with other searches of
    the query), they go to the store together; asked again, they are the same searches."""
    floor = embedder.similarity_floor if embedder is not None else 0.0
    tokens = tokenize_query(" ".join([analysis.question, *analysis.entities]))
    question = kind_request(kb_ids, Entity.KIND, tokens, {"name_ltks": params.name_boost, **graph_text_fields()},
                            vector, params.search_top_n, params.vector_weight, returned=SEED_KEYS, floor=floor,
                            key_fields=True)
    answer_type = None
    if analysis.keywords:
        kw_tokens = tokenize_query(" ".join(analysis.keywords))
        request = kind_request(kb_ids, Entity.KIND, kw_tokens, graph_text_fields(), None, params.search_top_n,
                               0.0, returned=SEED_KEYS, key_fields=True)
        answer_type = batch.ask(request) if request is not None else None
    keys = [k for k in dict.fromkeys([*(normalize_key(n) for n in analysis.entities), *named_words(analysis.question)])
            if k]
    keyed = batch.ask_rows(kb_ids, [entity_id(kb, key) for kb in kb_ids for key in keys], SEED_FIELDS) \
        if keys else None
    return SeedSearches(batch.ask(question) if question is not None else None,
                        _named_entity_searches(batch, kb_ids, analysis, params, embedder, floor), answer_type, keyed)


# a word of the question, as written: letters, digits and the marks a nick or a product name holds
_WORD = re.compile(r"[^\W_](?:[\w.+\-]*[\w+])?")


def named_words(question: str) -> list[str]:
    """The question's words that may name an entity the analysis cannot see: written in lower case
    (chat and mailing lists write nicks and programs so: "karname", "tomd123", "xcin"; a capitalized
    name is the analysis's), three characters at least, in Latin script, no ordinary word. Read as
    keys: a word that is an entity's whole name in the knowledge base names that entity
    (``ask_seed_searches`` reads those rows by key)."""
    out = []
    for word in _WORD.findall(question):  # a match ends in a letter, digit or "+", never a dot
        if len(word) >= 3 and word.isascii() and word[0].islower() and any(c.isalpha() for c in word) \
                and not ordinary_word(word):
            out.append(normalize_key(word))
    return out


def _named_entity_searches(batch: SearchBatch, kb_ids: Sequence[str], analysis: QueryAnalysis, params: KGParams,
                           embedder: Embedder | None, floor: float) -> list[_NameSearch]:
    """Each analysed entity's own search (its tokens over names, its embedding over entity vectors),
    asked of the batch."""
    names = list(dict.fromkeys(n for n in analysis.entities if normalize_key(n)))
    if not names or params.entity_matches <= 0:
        return []
    name_vectors = batch.remember(("name vectors", tuple(names)), lambda: embedder.embed_query(names)) \
        if embedder is not None else [None] * len(names)
    out = []
    for name, name_vector in zip(names, name_vectors):
        name_tokens = tokenize(name)
        request = kind_request(kb_ids, Entity.KIND, name_tokens, {"name_ltks": 1.0}, name_vector,
                               params.entity_matches, params.vector_weight, returned=SEED_FIELDS, floor=floor)
        out.append(_NameSearch(name_tokens, name_vector is not None,
                               batch.ask(request) if request is not None else None))
    return out


def _named_entity_hits(params: KGParams, batch: SearchBatch, asked: SeedSearches) -> Iterator[tuple[dict, float]]:
    """(row, score) of the entities the analysed entities match: by key (``exact_score``), and the
    best ``entity_matches`` of each one's own search (``asked.named``), by name overlap and vector similarity."""
    for doc in batch.rows(asked.keyed) if asked.keyed is not None else []:
        yield doc, params.exact_score
    for search in asked.named:
        for hit in batch.hits(search.ticket) if search.ticket is not None else []:
            overlap = name_match(search.tokens, hit.doc.get("name_ltks", ""))
            similarity = hit.vector_score if search.has_vector else overlap
            yield hit.doc, 0.5 * overlap + 0.5 * similarity


def _answer_type_hits(store: DocStore, tenant: str, kb_ids: Sequence[str], analysis: QueryAnalysis,
                      params: KGParams, state: GraphState | None, batch: SearchBatch,
                      ticket: Ticket | None) -> Iterator[tuple[dict, float, bool]]:
    """(row or keys, score, whether it is the row) of the entities matching the answer type the
    analysis gave as keywords: by their descriptions (``ticket``'s search, keys), and the types'
    entities of highest PageRank (``type_score``, rows)."""
    for hit in batch.hits(ticket) if ticket is not None else []:
        yield hit.doc, params.type_score * hit.score, False
    types = sorted({k.strip().lower() for k in analysis.keywords if k.strip()})
    typed = typed_entities(store, tenant, kb_ids, types, params.search_top_n, SEED_FIELDS,
                           state if state is not None else graph_state(store, tenant, kb_ids))
    top_rank = max((float(h.doc.get("pagerank_flt", 0.0) or 0.0) for h in typed), default=0.0)
    for hit in typed:
        rank = float(hit.doc.get("pagerank_flt", 0.0) or 0.0)
        yield hit.doc, params.type_score * 0.5 * (1.0 + (rank / top_rank if top_rank > 0 else 0.0)), True


def _seeds(docs: dict[Node, dict], parts: dict[Node, list[float]], anchor_parts: dict[Node, list[float]],
           anchored: set[Node], params: KGParams) -> Seeds:
    """The seeds from the evidence noted per entity: anchor evidence OR-ed with the loose evidence,
    scaled down once anchors are found."""
    anchor_scores = {node: any_of_scores(*values) for node, values in anchor_parts.items()}
    # a question that names entities we found is about them: its other words matching entities
    # elsewhere (a registry of other guilds, every "founder") is the lexical evidence naive search
    # already has, so it counts for less than what is said about the named entities
    found = max((ramp(v, params.anchor_low, params.anchor_high) for v in anchor_scores.values()), default=0.0)
    loose = 1.0 - found * (1.0 - params.loose_weight)
    scores = {node: any_of_scores(anchor_scores.get(node, 0.0), *(loose * v for v in parts.get(node, ())))
              for node in set(parts) | set(anchor_parts)}
    return Seeds(scores, docs, anchored, loose)
