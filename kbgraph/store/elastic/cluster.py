"""The one place that talks to the cluster: every request the store sends goes through ``Cluster``.

``Cluster`` wraps the ``elasticsearch`` client: it sends a request, checks the answer (a search
that timed out or failed on some shards raises instead of passing off part of the hits as the
whole answer) and turns failures into ``StoreError`` / ``StoreUnavailable`` with a message that
names the cluster (never its password), the operation and the index. A missing index reads as
"nothing stored yet" (None) wherever that is the right answer. ``connect`` builds the client from
the settings.

On a cluster of several nodes (``es_url`` lists them, comma-separated) the client sends requests to
each in turn and leaves a node that does not answer for a while; a request whose node went away is
sent again to another (every kbgraph write names its document ids, so a write sent twice lands
once). What a lost node takes with it is picked up here: a search whose shard copies were on it is
asked again once the cluster has promoted their replicas, a scan's point in time is opened again
and the scan goes on after its last row. Writes go to tenant aliases only (``require_alias``), so a
write never creates an index, and a write that meets the write block a tenant move sets for a
moment (admin.py) waits for it to lift and goes to wherever the alias then points.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NoReturn
from urllib.parse import urlsplit, urlunsplit

from elasticsearch import (
    ApiError,
    AuthenticationException,
    AuthorizationException,
    ConnectionError as EsConnectionError,
    Elasticsearch,
    NotFoundError,
    TransportError,
    helpers,
)

from kbgraph.config import Settings
from kbgraph.store.base import StoreError, StoreUnavailable
from kbgraph.store.elastic.failures import request_asked_again, search_asked_again, shards_asked_again

# a search that lost shards to a node is asked again this often, after waiting (s) for the
# cluster to notice: a node killed with kill -9 is dropped and its replicas promoted in ~1-3 s here
NODE_LOSS_WAITS = (0.5, 1.0, 2.0, 4.0, 8.0)
# how long a write waits for a write block to lift: a tenant move blocks writes only while it
# copies the last changes and switches the alias (admin.py; seconds for a tenant of 100k rows)
WRITE_BLOCK_WAIT = 120.0
# _shard_doc, the scan's tiebreak, is a long: after a point in time is opened again, this value
# continues strictly after the last row's id (ids are unique, so no other row shares it)
_AFTER_ALL = 2**63 - 1


def urls_of(es_url: str) -> list[str]:
    """The node URLs ``es_url`` lists (comma-separated)."""
    return [part.strip() for part in es_url.split(",") if part.strip()]


def redact_url(url: str) -> str:
    """The URL(s) without any password, for messages."""
    if "," in url:
        return ",".join(redact_url(part) for part in urls_of(url))
    parts = urlsplit(url)
    if parts.password is None and parts.username is None:
        return url
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, f"{parts.username}:***@{host}" if parts.username else host,
                       parts.path, parts.query, parts.fragment))


def connect(settings: Settings) -> Elasticsearch:
    """The client for ``settings.es_url`` (one URL, or several nodes of one cluster comma-separated):
    credentials, TLS and ``es_request_timeout`` applied."""
    hosts = urls_of(settings.es_url)
    if not hosts:
        raise StoreError("store is 'elasticsearch' but es_url is empty: set KBGRAPH_ES_URL, "
                         "e.g. http://elastic:PASSWORD@localhost:9200 (several nodes: comma-separated)")
    # no retry of a request that timed out: the first one may still be running on the cluster
    # (a bulk write or a long search), and a second copy would only add load. Connection
    # failures and 429/502/503/504 answers, where nothing ran, are retried, on another node when
    # there are several: as many tries as nodes, and at least 3
    kwargs: dict[str, Any] = {"hosts": hosts, "request_timeout": settings.es_request_timeout,
                              "retry_on_timeout": False, "max_retries": max(3, len(hosts))}
    if settings.es_api_key:
        kwargs["api_key"] = settings.es_api_key
    elif settings.es_user:
        kwargs["basic_auth"] = (settings.es_user, settings.es_password)
    if any(host.lower().startswith("https") for host in hosts):
        kwargs["verify_certs"] = settings.es_verify_certs
        if settings.es_ca_certs:
            kwargs["ca_certs"] = settings.es_ca_certs
    try:
        return Elasticsearch(**kwargs)
    except ValueError as exc:
        raise StoreError(f"cannot configure the Elasticsearch client for {redact_url(settings.es_url)}: {exc}") from None


@dataclass(frozen=True)
class _BulkSend:
    """How one bulk write is sent, whichever part of it a stream carries."""

    what: str
    index: str
    refresh: bool
    chunk_docs: int
    max_bytes: int
    retries: int
    backoff: float
    require_alias: bool


class Cluster:
    """Requests to one Elasticsearch cluster, each checked; see the module docstring."""

    def __init__(self, client: Elasticsearch, url: str, *, query_timeout: float | None = None) -> None:
        self.client = client
        # searches and reads wait at most query_timeout (es_query_timeout), shorter than the client's
        # own es_request_timeout that writes keep: a hung cluster answers a question "unavailable"
        # in seconds (the client's options() shares its connections)
        self.reads = client.options(request_timeout=query_timeout) if query_timeout else client
        self.url = redact_url(url)
        self._version: tuple[int, int] | None = None
        # told the alias a write went to when the cluster says it is gone (dropped elsewhere), so
        # the store forgets it knew the tenant's index and creates it again on the next write
        self.forget: Callable[[str], None] | None = None

    # -- errors ------------------------------------------------------------------------------

    def _gone(self, index: str, exc: ApiError) -> bool:
        """Whether ``exc`` says the index or alias is missing; the store then forgets it knew it."""
        if _error_type(exc) != "index_not_found_exception":
            return False
        if self.forget is not None:
            self.forget(index)
        return True

    def _fail(self, what: str, index: str, exc: Exception) -> NoReturn:
        where = f"Elasticsearch at {self.url}"
        if isinstance(exc, ApiError):
            self._gone(index, exc)
        if isinstance(exc, (AuthenticationException, AuthorizationException)):
            raise StoreUnavailable(
                f"{where} refused {what} on index {index!r} ({exc.meta.status}): check KBGRAPH_ES_USER/"
                f"KBGRAPH_ES_PASSWORD or KBGRAPH_ES_API_KEY and the user's privileges") from exc
        if isinstance(exc, ApiError):
            raise StoreError(f"{where}: {what} on index {index!r} failed: {exc.meta.status} {_reason(exc)}") from exc
        if isinstance(exc, (EsConnectionError, TransportError)):
            raise StoreUnavailable(f"{where} cannot be reached ({what} on index {index!r}): {exc}. "
                                   f"Check KBGRAPH_ES_URL and that the cluster is running") from exc
        raise StoreError(f"{where}: {what} on index {index!r} failed: {exc}") from exc

    def call(self, what: str, target: str, fn: Callable[..., Any], /, **kwargs: Any) -> Any:
        """``fn(**kwargs)``, its failure a StoreError naming ``what`` and ``target``; a 429 (a node
        out of heap for now) is waited out as in ``_complete``."""
        return self._sent(what, target, fn, kwargs, missing_ok=False)

    _call = call

    def read(self, what: str, target: str, fn: Callable[..., Any], /, **kwargs: Any) -> Any | None:
        """Like call, but a missing index answers None (nothing stored yet) instead of failing."""
        return self._sent(what, target, fn, kwargs, missing_ok=True)

    _read = read

    def _sent(self, what: str, target: str, fn: Callable[..., Any], kwargs: dict[str, Any], *,
              missing_ok: bool) -> Any | None:
        for wait in (*NODE_LOSS_WAITS, None):
            try:
                return fn(**kwargs)
            except NotFoundError as exc:
                if missing_ok and self._gone(target, exc):
                    return None
                self._fail(what, target, exc)
            except ApiError as exc:
                if wait is None or exc.meta.status != 429:
                    self._fail(what, target, exc)
            except TransportError as exc:
                self._fail(what, target, exc)
            time.sleep(wait)
        raise AssertionError("unreachable")  # the last try returns or fails

    def _check_complete(self, what: str, index: str, answer: Any) -> None:
        shards = answer.get("_shards") or {}
        if answer.get("timed_out"):
            raise StoreError(f"Elasticsearch at {self.url}: {what} on index {index!r} timed out on the cluster "
                             f"({shards.get('successful', '?')} of {shards.get('total', '?')} shards answered)")
        if shards.get("failed"):
            first = (shards.get("failures") or [{}])[0]
            reason = (first.get("reason") or {}) if isinstance(first, dict) else {}
            raise StoreError(f"Elasticsearch at {self.url}: {what} on index {index!r} failed on "
                             f"{shards['failed']} of {shards.get('total', '?')} shards: "
                             f"{reason.get('type')}: {reason.get('reason')}")

    def _complete(self, what: str, index: str, send: Callable[[], Any], *, missing_ok: bool,
                  on_loss: Callable[[], None] | None = None) -> Any | None:
        """``send()``'s complete answer. Shards lost with a node are asked again once the cluster
        has had time to promote their replicas (NODE_LOSS_WAITS); ``on_loss`` prepares the next try.
        A 429 (a node out of heap for now: its circuit breaker, or its search queue full) waits as
        long: the client sent it again at once, to no avail."""
        for wait in (*NODE_LOSS_WAITS, None):
            try:
                answer = send()
            except ApiError as exc:
                if missing_ok and isinstance(exc, NotFoundError) and self._gone(index, exc):
                    return None
                if wait is None or not (request_asked_again(exc) or exc.meta.status == 429):
                    self._fail(what, index, exc)
            except TransportError as exc:
                self._fail(what, index, exc)
            else:
                if wait is None or not shards_asked_again(answer):
                    self._check_complete(what, index, answer)
                    return answer
            time.sleep(wait)
            if on_loss is not None:
                on_loss()
        raise AssertionError("unreachable")  # the last try returns or fails

    def _complete_each(self, what: str, index: str, send: Callable[[], Any]) -> Any:
        """A multi-search answer in which no search lost shards with a node: asked again, as a
        search is by ``_complete``, while the cluster promotes the lost shards' replicas (or the
        whole request failed so, or on a shard closed under it)."""
        for wait in (*NODE_LOSS_WAITS, None):
            try:
                answer = self._sent(what, index, send, {}, missing_ok=False)
            except StoreError as exc:
                cause = exc.__cause__
                if wait is None or not (isinstance(cause, ApiError) and request_asked_again(cause)):
                    raise
            else:
                if wait is None or not any(search_asked_again(item) for item in answer["responses"]):
                    return answer
            time.sleep(wait)
        raise AssertionError("unreachable")  # the last try returns

    # -- searches and reads ------------------------------------------------------------------

    def search(self, what: str, index: str, **kwargs: Any) -> Any | None:
        """A search whose answer is complete: a timed-out or partly failed search raises instead of
        passing off some shards' hits as the whole answer (shards lost with a node are asked again)."""
        return self._complete(what, index, lambda: self.reads.search(index=index, **kwargs), missing_ok=True)

    def msearch(self, what: str, index: str, lines: list[dict[str, Any]],
                filter_path: list[str] | None = None) -> list[Any | None]:
        """Several searches in one request (``queries.msearch_lines``); per search its complete
        answer, or None where the index is missing. A search that failed, timed out or failed on
        some shards raises, as ``search`` does. ``filter_path``: the parts of each answer to send
        (``responses.`` paths; what this method checks is always sent)."""
        extra: dict[str, Any] = {}
        if filter_path is not None:
            extra["filter_path"] = ["responses.status", "responses.error", "responses.timed_out",
                                    "responses._shards", *filter_path]
        answer = self._complete_each(what, index, lambda: self.reads.msearch(searches=lines, **extra))
        out: list[Any | None] = []
        for item in answer["responses"]:
            error = item.get("error")
            if error is not None:
                kind = error.get("type") if isinstance(error, dict) else None
                if kind == "index_not_found_exception":
                    out.append(None)
                    continue
                raise StoreError(f"Elasticsearch at {self.url}: {what} on index {index!r} failed: "
                                 f"{item.get('status', '?')} {_item_reason(error)}")
            self._check_complete(what, index, item)
            out.append(item)
        return out

    def search_point_in_time(self, what: str, index: str, **kwargs: Any) -> Any:
        """A complete search in a point in time (``kwargs`` name it; ``index`` is where it was
        opened). When shards of the point in time were lost with a node, a new one is opened on
        ``index`` and the page asked again after the last row (the answer's ``pit_id`` names it)."""
        asked = dict(kwargs)

        def reopen() -> None:
            try:
                opened = self.client.open_point_in_time(index=index, keep_alive=asked["pit"]["keep_alive"])
            except (ApiError, TransportError):
                return  # the cluster is not ready yet: the next try fails the same way and waits again
            self.close_point_in_time(asked["pit"]["id"])
            asked["pit"] = {**asked["pit"], "id": opened["id"]}
            if asked.get("search_after") and _sorts_last_on_shard_doc(asked.get("sort")):
                asked["search_after"] = [*asked["search_after"][:-1], _AFTER_ALL]

        return self._complete(what, index, lambda: self.client.search(**asked), missing_ok=False, on_loss=reopen)

    def count(self, index: str, query: dict[str, Any]) -> Any | None:
        return self._complete("count", index, lambda: self.reads.count(index=index, query=query), missing_ok=True)

    def mget(self, index: str, **kwargs: Any) -> Any | None:
        """A realtime multi-get in which every row was looked for: an item that failed (its index
        was deleted under the alias by a tenant move's switch after this request resolved it, or
        its shard was lost with a node) is no "not found", so the whole get is asked again, as a
        search that lost shards is; None when the index is missing."""
        for wait in (*NODE_LOSS_WAITS, None):
            answer = self._read("mget", index, self.reads.mget, index=index, **kwargs)
            failed = [item["error"] for item in (answer or {}).get("docs", []) if "error" in item]
            if not failed:
                return answer
            if all(_names_missing(error, index) for error in failed):
                # the alias itself is missing (nothing stored, or dropped): a read finds nothing
                if self.forget is not None:
                    self.forget(index)
                return None
            if wait is None:
                raise StoreError(f"Elasticsearch at {self.url}: mget on index {index!r} failed for {len(failed)} "
                                 f"rows: {_item_reason(failed[0])}")
            time.sleep(wait)
        raise AssertionError("unreachable")  # the last try returns or fails

    def open_point_in_time(self, index: str, keep_alive: str) -> Any | None:
        return self._complete("opening a point in time", index,
                              lambda: self.client.open_point_in_time(index=index, keep_alive=keep_alive),
                              missing_ok=True)

    def close_point_in_time(self, pit_id: str) -> None:
        try:
            self.client.close_point_in_time(id=pit_id)
        except (ApiError, TransportError):
            pass  # the PIT expires by itself after keep_alive

    # -- writes ------------------------------------------------------------------------------

    def bulk(self, what: str, index: str, actions: list[dict[str, Any]], refresh: bool, *, chunk_docs: int,
             max_bytes: int, retries: int, backoff: float, streams: int = 1,
             require_alias: bool = True) -> list[tuple[bool, str, dict[str, Any]]]:
        """Send actions in chunks bounded by bytes and count, retrying 429/5xx with backoff.
        ``refresh`` answers only once the writes are visible to searches (``wait_for``: the next
        scheduled refresh, no extra tiny segment per write). ``streams`` > 1 splits a write of more
        than a chunk into that many parts sent side by side (the node indexes each bulk request on
        one thread); the actions must name distinct documents. Writes must go to an alias (see the
        module docstring); actions that meet a write block are sent again once it lifts, for up
        to WRITE_BLOCK_WAIT. Returns (ok, id, item) per action."""
        send = _BulkSend(what, index, refresh, chunk_docs, max_bytes, retries, backoff, require_alias)
        results: list[tuple[bool, str, dict[str, Any]]] = []
        pending, blocked_since = actions, None
        while pending:
            blocked: dict[str, dict[str, Any]] = {}
            for ok, doc_id, info in self._bulk_side_by_side(send, pending, streams):
                if not ok and _write_blocked(info):
                    blocked[doc_id] = info
                    continue
                if not ok and _error_of(info).get("type") == "index_not_found_exception" and self.forget:
                    self.forget(index)
                results.append((ok, doc_id, info))
            if not blocked:
                break
            blocked_since = blocked_since or time.monotonic()
            if time.monotonic() - blocked_since > WRITE_BLOCK_WAIT:
                results += [(False, doc_id, _blocked_too_long(info)) for doc_id, info in blocked.items()]
                break
            time.sleep(1.0)
            pending = [action for action in pending if str(action.get("_id")) in blocked]
        return results

    def _bulk_side_by_side(self, send: _BulkSend, actions: list[dict[str, Any]],
                           streams: int) -> list[tuple[bool, str, dict[str, Any]]]:
        if not actions:
            return []
        parts = max(1, min(streams, len(actions) // max(1, send.chunk_docs)))
        size = -(-len(actions) // parts)
        pieces = [actions[start:start + size] for start in range(0, len(actions), size)]
        if len(pieces) == 1:
            return self._bulk_stream(send, pieces[0])
        with ThreadPoolExecutor(max_workers=len(pieces), thread_name_prefix="kbgraph-bulk") as pool:
            sent = [pool.submit(self._bulk_stream, send, piece) for piece in pieces]
            return [result for future in sent for result in future.result()]

    def _bulk_stream(self, send: _BulkSend, actions: list[dict[str, Any]]) -> list[tuple[bool, str, dict[str, Any]]]:
        results: list[tuple[bool, str, dict[str, Any]]] = []
        extra: dict[str, Any] = {"refresh": "wait_for"} if send.refresh else {}
        if send.require_alias:
            extra["require_alias"] = True
        try:
            for ok, item in helpers.streaming_bulk(
                    self.client, actions, chunk_size=send.chunk_docs, max_chunk_bytes=send.max_bytes,
                    raise_on_error=False, raise_on_exception=True, max_retries=send.retries,
                    initial_backoff=send.backoff, max_backoff=30.0, retry_on_status=(429, 502, 503, 504),
                    **extra):
                info = next(iter(item.values()))
                results.append((ok, str(info.get("_id")), info))
        except (ApiError, TransportError) as exc:
            self._fail(send.what, send.index, exc)
        return results

    # -- indices -----------------------------------------------------------------------------

    def version(self) -> tuple[int, int]:
        """The cluster's (major, minor) version, asked once."""
        if self._version is None:
            answer = self._call("reading the cluster version", "/", self.reads.info)
            number = str(answer["version"]["number"])
            major, minor = (re.findall(r"\d+", number) + ["0", "0"])[:2]
            self._version = (int(major), int(minor))
        return self._version

    def index_exists(self, index: str) -> bool:
        return bool(self._call("checking the index", index, self.reads.indices.exists, index=index))

    def alias_exists(self, alias: str) -> bool:
        return bool(self._call("checking the alias", alias, self.client.indices.exists_alias, name=alias))

    def indices_behind(self, expression: str) -> dict[str, list[str]]:
        """{index: its aliases} for every index ``expression`` names (indices, aliases, wildcards)."""
        answer = self._call("listing indices", expression, self.client.indices.get_alias, index=expression,
                            ignore_unavailable=True, allow_no_indices=True, expand_wildcards="open,closed")
        return {name: sorted((entry or {}).get("aliases") or {}) for name, entry in answer.body.items()}

    def update_aliases(self, what: str, target: str, actions: list[dict[str, Any]]) -> None:
        """Alias changes applied together, atomically (ES "Aliases API")."""
        self._call(what, target, self.client.indices.update_aliases, actions=actions)

    def create_index(self, index: str, settings: dict[str, Any], mappings: dict[str, Any],
                     aliases: dict[str, Any] | None = None) -> bool:
        """Create the index; False when a concurrent creator made it meanwhile (the same definition)."""
        try:
            self.client.indices.create(index=index, settings=settings, mappings=mappings,
                                       **({"aliases": aliases} if aliases else {}))
        except ApiError as exc:
            if _error_type(exc) != "resource_already_exists_exception":
                self._fail("creating the index", index, exc)
            return False
        except TransportError as exc:
            self._fail("creating the index", index, exc)
        return True

    def delete_indices(self, indices: list[str]) -> None:
        """Delete these indices, named one by one (clusters refuse wildcard deletes by default)."""
        if indices:
            self._read("deleting the index", ",".join(indices), self.client.indices.delete, index=",".join(indices),
                       ignore_unavailable=True)

    def health(self, index: str | None = None, **params: Any) -> dict[str, Any]:
        """The cluster's (or ``index``'s) health; ``wait_for_*`` and ``timeout`` wait on the cluster
        side, so the request may take that long: the client waits a little longer."""
        wait = _seconds(params.get("timeout", "30s")) + 10.0
        client = self.client.options(request_timeout=wait)
        answer = self._call("reading the cluster health", index or "_all", client.cluster.health,
                            **({"index": index} if index else {}), **params)
        return dict(answer.body)

    def delete_template_if_present(self, name: str) -> None:
        try:
            self.client.indices.delete_index_template(name=name)
        except NotFoundError:
            pass
        except (ApiError, TransportError) as exc:
            self._fail("deleting the index template", name, exc)

    def refresh(self, index: str) -> None:
        """Refresh every shard of ``index``, or raise. A shard whose primary went with a node is not
        refreshed at all (the primary refreshes, then its replicas): the replica promoted in its
        place would answer searches without the writes the caller means to read, so the refresh is
        asked again, while the cluster promotes it, until every shard answered."""
        for wait in (*NODE_LOSS_WAITS, None):
            answer = self._read("refreshing", index, self.client.indices.refresh, index=index)
            if answer is None or not (answer.get("_shards") or {}).get("failed"):
                return
            if wait is None:
                self._check_complete("refreshing", index, answer)
            time.sleep(wait)

    def put_mapping(self, index: str, name: str, mapping: dict[str, Any]) -> None:
        self._call(f"mapping {name}", index, self.client.indices.put_mapping, index=index,
                   properties={name: mapping})

    def field_mapped(self, index: str, name: str) -> bool:
        """Whether the index maps the field (False when the index does not exist)."""
        answer = self._read("reading the mapping", index, self.reads.indices.get_field_mapping,
                            index=index, fields=name)
        return bool(answer) and any(name in (entry.get("mappings") or {}) for entry in answer.body.values())

    def close(self) -> None:
        self.client.close()


def _error_type(exc: ApiError) -> str:
    body = exc.body if isinstance(exc.body, dict) else {}
    error = body.get("error")
    return str(error.get("type", "")) if isinstance(error, dict) else ""


def _names_missing(error: Any, index: str) -> bool:
    """Whether one failed item of a multi-get says that ``index`` itself (the alias asked for) does
    not exist, rather than the index it resolved to (deleted under it by a move's switch)."""
    return isinstance(error, dict) and error.get("type") == "index_not_found_exception" \
        and error.get("index") == index


def _item_reason(error: Any) -> str:
    """The reason of one failed item of a multi-request answer (the error object of its JSON)."""
    if isinstance(error, dict):
        root = (error.get("root_cause") or [error])[0]
        return f"{root.get('type', error.get('type'))}: {root.get('reason', error.get('reason'))}"
    return str(error)


def _reason(exc: ApiError) -> str:
    body = exc.body if isinstance(exc.body, dict) else {}
    error = body.get("error")
    if isinstance(error, dict):
        root = (error.get("root_cause") or [error])[0]
        return f"{root.get('type', error.get('type'))}: {root.get('reason', error.get('reason'))}"
    return str(exc.message)


def _error_of(info: dict[str, Any]) -> dict[str, Any]:
    error = info.get("error")
    return error if isinstance(error, dict) else {}


def _write_blocked(info: dict[str, Any]) -> bool:
    """A bulk item refused by an index write block (``index.blocks.write``: FORBIDDEN/8), the one
    a tenant move sets; the read-only blocks of a full disk are not waited for."""
    error = _error_of(info)
    return error.get("type") == "cluster_block_exception" and "index write" in str(error.get("reason", ""))


def _blocked_too_long(info: dict[str, Any]) -> dict[str, Any]:
    error = _error_of(info)
    reason = (f"{error.get('reason')} for more than {WRITE_BLOCK_WAIT:.0f} s: a tenant move left it, or it was "
              f"set by hand (`kbgraph store move-tenant --clean` lifts a move's block)")
    return {**info, "error": {**error, "reason": reason}}


def _sorts_last_on_shard_doc(sort: Any) -> bool:
    if not isinstance(sort, list) or not sort:
        return False
    last = sort[-1]
    return last == "_shard_doc" or (isinstance(last, dict) and "_shard_doc" in last)


def _seconds(value: Any) -> float:
    """A time value such as "30s", "500ms" or "1m" in seconds."""
    match = re.fullmatch(r"(\d+(?:\.\d+)?)(ms|s|m)?", str(value))
    if not match:
        return 30.0
    number, unit = float(match.group(1)), match.group(2) or "s"
    return number / 1000 if unit == "ms" else number * 60 if unit == "m" else number
