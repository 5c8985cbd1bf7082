"""What a write sends: document values cleaned for JSON, bulk actions, and the report of failures.

Deletion and partial update by filter are bulk ``delete`` / ``update`` actions too (see the package
docstring), so every write goes through helpers.streaming_bulk (cluster.py) with these actions.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from kbgraph.store.base import Doc, StoreError
from kbgraph.store.elastic.indices import VECTOR_RE
from kbgraph.store.elastic.queries import float32_vector

# a partial update that meets a concurrent write of the same document is retried this often
RETRY_ON_CONFLICT = 3


def _finite(name: str, value: Any) -> None:
    """JSON has no NaN or infinity: Elasticsearch would reject the document, name the field here."""
    items = value if isinstance(value, (list, tuple)) else [value]
    for item in items:
        if isinstance(item, float) and not math.isfinite(item):
            raise StoreError(f"field {name!r} holds {item}, which is not a JSON number")


def clean_values(values: Mapping[str, Any]) -> Doc:
    """Field values ready to send: vectors as lists of floats, a zero-magnitude vector as null
    (ES cosine rejects it; its cosine is undefined, i.e. a vector score of 0 either way, which is
    also what a missing vector scores), non-finite numbers refused."""
    out: Doc = {}
    for name, value in values.items():
        if VECTOR_RE.match(name) and value is not None:
            vector = np.asarray(value, dtype=np.float64)
            if not np.isfinite(vector).all():
                _finite(name, vector.tolist())
            out[name] = float32_vector(vector) if vector.any() else None
            continue
        if hasattr(value, "tolist"):  # numpy arrays and scalars
            value = value.tolist()
        _finite(name, value)
        out[name] = value
    return out


def prepare_doc(doc: Mapping[str, Any], kb_id: str) -> Doc:
    """A copy ready to index: ``kb_id`` set, values cleaned (see clean_values), zero vectors left out."""
    if not isinstance(doc.get("id"), str) or not doc["id"]:
        raise StoreError(f"document without a string id: {str(dict(doc))[:200]}")
    out = {name: value for name, value in clean_values(doc).items()
           if not (VECTOR_RE.match(name) and value is None)}
    out["kb_id"] = kb_id
    return out


def bulk_index_actions(index: str, docs: Iterable[Doc]) -> list[dict[str, Any]]:
    """``index`` actions (insert or wholly replace by ``_id``) for helpers.streaming_bulk."""
    return [{"_op_type": "index", "_index": index, "_id": doc["id"], "_source": doc} for doc in docs]


def bulk_update_actions(index: str, changes: Mapping[str, Doc]) -> list[dict[str, Any]]:
    """``update`` actions with a partial ``doc`` (ES "Bulk API" page); a concurrent write of the same
    document is retried on the node rather than reported as a conflict."""
    return [{"_op_type": "update", "_index": index, "_id": doc_id, "doc": dict(values),
             "retry_on_conflict": RETRY_ON_CONFLICT} for doc_id, values in changes.items()]


def bulk_delete_actions(index: str, ids: Iterable[str]) -> list[dict[str, Any]]:
    return [{"_op_type": "delete", "_index": index, "_id": doc_id} for doc_id in ids]


def _describe_failures(failed: Sequence[tuple[str, dict[str, Any]]], shown: int = 10) -> str:
    parts = []
    for doc_id, info in failed[:shown]:
        error = info.get("error")
        reason = f"{error.get('type')}: {error.get('reason')}" if isinstance(error, dict) else str(error)
        parts.append(f"{doc_id} ({info.get('status')} {reason})")
    more = f" and {len(failed) - shown} more" if len(failed) > shown else ""
    return "; ".join(parts) + more
