"""Which index holds a tenant: its alias, the generation behind it, creating, adopting and dropping.

Every read and write of a tenant goes to its alias (indices.py names it), so the index behind it
can change (admin.py moves a tenant) while the store's users never see a name change. A tenant is
set up once per process by ``ensure``:

- its alias exists: nothing to do;
- an index of the name kbgraph used before aliases exists (a deployment made by an older
  version): the alias is pointed at it, and the tenant goes on living there until it is moved;
- neither: generation 1 is created with the alias, and ``ensure`` waits until every copy of its
  shards is active. A write acknowledged by a new index whose replicas had not started yet lives
  on one node only; killing that node loses it (the shard goes red). When the cluster has fewer
  data nodes than the copies asked for (``es_replicas`` + 1) the index is not created and the error
  says so.

Dropping a tenant deletes every index it has (the generations, a legacy index, a move's unfinished
target); dropping the last index under the prefix also deletes the index template kbgraph put there
before aliases (writes now require the alias, so no index is ever auto-created from it).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from kbgraph.store.base import StoreError
from kbgraph.store.elastic.cluster import Cluster
from kbgraph.store.elastic.indices import TenantNames, legacy_template_name, prefix_pattern, tenant_names

# how long ensure waits for a new index's shard copies to start (a new index on an idle cluster: < 1 s)
COPIES_WAIT = "60s"


class TenantIndices:
    """A store's tenants on one cluster (see the module docstring)."""

    def __init__(self, cluster: Cluster, prefix: str, definition: Callable[[], dict[str, Any]]) -> None:
        self._cluster = cluster
        self._prefix = prefix
        self._definition = definition  # the create-index body ({"settings", "mappings"}) for this cluster
        self._ready: set[str] = set()  # aliases known to exist
        self._lock = threading.Lock()

    def names(self, tenant_id: str) -> TenantNames:
        return tenant_names(self._prefix, tenant_id)

    def alias(self, tenant_id: str) -> str:
        return self.names(tenant_id).alias

    def forget(self, alias: str) -> None:
        """The alias is gone (dropped by another process): the next ``ensure`` looks again."""
        self._ready.discard(alias)

    def ensure(self, tenant_id: str) -> None:
        names = self.names(tenant_id)
        if names.alias in self._ready:
            return
        with self._lock:  # threads of one process set a tenant up once
            if names.alias in self._ready:
                return
            if not self._cluster.alias_exists(names.alias):
                if self._cluster.index_exists(names.legacy):
                    self.adopt(names)
                else:
                    self._create(names)
            self._ready.add(names.alias)

    def adopt(self, names: TenantNames) -> None:
        """Point the alias at the index an older kbgraph made for the tenant (idempotent: two
        processes adopting at once add the same alias)."""
        self._cluster.update_aliases("adopting the index", names.legacy,
                                     [{"add": {"index": names.legacy, "alias": names.alias}}])

    def _create(self, names: TenantNames) -> None:
        body = self._definition()
        index_settings = body["settings"]["index"]
        copies = int(index_settings.get("number_of_replicas", 0)) + 1
        if copies > 1:
            self.check_room(copies - 1, f"cannot create {names.generation(1)!r}", "KBGRAPH_ES_REPLICAS")
        first = names.generation(1)
        created = self._cluster.create_index(first, body["settings"], body["mappings"], aliases={names.alias: {}})
        if not created and not self._cluster.alias_exists(names.alias):
            raise StoreError(f"index {first!r} exists but the alias {names.alias!r} does not point at it: a tenant "
                             f"move was interrupted? `kbgraph store status` shows the tenant's indices")
        if copies > 1:
            self.wait_for_copies(first, copies)

    def check_room(self, replicas: int, doing: str, setting: str) -> None:
        """Refuse ``replicas`` the cluster cannot place: each copy of a shard needs a data node of its own."""
        nodes = int(self._cluster.health().get("number_of_data_nodes", 0))
        if nodes < replicas + 1:
            raise StoreError(
                f"{doing} with {replicas} replica(s): that needs {replicas + 1} data nodes (each copy of a shard "
                f"on a node of its own), and the cluster at {self._cluster.url} has {nodes} data node(s); lower "
                f"{setting} to {max(0, nodes - 1)} or add nodes")

    def wait_for_copies(self, index: str, copies: int, timeout: str = COPIES_WAIT) -> None:
        """Until every copy of every shard of ``index`` is active (green), or say which are not."""
        health = self._cluster.health(index, wait_for_status="green", timeout=timeout)
        if health.get("timed_out") or health.get("status") != "green":
            raise StoreError(
                f"index {index!r} was created, but only {health.get('active_shards', '?')} of its shard copies are "
                f"active after {timeout} ({copies} per shard asked for; {health.get('unassigned_shards', '?')} "
                f"unassigned, {health.get('initializing_shards', '?')} starting): writes to it would not survive "
                f"the loss of a node. Check the cluster (GET _cluster/allocation/explain) and run again")

    def indices(self, tenant_id: str) -> dict[str, list[str]]:
        """{index: its aliases} for every index of the tenant, with or without the alias."""
        names = self.names(tenant_id)
        found = self._cluster.indices_behind(names.pattern)
        return {index: aliases for index, aliases in found.items()
                if names.generation_of(index) is not None or names.alias in aliases}

    def current(self, tenant_id: str) -> str | None:
        """The index the tenant's alias points at (None if it has none)."""
        names = self.names(tenant_id)
        behind = [index for index, aliases in self.indices(tenant_id).items() if names.alias in aliases]
        if len(behind) > 1:
            raise StoreError(f"alias {names.alias!r} points at {len(behind)} indices ({', '.join(sorted(behind))}); "
                             f"kbgraph keeps one index behind a tenant's alias")
        return behind[0] if behind else None

    def exists(self, tenant_id: str) -> bool:
        names = self.names(tenant_id)
        return self._cluster.alias_exists(names.alias) or self._cluster.index_exists(names.legacy)

    def drop(self, tenant_id: str) -> None:
        names = self.names(tenant_id)
        with self._lock:
            self._ready.discard(names.alias)
            self._cluster.delete_indices(sorted(self.indices(tenant_id)))
        if not self._cluster.indices_behind(prefix_pattern(self._prefix)):
            self._cluster.delete_template_if_present(legacy_template_name(self._prefix))
