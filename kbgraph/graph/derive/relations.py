"""A relation row derived from its mentions, and the inputs a summary of its description is made from."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from kbgraph.graph.derive.aliases import AliasMap
from kbgraph.graph.derive.fragments import Describe, _first_fragments, _in_order, _pending
from kbgraph.graph.derive.mentions import _relation_mentions
from kbgraph.parse.tokenize import token_string_of
from kbgraph.store.base import DocStore
from kbgraph.store.records import Relation, RelationMention


def _relation_description_input(src: str, tgt: str, ordered: Sequence[RelationMention],
                                names: Mapping[str, str]) -> tuple[str, str, list[str]]:
    return ("relation", f"{names.get(src, src)} -- {names.get(tgt, tgt)}",
            [text for _, text in _first_fragments(ordered)])


def derive_relation(kb_id: str, src: str, tgt: str, mentions: Sequence[RelationMention],
                    names: Mapping[str, str], describe: Describe) -> Relation:
    ordered = _in_order(mentions)
    src_name, tgt_name = names.get(src, src), names.get(tgt, tgt)
    kind, subject, fragments = _relation_description_input(src, tgt, ordered, names)
    description = describe(kind, subject, fragments)
    keyword_counts = Counter(k.strip().lower() for m in ordered for k in m.keywords if k.strip())
    keywords = sorted(keyword_counts, key=lambda k: (-keyword_counts[k], k))[:12]
    return Relation(
        kb_id=kb_id, src_key=src, tgt_key=tgt, src_name=src_name, tgt_name=tgt_name, description=description,
        description_tokens=token_string_of([src_name, tgt_name, description, *keywords]),
        keywords=keywords, weight=round(sum(m.weight for m in ordered), 6),
        doc_ids=sorted({m.doc_id for m in ordered}), chunk_ids=sorted({m.chunk_id for m in ordered}),
        mention_count=len(ordered), summary_pending=_pending(describe, fragments),
    )


def relation_summary_input(src: str, tgt: str, mentions: Sequence[RelationMention],
                           names: Mapping[str, str]) -> tuple[str, str, list[str]]:
    """(kind, subject, fragments) of a relation with these mentions; ``names``: its endpoints'
    display names by key."""
    return _relation_description_input(src, tgt, _in_order(mentions), names)


def relation_description_inputs(store: DocStore, tenant: str, kb_id: str, rows: Sequence[Relation],
                                aliases: AliasMap) -> dict[tuple[str, str], tuple[str, str, list[str]]]:
    """(kind, subject, fragments) of these relation rows, from all their mentions; the subject
    names the endpoints as the rows do (as a derivation names them)."""
    mentions = _relation_mentions(store, tenant, kb_id, [(r.src_key, r.tgt_key) for r in rows], aliases)
    out: dict[tuple[str, str], tuple[str, str, list[str]]] = {}
    for row in rows:
        pair = (row.src_key, row.tgt_key)
        if pair in mentions:
            out[pair] = _relation_description_input(row.src_key, row.tgt_key, _in_order(mentions[pair]),
                                                    {row.src_key: row.src_name, row.tgt_key: row.tgt_name})
    return out
