"""What an Elasticsearch failure means for the request that met it: whether asking again cures it.

Shards lost with a node (killed, restarted, partitioned) are promoted elsewhere within seconds; a
shard closed under a request (its index deleted by a tenant move's switch) is replaced by the new
index behind the alias. Such failures are asked again (``cluster.NODE_LOSS_WAITS``); every other
failure is said at once.
"""

from __future__ import annotations

from typing import Any

from elasticsearch import ApiError

# shard failures that mean a node went away (killed, restarted, partitioned): the copies it held
# are promoted elsewhere within seconds, so the search is asked again
NODE_LOSS = frozenset({
    "no_shard_available_action_exception", "node_disconnected_exception", "node_not_connected_exception",
    "node_closed_exception", "connect_transport_exception", "send_request_transport_exception",
    "search_context_missing_exception", "shard_not_found_exception", "illegal_index_shard_state_exception",
    "unavailable_shards_exception", "receive_timeout_transport_exception", "node_shutdown_exception",
})
# a shard closed under a request that held it: the index was deleted (a tenant move drops the old
# index behind the alias right after the switch) or its copy relocated; asked again, the alias
# resolves to the index that replaced it. ES words it "already closed, can't increment ref count"
SHARD_CLOSED_TYPES = frozenset({"illegal_state_exception", "already_closed_exception"})
SHARD_CLOSED_REASON = "already closed"


def errors_in(body: Any) -> list[dict[str, Any]]:
    """Every error object in an error body or shard failure, with its causes."""
    found: list[dict[str, Any]] = []
    stack = [body]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if isinstance(item.get("type"), str):
                found.append(item)
            stack += [value for key, value in item.items() if key in ("error", "reason", "caused_by", "root_cause",
                                                                       "failed_shards", "failures")]
        elif isinstance(item, list):
            stack += item
    return found


def cured_by_asking_again(body: Any) -> bool:
    """Whether a failure is one that asking again cures: shards lost with a node, or a shard
    closed under the request (its index deleted by a tenant move's switch)."""
    for error in errors_in(body):
        if error["type"] in NODE_LOSS:
            return True
        if error["type"] in SHARD_CLOSED_TYPES and SHARD_CLOSED_REASON in str(error.get("reason", "")):
            return True
    return False


def request_asked_again(exc: ApiError) -> bool:
    """Whether a request that failed whole is to be asked again."""
    return cured_by_asking_again(exc.body if isinstance(exc.body, dict) else {})


def search_asked_again(item: Any) -> bool:
    """Whether one search of a multi-search lost shards, or failed whole, with a node (or to a
    shard closed under it)."""
    if "error" in item:
        return cured_by_asking_again(item["error"])
    return shards_asked_again(item)


def shards_asked_again(answer: Any) -> bool:
    """Whether an answer's failed shards are ones that asking again cures; a shard whose index is
    not found is one too here: the alias resolved to an index that a tenant move then deleted."""
    shards = answer.get("_shards") or {}
    failures = shards.get("failures") or []
    index_gone = any(error["type"] == "index_not_found_exception" for error in errors_in(failures))
    return bool(shards.get("failed")) and (cured_by_asking_again(failures) or index_gone)
