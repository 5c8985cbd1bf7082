"""How the embedded store keeps each field, by its suffix, and how bodies and values are encoded.

Pure functions with no connection: which fields get kv rows, FTS rows or vector rows, a
keyword's string form, JSON bodies (orjson, the stdlib for integers past 64 bits), the JSON arrays
handed to ``json_each(?)``, tokens as FTS5 reads them, vectors as float32 blobs. Split from the
store so that the rules a stored value follows can be read (and tested) in one place.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Collection, Sequence
from functools import lru_cache
from typing import Any

import numpy as np
import orjson

from kbgraph.store.base import Doc, StoreError
from kbgraph.store.records import UNFILTERED_FIELDS

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_VEC = re.compile(r"^q_(\d+)_vec$")
_KG = "knowledge_graph_kwd"
_COLUMNS = {"id": "d.id", "kb_id": "d.kb_id", _KG: "d.kg"}


def _is_text(name: str) -> bool:
    return name.endswith(("_ltks", "_tks"))


def _is_num(name: str) -> bool:
    return name.endswith(("_int", "_flt"))


def _is_kv(name: str) -> bool:
    return name != _KG and (name.endswith("_kwd") or _is_num(name) or name == "doc_id")


def _has_kv_rows(name: str) -> bool:
    """Whether a keyword or numeric field's values are kept in the kv table (else in the body only)."""
    return _is_kv(name) and name not in UNFILTERED_FIELDS


@lru_cache(maxsize=4096)  # asked for every field of every row written
def _is_vec(name: str) -> bool:
    return name.startswith("q_") and name.endswith("_vec")


def _kw(value: Any) -> str:
    # Elasticsearch keyword fields index scalars as their string form
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


_KV, _TEXT = 1, 2


@lru_cache(maxsize=4096)
def _field_kind(name: str) -> int:
    """_KV, _TEXT or 0 (stored in the body only): how a field is indexed."""
    if not _NAME.match(name):
        return 0
    return _KV if _has_kv_rows(name) else _TEXT if _is_text(name) else 0


def _kv_values(name: str, value: Any) -> set[Any]:
    items = value if isinstance(value, list) else [value]
    if not _is_num(name) and all(type(item) is str for item in items):
        return set(items)  # the common case (ids, keys, names), without the per-item checks below
    out: set[Any] = set()
    for item in items:
        if item is None or isinstance(item, (dict, list)):
            continue
        if _is_num(name):
            if isinstance(item, bool):
                item = int(item)
            if isinstance(item, float) or isinstance(item, int) and -(1 << 63) <= item < (1 << 63):
                out.add(item)
        else:
            out.add(_kw(item))
    return out


def _body_kv_values(body: str, name: str) -> str:
    """The values a field's kv rows would hold, as a JSON array, from a document body: how filters,
    orderings and aggregations read a field kept in the body only (SQL function kb_kv_values)."""
    value = _loads(body).get(name)
    return json.dumps(list(_kv_values(name, value)) if value is not None else [])


def _plain_kv(name: str, value: Any) -> bool:
    """Whether ``value`` is already the one kv value of the field: a string of a keyword field,
    or a float or 64-bit int (not a bool) of a numeric one."""
    kind = type(value)
    if kind is str:
        return not _is_num(name)
    if kind is float:
        return _is_num(name)
    return kind is int and _is_num(name) and -(1 << 63) <= value < (1 << 63)


def _cond_value(name: str, value: Any) -> Any:
    if name in _COLUMNS or (_is_kv(name) and not _is_num(name)):
        return _kw(value)
    return int(value) if isinstance(value, bool) else value


def _tokens(value: Any) -> list[str]:
    if isinstance(value, list):
        value = " ".join(str(v) for v in value)
    return value.split() if isinstance(value, str) else []


def _hex(tokens: Sequence[str]) -> str:
    return " ".join(map(bytes.hex, map(str.encode, tokens)))


def _same(a: Any, b: Any) -> bool:
    # 1 == 1.0 == True in Python, but not as keywords
    return type(a) is type(b) and a == b


def _dumps(body: Doc) -> str:
    try:
        try:
            written = orjson.dumps(body)
            # orjson writes NaN and infinities as null: only a body that reads "null" somewhere
            # (a None, a non-finite number, or those letters in a string) needs the walk
            if b"null" in written:
                _refuse_non_finite(body)
            return written.decode("utf-8")
        except orjson.JSONEncodeError:
            # integers past 64 bits: orjson neither writes them nor reads them back exactly; the
            # leading space (still JSON) tells _loads to read this body with the stdlib
            return " " + json.dumps(body, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise StoreError(f"document {body.get('id')!r} is not plain JSON: {exc}") from None


def _json_array(values: Collection[Any]) -> str:
    """``values`` (of a mapping, its keys) as a JSON array for ``json_each(?)``: ids, rowids, field
    codes and condition values. orjson writes one in about a microsecond; ``json.dumps`` with
    options builds a fresh encoder on every call (~15 us), and a query passes a few dozen such
    arrays. Non-finite numbers and integers past 64 bits keep the stdlib's spelling."""
    try:
        written = orjson.dumps(values if type(values) is list else list(values))
    except orjson.JSONEncodeError:
        return json.dumps(list(values), ensure_ascii=False)
    # orjson writes NaN and infinities as null; the stdlib spells them out (and SQLite refuses them)
    return written.decode("utf-8") if b"null" not in written else json.dumps(list(values), ensure_ascii=False)


def _loads(text: str) -> Doc:
    return json.loads(text) if text[:1] == " " else orjson.loads(text)


def _refuse_non_finite(value: Any) -> None:
    # orjson writes NaN and infinities as null; a stored document must not change that silently
    kind = type(value)
    if kind is float:
        if not math.isfinite(value):
            raise ValueError(f"{value} is not a JSON number")
    elif kind is dict:
        for item in value.values():
            if type(item) not in _SCALARS:
                _refuse_non_finite(item)
    elif kind is list:
        for item in value:
            if type(item) not in _SCALARS:
                _refuse_non_finite(item)


_SCALARS = frozenset({str, int, bool, type(None)})


def _path(name: str) -> str:
    return f'$."{name}"'


def _check_name(name: str) -> str:
    if not isinstance(name, str) or not _NAME.match(name):
        raise StoreError(f"invalid field name {name!r}")
    return name


def _kbs(kb_ids: Sequence[str]) -> list[str]:
    if isinstance(kb_ids, str) or not kb_ids:
        raise ValueError("kb_ids must be a non-empty list of knowledge-base ids (never 'all KBs')")
    return [str(k) for k in kb_ids]


def _vec_blob(name: str, value: Any) -> bytes | None:
    m = _VEC.match(name)
    if not m:
        raise StoreError(f"vector field {name!r} is not named q_<dim>_vec")
    if value is None:
        return None
    arr = np.asarray(value, dtype=np.float32)
    if arr.ndim != 1 or arr.shape[0] != int(m.group(1)):
        raise StoreError(f"field {name} needs {m.group(1)} numbers, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise StoreError(f"field {name} holds a non-finite number")
    return arr.tobytes()


# the empty answer of a search half: (rowids, scores)
_NO_ROWS = np.zeros(0, dtype=np.int64)
_NO_SCORES = np.zeros(0, dtype=np.float64)
