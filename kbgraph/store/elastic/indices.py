"""Index names, the index definition (es_mappings/index.json) and vector mappings.

One index per tenant, named from a prefix and the tenant id within Elasticsearch's naming rules;
its create-index body and index template come from es_mappings/index.json with the settings filled
in; each ``q_<dims>_vec`` field is mapped with explicit dims before it is first written. Pure
functions: the store sends what they build through cluster.py.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from es_mappings import INDEX_DEFINITION
from kbgraph.store.base import StoreError

MAPPINGS_FILE = INDEX_DEFINITION
VECTOR_RE = re.compile(r"^q_([0-9]+)_vec$")


def index_name(prefix: str, tenant_id: str) -> str:
    """prefix + tenant id as a legal index name: lower case, no \\ / * ? " < > | space , # :,
    not starting with - _ + or ., at most 255 bytes. When the tenant id had to change, a hash of
    the original is appended so two tenants never share an index."""
    if not tenant_id:
        raise StoreError("tenant id is empty")
    tenant = re.sub(r"[^a-z0-9_-]", "_", tenant_id.lower())
    if tenant != tenant_id:
        tenant += "-" + hashlib.blake2b(tenant_id.encode("utf-8"), digest_size=4).hexdigest()
    name = (re.sub(r"[^a-z0-9_-]", "_", prefix.lower()) + tenant).lstrip("-_+.")
    if len(name) > 255:
        name = name[:246] + "-" + hashlib.blake2b(name.encode(), digest_size=4).hexdigest()
    if not name:
        raise StoreError(f"cannot make an index name from prefix {prefix!r} and tenant {tenant_id!r}")
    return name


def load_index_body(path: Path = MAPPINGS_FILE) -> dict[str, Any]:
    try:
        body: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise StoreError(f"Elasticsearch index definition {path} is missing (es_mappings/ ships with kbgraph)") from None
    return body


def index_body(template: Mapping[str, Any], shards: int, replicas: int, refresh_interval: str) -> dict[str, Any]:
    """The create-index body: es_mappings/index.json with the three settings filled in."""
    body = copy.deepcopy(dict(template))
    index_settings = body.setdefault("settings", {}).setdefault("index", {})
    index_settings["number_of_shards"] = shards
    index_settings["number_of_replicas"] = replicas
    index_settings["refresh_interval"] = refresh_interval
    return body


def vector_mapping(template: Mapping[str, Any], dims: int) -> dict[str, Any]:
    """The dense_vector mapping of the index template's vector rule, with ``dims`` fixed."""
    for entry in template["mappings"]["dynamic_templates"]:
        rule = next(iter(entry.values()))
        if rule["mapping"].get("type") == "dense_vector":
            return {**rule["mapping"], "dims": dims}
    raise StoreError("es_mappings/index.json has no dense_vector dynamic template")


def template_pattern(prefix: str) -> str:
    """The index template's pattern: every index under ``prefix``."""
    return re.sub(r"[^a-z0-9_-]", "_", prefix.lower()).lstrip("-_+.") + "*"


def definition_for(body: dict[str, Any], version: tuple[int, int]) -> dict[str, Any]:
    """The index definition for a cluster of ``version``. Elasticsearch >= 9.2 leaves dense vectors
    out of ``_source`` unless told otherwise; kbgraph reads stored vectors back (a merge carries an
    unchanged row's vector over), so it keeps them there."""
    if version >= (9, 2):
        body = copy.deepcopy(body)
        body["settings"]["index"].setdefault("mapping", {})["exclude_source_vectors"] = False
        return body
    return body


def vector_fields(docs: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """{vector field: dims} named in the documents; raises when a vector's length disagrees."""
    found: dict[str, int] = {}
    for doc in docs:
        for name, value in doc.items():
            match = VECTOR_RE.match(name)
            if match and value is not None:
                dims = int(match.group(1))
                if len(value) != dims:
                    raise StoreError(f"document {doc.get('id')!r}: {name} holds {len(value)} numbers, not {dims}")
                found[name] = dims
    return found
