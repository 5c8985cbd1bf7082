"""The store's search structures built ahead of the first question.

A store that indexes on first use (the embedded one: postings and vector slices per KB, field and
kind, kept on disk for later processes) would make the first query after a large change pay for
them, and the ppr walk's graph (kept on disk the same way): 31 s at 100k entities where the next
process answers in 1.7 s. After indexing and after a graph refresh the indexing side asks for them
instead, naming the text fields the searches of this package read.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from kbgraph.search.chunks import CHUNK_TEXT_FIELDS
from kbgraph.search.ppr_graph import prepare_entity_graph
from kbgraph.search.ppr_search import PPRParams
from kbgraph.store.base import DocStore, StoreError
from kbgraph.store.records import CommunityReport, Entity, Relation, graph_text_fields

log = logging.getLogger(__name__)

# per row kind (None: chunks), every text field a search of this package reads
SEARCHED_TEXT_FIELDS: dict[str | None, tuple[str, ...]] = {
    None: tuple(CHUNK_TEXT_FIELDS),
    Entity.KIND: ("name_ltks", *graph_text_fields()),
    Relation.KIND: tuple(graph_text_fields()),
    CommunityReport.KIND: tuple(graph_text_fields()),
}


def prepare_search(store: DocStore, tenant: str, kb_ids: Sequence[str], *, graph: bool = True) -> None:
    """Have ``store`` build what the searches of these KBs read (with ``graph``, the ppr walk's graph
    too). Only speed depends on it: a failure is logged and the first query builds what is missing,
    as it would have."""
    try:
        store.prepare_search(tenant, kb_ids, SEARCHED_TEXT_FIELDS)
        if graph:
            prepare_entity_graph(store, tenant, kb_ids, PPRParams().chunk_link_weight)
    except (StoreError, OSError, MemoryError) as exc:
        log.warning("search structures of %s not built ahead (the first query builds them): %s",
                    ", ".join(kb_ids), exc)
