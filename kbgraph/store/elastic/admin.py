"""Growing a tenant's index: moving it to a new index (more shards or replicas) while it is in use,
and changing the replicas of existing indices. The `kbgraph store` commands call these.

A move copies the tenant's index behind its alias (the source) into the next generation (the
target) with a point-in-time-free walk per shard in sequence-number order, and PIT-free bulk
writes, since the published Elasticsearch artifacts have no reindex module. Reads never stop: they
go to the source until the alias switches, atomically, to the target. Writes go on during the
copy and none is lost:

1. the target is created without replicas (a bulk copy then writes each row once) and every row of
   the source is copied; before each round the source's per-shard global checkpoints are noted;
2. rounds copy again what changed since the last noted checkpoints (a row written gets a higher
   sequence number on its shard), until a round finds little (MOVE_QUIET_ROWS) or MOVE_ROUNDS ran;
3. the target gets its replicas and the move waits until they are all active;
4. the source is write-blocked (the add-block API waits for writes in flight to finish): a write
   that arrives now is held by the writer and sent again once the block lifts (cluster.py), so it
   is delayed by seconds, never refused or lost. The last changes are copied; rows deleted from the
   source meanwhile (a delete leaves no row to find by sequence number) are found by comparing both
   indices' ids when their counts differ, and deleted from the target; the counts must then agree;
5. one alias update points the alias at the target and deletes the source, and the held writes go
   to the target.

The block lasts as long as the last round (the changes since the round before, plus an id walk
when rows were deleted): the rounds of step 2 keep it short. A move that fails lifts the block and
deletes its target; one that was killed leaves both, and the next move refuses to start until
``clean=True`` (``--clean``) deletes the unfinished target and lifts the block.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kbgraph.store.base import StoreError
from kbgraph.store.elastic.copier import IndexCopier, Say
from kbgraph.store.elastic.indices import ALIAS_SUFFIX, TenantNames, prefix_pattern

if TYPE_CHECKING:
    from kbgraph.store.elastic.store import ElasticStore

# the unblocked rounds stop once a round copied at most this many rows, or after MOVE_ROUNDS
MOVE_QUIET_ROWS = 1000
MOVE_ROUNDS = 5
# how long a move waits for the target's replicas to start (their data is copied from the primaries)
REPLICAS_WAIT = "30m"


@dataclass
class MoveReport:
    tenant: str
    alias: str
    source: str
    target: str
    shards: int
    replicas: int
    rows: int = 0  # rows in the target when the alias switched
    copied: int = 0  # rows written to the target, counting rows copied again after a change
    deleted: int = 0  # rows deleted from the target because the source deleted them during the copy
    rounds: int = 0
    blocked_seconds: float = 0.0
    blocked_from: float = 0.0  # time.monotonic() when writes were blocked, and when the block ended
    blocked_until: float = 0.0


@dataclass
class IndexState:
    index: str
    aliases: list[str]
    health: str
    shards: int
    replicas: int
    rows: int
    write_blocked: bool
    tenant_alias: str | None = field(default=None)


def _quiet(_: str) -> None:
    pass


def _prepare(mover: IndexCopier, tenant_id: str, names: TenantNames, clean: bool) -> tuple[str, int]:
    """The source index and the next generation number; leftovers of a killed move cleaned or refused."""
    indices = mover.store.tenants.indices(tenant_id)
    source = mover.store.tenants.current(tenant_id)
    if source is None:
        raise StoreError(f"tenant {tenant_id!r} has no index behind {names.alias!r}: nothing to move")
    leftovers = sorted(index for index in indices if index != source)
    blocked = str(mover.settings_of(source).get("index.blocks.write", "false")).lower() == "true"
    if (leftovers or blocked) and not clean:
        raise StoreError(
            f"a move of tenant {tenant_id!r} is running or was interrupted: "
            + (f"{', '.join(leftovers)} exist(s) beside {source!r}" if leftovers else "")
            + (" and " if leftovers and blocked else "") + (f"{source!r} is write-blocked" if blocked else "")
            + ". If no move of this tenant runs now, run it again with --clean (deletes the unfinished index, "
              "lifts the block)")
    if leftovers:
        mover.say(f"deleting what an interrupted move left: {', '.join(leftovers)}")
        mover.cluster.delete_indices(leftovers)
    if blocked:
        mover.say(f"lifting the write block an interrupted move left on {source}")
        mover.write_block(source, False)
    generations = [names.generation_of(index) or 0 for index in indices]
    return source, max(generations, default=0) + 1


def move_tenant(store: "ElasticStore", tenant_id: str, *, shards: int | None = None, replicas: int | None = None,
                clean: bool = False, say: Say = _quiet) -> MoveReport:
    """Move the tenant to a new index with ``shards`` / ``replicas`` (default: the current ones)."""
    mover = IndexCopier(store, say)
    if not store.index_exists(tenant_id):
        raise StoreError(f"tenant {tenant_id!r} has no index under the prefix {store._prefix!r}: nothing to move")
    store.ensure_index(tenant_id)  # adopts an index an older kbgraph made
    names = store.tenants.names(tenant_id)
    source, generation = _prepare(mover, tenant_id, names, clean)
    current = mover.settings_of(source)
    report = MoveReport(tenant_id, names.alias, source, names.generation(generation),
                        shards or int(current["index.number_of_shards"]),
                        int(current["index.number_of_replicas"]) if replicas is None else replicas)
    if report.shards < 1 or report.replicas < 0:
        raise StoreError(f"shards must be >= 1 and replicas >= 0, not {report.shards} and {report.replicas}")
    store.tenants.check_room(report.replicas, f"cannot move tenant {tenant_id!r}", "--replicas")
    _create_target(mover, source, current, report)
    try:
        marks = _copy_rounds(mover, report, int(current["index.number_of_shards"]))
        _switch(mover, report, marks, int(current["index.number_of_shards"]))
    except BaseException:
        if store.tenants.current(tenant_id) != report.target:  # never delete what the alias points at
            mover.cluster.delete_indices([report.target])
        raise
    mover.say(f"{report.alias} -> {report.target}: {report.rows} rows; writes were held for "
              f"{report.blocked_seconds:.1f} s")
    return report


def _create_target(mover: IndexCopier, source: str, current: dict[str, Any], report: MoveReport) -> None:
    mapping = mover.cluster.call("reading the mapping", source, mover.cluster.client.indices.get_mapping, index=source)
    mappings = copy.deepcopy(next(iter(mapping.body.values()))["mappings"])
    body = copy.deepcopy(mover.store._definition())
    index_settings = body["settings"]["index"]
    index_settings.update(number_of_shards=report.shards, number_of_replicas=0)
    refresh = current.get("index.refresh_interval")
    if refresh:
        index_settings["refresh_interval"] = refresh
    if not mover.cluster.create_index(report.target, body["settings"], mappings):
        raise StoreError(f"{report.target!r} already exists: another move of tenant {report.tenant!r} started just now")
    mover.say(f"moving {report.alias}: {source} -> {report.target} ({report.shards} shards, "
              f"{report.replicas} replicas)")


def _copy_rounds(mover: IndexCopier, report: MoveReport, source_shards: int) -> dict[int, int]:
    """Steps 1-3 of the module docstring; returns the checkpoints the last round copied up to."""
    marks: dict[int, int] | None = None
    for _ in range(MOVE_ROUNDS):
        noted = mover.checkpoints(report.source)
        mover.cluster.refresh(report.source)
        copied = mover.copy_changes(report.source, report.target, marks, source_shards)
        report.copied += copied
        report.rounds += 1
        mover.say(f"round {report.rounds}: {copied} rows copied")
        marks = noted
        if copied <= MOVE_QUIET_ROWS:
            break
    if report.replicas:
        mover.put_settings(report.target, {"index.number_of_replicas": report.replicas})
        mover.say(f"waiting for the {report.replicas} replica(s) of {report.target}")
        mover.store.tenants.wait_for_copies(report.target, report.replicas + 1, timeout=REPLICAS_WAIT)
    # rows deleted so far, before the block: under it only those deleted since remain to be found
    # (a row written again after this has a sequence number past ``marks``: a later round copies it)
    report.deleted += mover.remove_extras(report.source, report.target)
    # and what changed meanwhile, so that the blocked round is as short as can be
    noted = mover.checkpoints(report.source)
    mover.cluster.refresh(report.source)
    report.copied += mover.copy_changes(report.source, report.target, marks, source_shards)
    report.rounds += 1
    return noted


def _switch(mover: IndexCopier, report: MoveReport, marks: dict[int, int], source_shards: int) -> None:
    """Steps 4-5: block, last changes, deletions, counts, one alias update."""
    source, target = report.source, report.target
    report.blocked_from = time.monotonic()
    mover.write_block(source, True)
    try:
        mover.cluster.refresh(source)
        _copy_new_fields(mover, source, target)
        report.copied += mover.copy_changes(source, target, marks, source_shards)
        report.rounds += 1
        have, want = mover.rows(target), mover.rows(source)
        if have != want:
            report.deleted += mover.remove_extras(source, target)
            have = mover.rows(target)
        if have != want:
            raise StoreError(f"the copy of {source!r} in {target!r} holds {have} rows, the source {want}: nothing "
                             f"was switched")
        report.rows = have
        mover.cluster.update_aliases("switching the alias", report.alias,
                                     [{"add": {"index": target, "alias": report.alias}},
                                      {"remove_index": {"index": source}}])
    except BaseException:
        if mover.cluster.index_exists(source):
            mover.write_block(source, False)
        raise
    report.blocked_until = time.monotonic()
    report.blocked_seconds = report.blocked_until - report.blocked_from


def _copy_new_fields(mover: IndexCopier, source: str, target: str) -> None:
    """Fields mapped on the source during the copy (a new vector size) mapped on the target too."""
    answer = mover.cluster.call("reading the mapping", source, mover.cluster.client.indices.get_mapping, index=source)
    properties = next(iter(answer.body.values()))["mappings"].get("properties") or {}
    mover.cluster.call("copying the mapping", target, mover.cluster.client.indices.put_mapping, index=target,
                       properties=properties)


def set_replicas(store: "ElasticStore", replicas: int, tenant_ids: list[str] | None = None, *,
                 wait: bool = True, say: Say = _quiet) -> list[str]:
    """Set the replicas of the tenants' indices (None: every tenant index under the store's
    prefix); with ``wait``, until every copy is active. Returns the indices changed."""
    if replicas < 0:
        raise StoreError(f"replicas must be >= 0, not {replicas}")
    store.tenants.check_room(replicas, "cannot set the replicas", "the replicas")
    if tenant_ids is None:
        indices = sorted(state.index for state in index_states(store) if state.tenant_alias)
    else:
        indices = [index for tenant in tenant_ids for index in [store.tenants.current(tenant)] if index]
        missing = [tenant for tenant in tenant_ids if store.tenants.current(tenant) is None]
        if missing:
            raise StoreError(f"no index for tenant(s) {', '.join(missing)}")
    mover = IndexCopier(store, say)
    for index in indices:
        mover.put_settings(index, {"index.number_of_replicas": replicas})
        say(f"{index}: {replicas} replica(s)")
    if wait:
        for index in indices:
            store.tenants.wait_for_copies(index, replicas + 1, timeout=REPLICAS_WAIT)
    return indices


def index_states(store: "ElasticStore") -> list[IndexState]:
    """Every index under the store's prefix: health, shards, replicas, rows, aliases."""
    cluster = store._cluster
    pattern = prefix_pattern(store._prefix)
    behind = cluster.indices_behind(pattern)
    if not behind:
        return []
    rows = cluster.call("listing indices", pattern, cluster.client.cat.indices, index=pattern, format="json",
                        expand_wildcards="open,closed")
    settings = cluster.call("reading the settings", pattern, cluster.client.indices.get_settings, index=pattern,
                            flat_settings=True, expand_wildcards="open,closed")
    states = []
    for row in rows.body:
        name = row["index"]
        flat = settings.body.get(name, {}).get("settings", {})
        aliases = behind.get(name, [])
        states.append(IndexState(
            index=name, aliases=aliases, health=str(row.get("health")), shards=int(row.get("pri") or 0),
            replicas=int(row.get("rep") or 0), rows=int(row.get("docs.count") or 0),
            write_blocked=str(flat.get("index.blocks.write", "false")).lower() == "true",
            tenant_alias=next((a for a in aliases if a.endswith(ALIAS_SUFFIX)), None)))
    return sorted(states, key=lambda s: s.index)
