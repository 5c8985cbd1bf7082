"""Index and alias names, the index definition (es_mappings/index.json) and vector mappings.

A tenant's data lives in one index behind an alias, and every read and write goes to the alias, so
the tenant can move to another index (more shards or replicas) without its users noticing
(admin.py). Names come from a prefix and the tenant id within Elasticsearch's naming rules
(``index_name``, which contains only ``[a-z0-9_-]``): the alias is ``<name>.current``, the indices
behind it are generations ``<name>.1``, ``<name>.2``, ...; an index named ``<name>`` itself is what
kbgraph made before aliases (generation 0), adopted by pointing the alias at it. The dot keeps every
tenant's names apart: no other tenant's name can start with ``<name>.``. The create-index body comes
from es_mappings/index.json with the settings filled in; each ``q_<dims>_vec`` field is mapped with
explicit dims before it is first written. Pure functions: the store sends what they build through
cluster.py.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from es_mappings import INDEX_DEFINITION
from kbgraph.store.base import StoreError

MAPPINGS_FILE = INDEX_DEFINITION
VECTOR_RE = re.compile(r"^q_([0-9]+)_vec$")
ALIAS_SUFFIX = ".current"
# the longest suffix a tenant's names get (".current", or "." and a generation number)
_SUFFIX_ROOM = 16
MAX_NAME_BYTES = 255


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
    if len(name) > MAX_NAME_BYTES:
        name = _shortened(name, MAX_NAME_BYTES)
    if not name:
        raise StoreError(f"cannot make an index name from prefix {prefix!r} and tenant {tenant_id!r}")
    return name


def _shortened(name: str, size: int) -> str:
    """``name`` cut to ``size`` bytes (names here are ASCII), its hash at the end keeping it unique."""
    return name[:size - 9] + "-" + hashlib.blake2b(name.encode(), digest_size=4).hexdigest()


@dataclass(frozen=True)
class TenantNames:
    """The names of one tenant's alias and indices (see the module docstring)."""

    legacy: str  # the index kbgraph made before aliases: generation 0
    stem: str  # the alias and every generation start with it and a dot

    @property
    def alias(self) -> str:
        return self.stem + ALIAS_SUFFIX

    def generation(self, number: int) -> str:
        return f"{self.stem}.{number}"

    def generation_of(self, index: str) -> int | None:
        """The generation an index of this tenant is (0 for the legacy index), None if not one."""
        if index == self.legacy:
            return 0
        head, dot, number = index.rpartition(".")
        return int(number) if dot and head == self.stem and number.isdigit() else None

    @property
    def pattern(self) -> str:
        """An expression for every index of the tenant: the legacy one and all generations."""
        return f"{self.legacy},{self.stem}.*"


def tenant_names(prefix: str, tenant_id: str) -> TenantNames:
    legacy = index_name(prefix, tenant_id)
    stem = legacy if len(legacy) + _SUFFIX_ROOM <= MAX_NAME_BYTES else _shortened(legacy, MAX_NAME_BYTES - _SUFFIX_ROOM)
    return TenantNames(legacy=legacy, stem=stem)


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


def legacy_template_name(prefix: str) -> str:
    """The index template kbgraph put for every index under ``prefix`` before aliases (an index a
    write auto-created got kbgraph's mapping); writes now require the alias, so nothing is ever
    auto-created and the template is removed with the prefix's last index."""
    return index_name(prefix, "template")


def prefix_pattern(prefix: str) -> str:
    """Every index under ``prefix``."""
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
