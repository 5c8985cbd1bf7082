"""`kbgraph store`: the Elasticsearch indices behind the tenants, shown, moved and replicated.

`status` prints the cluster's health and every index under the prefix; `move-tenant` moves a
tenant to a new index with other shards or replicas while it is in use; `replicas` changes the
replicas of existing indices. How they work: kbgraph/store/elastic/admin.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import click

from kbgraph.cli.output import echo_table
from kbgraph.cli.root import fail, main
from kbgraph.config import Settings
from kbgraph.store.base import StoreError


@contextmanager
def open_elastic(ctx: click.Context) -> Iterator[Any]:
    """The Elasticsearch store of the settings; a clear error on the embedded store or a failure."""
    from kbgraph.store import open_store

    settings: Settings = ctx.obj["settings"]
    if settings.store != "elasticsearch":
        fail(f"`kbgraph store` manages Elasticsearch indices; this store is {settings.store!r} "
             f"(set KBGRAPH_STORE=elasticsearch and KBGRAPH_ES_URL)")
    store = None
    try:
        store = open_store(settings)
        yield store
    except StoreError as exc:
        fail(f"storage: {exc}", code=1)
    finally:
        if store is not None:
            store.close()


@main.group("store")
def store_group() -> None:
    """Elasticsearch indices: status, moving a tenant, replicas."""


@store_group.command("status")
@click.pass_context
def store_status(ctx: click.Context) -> None:
    """The cluster's health and every index under the prefix (shards, replicas, rows, aliases)."""
    from kbgraph.store.elastic.admin import index_states

    with open_elastic(ctx) as store:
        health = store._cluster.health()
        click.echo(f"cluster {health.get('cluster_name')}: {health.get('status')}, {health.get('number_of_nodes')} "
                   f"nodes ({health.get('number_of_data_nodes')} data), {health.get('unassigned_shards')} unassigned "
                   f"shard copies")
        states = index_states(store)
        if not states:
            click.echo(f"no index under the prefix {ctx.obj['settings'].es_index_prefix!r} yet")
            return
        table = [("INDEX", "HEALTH", "SHARDS", "REPLICAS", "ROWS", "ALIAS", "NOTE")]
        table += [(s.index, s.health, str(s.shards), str(s.replicas), str(s.rows), ",".join(s.aliases) or "-",
                   "write-blocked" if s.write_blocked else "") for s in states]
        echo_table(table, right=(2, 3, 4))


@store_group.command("move-tenant")
@click.option("--tenant", help="The tenant whose index moves (default: the one the CLI acts for: "
                                "`kbgraph --tenant T`, KBGRAPH_TENANT, else `default`).")
@click.option("--shards", type=click.IntRange(min=1), help="Primary shards of the new index (default: as now).")
@click.option("--replicas", type=click.IntRange(min=0), help="Replicas of the new index (default: as now).")
@click.option("--clean", is_flag=True,
              help="First delete what an interrupted move left (its unfinished index, its write block).")
@click.pass_context
def store_move_tenant(ctx: click.Context, tenant: str | None, shards: int | None, replicas: int | None, clean: bool) -> None:
    """Move a tenant to a new index with other shards or replicas, while it is in use.

    Reads go on throughout; writes go on during the copy and are held for a few seconds at the
    switch (never refused or lost). The old index is deleted once the alias points at the new one."""
    from kbgraph.store.elastic.admin import move_tenant

    tenant = tenant or ctx.obj["settings"].tenant
    with open_elastic(ctx) as store:
        report = move_tenant(store, tenant, shards=shards, replicas=replicas, clean=clean, say=click.echo)
        click.echo(f"moved: {report.rows} rows in {report.target} ({report.shards} shards, {report.replicas} "
                   f"replicas), {report.rounds} rounds, {report.deleted} rows deleted during the copy")


@store_group.command("replicas")
@click.argument("count", type=click.IntRange(min=0))
@click.option("--tenant", "tenants", multiple=True, help="Only this tenant's index (repeatable; default: every "
                                                         "tenant index under the prefix).")
@click.option("--wait/--no-wait", default=True, show_default=True, help="Wait until every copy is active.")
@click.pass_context
def store_replicas(ctx: click.Context, count: int, tenants: tuple[str, ...], wait: bool) -> None:
    """Set the replicas of existing tenant indices (new ones follow KBGRAPH_ES_REPLICAS)."""
    from kbgraph.store.elastic.admin import set_replicas

    with open_elastic(ctx) as store:
        changed = set_replicas(store, count, list(tenants) or None, wait=wait, say=click.echo)
        if not changed:
            click.echo("no tenant index to change")
        elif wait:
            click.echo(f"{len(changed)} index(es) have {count} replica(s), every copy active")
