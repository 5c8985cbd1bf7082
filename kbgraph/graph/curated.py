"""A curated graph read from a file: GraphML, the node-link JSON ``kbgraph graph export`` writes
(so an export can be edited and imported back), or two CSV files (entities: name, type,
description; relations: source, target, description, keywords, weight). Every reading failure is a
``CuratedFormatError`` naming the file and what is wrong with it.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass, field
from pathlib import Path

import networkx as nx

from kbgraph.graph.keys import clean_name, normalize_key

FORMATS = ("graphml", "json", "csv")


class CuratedFormatError(ValueError):
    """A curated graph file that cannot be read; the message names the file and the reason."""


@dataclass(frozen=True)
class CuratedEntity:
    name: str
    type: str = "unknown"
    description: str = ""


@dataclass(frozen=True)
class CuratedRelation:
    src: str
    tgt: str
    description: str = ""
    keywords: tuple[str, ...] = ()
    weight: float = 1.0


@dataclass
class CuratedGraph:
    entities: list[CuratedEntity] = field(default_factory=list)
    relations: list[CuratedRelation] = field(default_factory=list)


def _text(value: object) -> str:
    return "" if value is None else " ".join(str(value).split()) if not isinstance(value, str) else value.strip()


def _type(value: str) -> str:
    # LightRAG writes its types quoted ('"PERSON"')
    return clean_name(value) or "unknown"


def _keywords(value: object) -> tuple[str, ...]:
    if isinstance(value, (list, tuple)):
        parts = [str(v) for v in value]
    else:
        parts = str(value or "").replace(";", "|").replace(",", "|").split("|")
    return tuple(p.strip() for p in parts if p.strip())


def _weight(value: object, where: str) -> float:
    if value in (None, ""):
        return 1.0
    try:
        weight = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise CuratedFormatError(f"{where}: weight {value!r} is not a number") from None
    if not weight > 0:
        raise CuratedFormatError(f"{where}: weight {value!r} must be above 0")
    return weight


def _first(attrs: dict, keys: tuple[str, ...]) -> str:
    return next((_text(attrs[k]) for k in keys if _text(attrs.get(k))), "")


def from_networkx(graph: nx.Graph, where: str) -> CuratedGraph:
    """Nodes are entities (their ``name`` attribute, else their id), edges relations. The attribute
    names other tools write are read too (``entity_name``, ``entity_type``: LightRAG's GraphML and
    RAGFlow's graph JSON)."""
    out = CuratedGraph()
    names: dict[object, str] = {}
    for node, attrs in graph.nodes(data=True):
        name = clean_name(_first(attrs, ("name", "entity_name", "label")) or _text(node))
        if not normalize_key(name):
            raise CuratedFormatError(f"{where}: node {node!r} has no usable name")
        names[node] = name
        out.entities.append(CuratedEntity(name, _type(_first(attrs, ("type", "entity_type"))),
                                          _text(attrs.get("description"))))
    for src, tgt, attrs in graph.edges(data=True):
        if names[src] == names[tgt]:
            continue
        out.relations.append(CuratedRelation(names[src], names[tgt], _text(attrs.get("description")),
                                             _keywords(attrs.get("keywords")),
                                             _weight(attrs.get("weight"), f"{where}: edge {src!r} -- {tgt!r}")))
    return out


def read_graphml(data: bytes, where: str = "GraphML") -> CuratedGraph:
    try:
        graph = nx.read_graphml(io.BytesIO(data))
    except Exception as exc:  # networkx raises several kinds (ElementTree, KeyError, NetworkXError)
        raise CuratedFormatError(f"{where}: not readable GraphML ({exc})") from None
    return from_networkx(graph, where)


def read_node_link_json(data: bytes, where: str = "JSON") -> CuratedGraph:
    try:
        payload = json.loads(data.decode("utf-8-sig"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CuratedFormatError(f"{where}: not JSON ({exc})") from None
    if not isinstance(payload, dict) or not isinstance(payload.get("nodes"), list):
        raise CuratedFormatError(f"{where}: expected the node-link JSON `kbgraph graph export --format json` "
                                 "writes (an object with \"nodes\" and \"edges\")")
    edges = "edges" if "edges" in payload else "links"
    try:
        graph = nx.node_link_graph(payload, edges=edges)
    except Exception as exc:  # a node without "id", an edge to nowhere
        raise CuratedFormatError(f"{where}: not a node-link graph ({exc})") from None
    return from_networkx(graph, where)


def _rows(data: bytes, where: str, required: tuple[str, ...]) -> list[dict[str, str]]:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise CuratedFormatError(f"{where}: not UTF-8 text") from None
    reader = csv.DictReader(io.StringIO(text))
    header = [h.strip().lower() for h in reader.fieldnames or []]
    missing = [c for c in required if c not in header]
    if missing:
        raise CuratedFormatError(f"{where}: the header lacks {', '.join(missing)} (has: {', '.join(header) or 'nothing'})")
    return [{(k or "").strip().lower(): (v or "").strip() for k, v in row.items()} for row in reader]


def read_csv_pair(entities: bytes, relations: bytes | None, where: str = "CSV") -> CuratedGraph:
    """Entities (name, type, description) and relations (source, target, description, keywords, weight)."""
    out = CuratedGraph()
    for line, row in enumerate(_rows(entities, f"{where} entities", ("name",)), start=2):
        name = clean_name(row["name"])
        if not normalize_key(name):
            raise CuratedFormatError(f"{where} entities, line {line}: no name")
        out.entities.append(CuratedEntity(name, _type(row.get("type", "")), row.get("description", "")))
    if relations is not None:
        for line, row in enumerate(_rows(relations, f"{where} relations", ("source", "target")), start=2):
            src, tgt = clean_name(row["source"]), clean_name(row["target"])
            if not normalize_key(src) or not normalize_key(tgt):
                raise CuratedFormatError(f"{where} relations, line {line}: a relation needs a source and a target")
            if normalize_key(src) != normalize_key(tgt):
                out.relations.append(CuratedRelation(src, tgt, row.get("description", ""), _keywords(row.get("keywords")),
                                                     _weight(row.get("weight"), f"{where} relations, line {line}")))
    return out


def read_curated(path: Path, relations: Path | None = None, fmt: str | None = None) -> CuratedGraph:
    """A curated graph from a file (its format from ``fmt`` or its suffix); ``relations``: the
    relations CSV beside an entities CSV."""
    fmt = fmt or {".graphml": "graphml", ".xml": "graphml", ".json": "json", ".csv": "csv"}.get(path.suffix.lower())
    if fmt not in FORMATS:
        raise CuratedFormatError(f"{path}: cannot tell its format from the suffix {path.suffix!r}; "
                                 f"name one of {', '.join(FORMATS)}")
    try:
        data = path.read_bytes()
        extra = relations.read_bytes() if relations is not None else None
    except OSError as exc:
        raise CuratedFormatError(f"cannot read {exc.filename}: {exc.strerror}") from None
    return parse_curated(data, fmt, extra, where=str(path))


def parse_curated(data: bytes, fmt: str, relations: bytes | None = None, where: str = "") -> CuratedGraph:
    if fmt == "graphml":
        return read_graphml(data, where or "GraphML")
    if fmt == "json":
        return read_node_link_json(data, where or "JSON")
    if fmt == "csv":
        return read_csv_pair(data, relations, where or "CSV")
    raise CuratedFormatError(f"unknown curated graph format {fmt!r}: choose {', '.join(FORMATS)}")
