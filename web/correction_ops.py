"""A graph correction asked for as a JSON object (``{"op": ..., ...}``), turned into the engine call
that makes it; shared by the REST routes (web/graph_corrections.py) and the graph view's edit panel
(web/ui/graph_edit.py), which answer a ``CorrectionRequestError`` each in their own way."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from werkzeug.datastructures import FileStorage

from kbgraph.engine import Engine
from kbgraph.engine.corrections import CorrectionOutcome
from kbgraph.graph.curated import FORMATS, CuratedFormatError, CuratedGraph, parse_curated

# a curated file sent to an import route: larger ones are refused before they are read whole
OPS = ("rename", "set", "merge", "split", "delete_entity", "delete_relation", "add_entity", "add_relation")


class CorrectionRequestError(ValueError):
    """A correction request that is malformed (a missing or mistyped field, an unknown operation)."""


def _text(body: dict[str, Any], key: str, *, required: bool = True) -> str | None:
    value = body.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or (required and not value.strip()):
        raise CorrectionRequestError(f"`{key}` is required and must be a non-empty string")
    return value


def _names(body: dict[str, Any], key: str, *, required: bool = True) -> list[str]:
    value = body.get(key)
    if value is None and not required:
        return []
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v.strip() for v in value):
        raise CorrectionRequestError(f"`{key}` must be a non-empty list of strings")
    return value


def _weight(body: dict[str, Any]) -> float:
    value = body.get("weight", 1.0)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise CorrectionRequestError("`weight` must be a number")
    return float(value)


def correction_call(engine: Engine, kb: str, body: dict[str, Any], who: str) -> Callable[[], CorrectionOutcome]:
    """The engine call ``body`` asks for (checked now; made when called)."""
    op, force = body.get("op"), bool(body.get("force"))
    if op not in OPS:
        raise CorrectionRequestError(f"`op` must be one of {', '.join(OPS)} (not {op!r})")
    if op == "rename":
        entity, name = _text(body, "entity"), _text(body, "name")
        return lambda: engine.rename_entity(kb, entity, name, force=force, who=who)
    if op == "set":
        entity, kind, text = _text(body, "entity"), _text(body, "type", required=False), \
            _text(body, "description", required=False)
        return lambda: engine.set_entity(kb, entity, type=kind, description=text, who=who)
    if op == "merge":
        entities, into = _names(body, "entities"), _text(body, "into", required=False)
        return lambda: engine.merge_entities(kb, entities, into, force=force, who=who)
    if op == "split":
        entity, names, docs = _text(body, "entity"), _names(body, "names", required=False), \
            _names(body, "documents", required=False)
        name = _text(body, "name", required=False)
        return lambda: engine.split_entity(kb, entity, names=names, docs=docs, new_name=name, force=force, who=who)
    if op == "delete_entity":
        entity = _text(body, "entity")
        return lambda: engine.delete_entity(kb, entity, who=who)
    source, target = (_text(body, "source"), _text(body, "target")) if op != "add_entity" else (None, None)
    if op == "delete_relation":
        return lambda: engine.delete_relation(kb, source, target, who=who)
    description = _text(body, "description", required=False) or ""
    if op == "add_entity":
        name, kind = _text(body, "name"), _text(body, "type", required=False) or "unknown"
        return lambda: engine.add_entity(kb, name, kind, description, force=force, who=who)
    keywords, weight = _names(body, "keywords", required=False), _weight(body)
    return lambda: engine.add_relation(kb, source, target, description, keywords, weight, who=who)


def curated_upload(files: Mapping[str, FileStorage], form: Mapping[str, str],
                   max_bytes: int) -> tuple[CuratedGraph, str]:
    """The curated graph of an import request (multipart ``file``, and ``relations`` beside an
    entities CSV; ``format`` and ``source`` fields, by default the file's suffix and name); each file
    at most ``max_bytes`` (the server's max_file_bytes, as for uploaded documents)."""
    upload = files.get("file")
    if upload is None or not upload.filename:
        raise CorrectionRequestError("send the curated graph as the multipart field `file`")
    name = upload.filename
    suffix = name.rsplit(".", 1)[-1].lower()
    fmt = form.get("format") or {"graphml": "graphml", "xml": "graphml", "json": "json", "csv": "csv"}.get(suffix)
    if fmt not in FORMATS:
        raise CorrectionRequestError(f"`format` must be one of {', '.join(FORMATS)} (the file's suffix does not say)")
    relations = files.get("relations")
    relations = relations if relations is not None and relations.filename else None
    try:
        graph = parse_curated(_read(upload, max_bytes), fmt,
                              _read(relations, max_bytes) if relations is not None else None, where=name)
    except CuratedFormatError as exc:
        raise CorrectionRequestError(str(exc)) from None
    return graph, (form.get("source") or "").strip() or name


def _read(upload: FileStorage, max_bytes: int) -> bytes:
    data = upload.stream.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise CorrectionRequestError(f"{upload.filename}: the file is larger than the limit of {max_bytes} bytes "
                                     "(setting max_file_bytes)")
    return data
