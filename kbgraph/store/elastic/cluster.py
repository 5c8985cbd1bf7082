"""The one place that talks to the cluster: every request the store sends goes through ``Cluster``.

``Cluster`` wraps the ``elasticsearch`` client: it sends a request, checks the answer (a search
that timed out or failed on some shards raises instead of passing off part of the hits as the
whole answer) and turns failures into ``StoreError`` / ``StoreUnavailable`` with a message that
names the cluster (never its password), the operation and the index. A missing index reads as
"nothing stored yet" (None) wherever that is the right answer. ``connect`` builds the client from
the settings.
"""

from __future__ import annotations

import re
from collections.abc import Callable
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


def redact_url(url: str) -> str:
    """The URL without any password, for messages."""
    parts = urlsplit(url)
    if parts.password is None and parts.username is None:
        return url
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, f"{parts.username}:***@{host}" if parts.username else host,
                       parts.path, parts.query, parts.fragment))


def connect(settings: Settings) -> Elasticsearch:
    """The client for ``settings.es_url``: credentials, TLS and ``es_request_timeout`` applied."""
    if not settings.es_url:
        raise StoreError("store is 'elasticsearch' but es_url is empty: set KBGRAPH_ES_URL, "
                         "e.g. http://elastic:PASSWORD@localhost:9200")
    # no retry of a request that timed out: the first one may still be running on the cluster
    # (a bulk write or a long search), and a second copy would only add load. Connection
    # failures and 429/502/503/504 answers, where nothing ran, are retried.
    kwargs: dict[str, Any] = {"hosts": [settings.es_url], "request_timeout": settings.es_request_timeout,
                              "retry_on_timeout": False, "max_retries": 3}
    if settings.es_api_key:
        kwargs["api_key"] = settings.es_api_key
    elif settings.es_user:
        kwargs["basic_auth"] = (settings.es_user, settings.es_password)
    if settings.es_url.lower().startswith("https"):
        kwargs["verify_certs"] = settings.es_verify_certs
        if settings.es_ca_certs:
            kwargs["ca_certs"] = settings.es_ca_certs
    try:
        return Elasticsearch(**kwargs)
    except ValueError as exc:
        raise StoreError(f"cannot configure the Elasticsearch client for {redact_url(settings.es_url)}: {exc}") from None


class Cluster:
    """Requests to one Elasticsearch cluster, each checked; see the module docstring."""

    def __init__(self, client: Elasticsearch, url: str) -> None:
        self.client = client
        self.url = redact_url(url)
        self._version: tuple[int, int] | None = None

    # -- errors ------------------------------------------------------------------------------

    def _fail(self, what: str, index: str, exc: Exception) -> NoReturn:
        where = f"Elasticsearch at {self.url}"
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

    def _call(self, what: str, target: str, fn: Callable[..., Any], /, **kwargs: Any) -> Any:
        try:
            return fn(**kwargs)
        except (ApiError, TransportError) as exc:
            self._fail(what, target, exc)

    def _read(self, what: str, target: str, fn: Callable[..., Any], /, **kwargs: Any) -> Any | None:
        """Like _call, but a missing index answers None (nothing stored yet) instead of failing."""
        try:
            return fn(**kwargs)
        except NotFoundError as exc:
            if _error_type(exc) == "index_not_found_exception":
                return None
            self._fail(what, target, exc)
        except (ApiError, TransportError) as exc:
            self._fail(what, target, exc)

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

    # -- searches and reads ------------------------------------------------------------------

    def search(self, what: str, index: str, **kwargs: Any) -> Any | None:
        """A search whose answer is complete: a timed-out or partly failed search raises instead of
        passing off some shards' hits as the whole answer."""
        answer = self._read(what, index, self.client.search, index=index, **kwargs)
        if answer is not None:
            self._check_complete(what, index, answer)
        return answer

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
        answer = self._call(what, index, self.client.msearch, searches=lines, **extra)
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
        """A complete search in a point in time (``kwargs`` name it; ``index`` only for messages)."""
        answer = self._call(what, index, self.client.search, **kwargs)
        self._check_complete(what, index, answer)
        return answer

    def count(self, index: str, query: dict[str, Any]) -> Any | None:
        answer = self._read("count", index, self.client.count, index=index, query=query)
        if answer is not None:
            self._check_complete("count", index, answer)
        return answer

    def mget(self, index: str, **kwargs: Any) -> Any | None:
        return self._read("mget", index, self.client.mget, index=index, **kwargs)

    def open_point_in_time(self, index: str, keep_alive: str) -> Any | None:
        return self._read("opening a point in time", index, self.client.open_point_in_time, index=index,
                          keep_alive=keep_alive)

    def close_point_in_time(self, pit_id: str) -> None:
        try:
            self.client.close_point_in_time(id=pit_id)
        except (ApiError, TransportError):
            pass  # the PIT expires by itself after keep_alive

    # -- writes ------------------------------------------------------------------------------

    def bulk(self, what: str, index: str, actions: list[dict[str, Any]], refresh: bool, *, chunk_docs: int,
             max_bytes: int, retries: int, backoff: float, streams: int = 1) -> list[tuple[bool, str, dict[str, Any]]]:
        """Send actions in chunks bounded by bytes and count, retrying 429/5xx with backoff.
        ``refresh`` answers only once the writes are visible to searches (``wait_for``: the next
        scheduled refresh, no extra tiny segment per write). ``streams`` > 1 splits a write of more
        than a chunk into that many parts sent side by side (the node indexes each bulk request on
        one thread); the actions must name distinct documents. Returns (ok, id, item) per action."""
        if not actions:
            return []
        parts = max(1, min(streams, len(actions) // max(1, chunk_docs)))
        size = -(-len(actions) // parts)
        pieces = [actions[start:start + size] for start in range(0, len(actions), size)]
        if len(pieces) == 1:
            return self._bulk_stream(what, index, pieces[0], refresh, chunk_docs, max_bytes, retries, backoff)
        with ThreadPoolExecutor(max_workers=len(pieces), thread_name_prefix="kbgraph-bulk") as pool:
            sent = [pool.submit(self._bulk_stream, what, index, piece, refresh, chunk_docs, max_bytes, retries,
                                backoff) for piece in pieces]
            return [result for future in sent for result in future.result()]

    def _bulk_stream(self, what: str, index: str, actions: list[dict[str, Any]], refresh: bool, chunk_docs: int,
                     max_bytes: int, retries: int, backoff: float) -> list[tuple[bool, str, dict[str, Any]]]:
        results: list[tuple[bool, str, dict[str, Any]]] = []
        extra: dict[str, Any] = {"refresh": "wait_for"} if refresh else {}
        try:
            for ok, item in helpers.streaming_bulk(
                    self.client, actions, chunk_size=chunk_docs, max_chunk_bytes=max_bytes,
                    raise_on_error=False, raise_on_exception=True, max_retries=retries,
                    initial_backoff=backoff, max_backoff=30.0, retry_on_status=(429, 502, 503, 504),
                    **extra):
                info = next(iter(item.values()))
                results.append((ok, str(info.get("_id")), info))
        except (ApiError, TransportError) as exc:
            self._fail(what, index, exc)
        return results

    # -- indices -----------------------------------------------------------------------------

    def version(self) -> tuple[int, int]:
        """The cluster's (major, minor) version, asked once."""
        if self._version is None:
            answer = self._call("reading the cluster version", "/", self.client.info)
            number = str(answer["version"]["number"])
            major, minor = (re.findall(r"\d+", number) + ["0", "0"])[:2]
            self._version = (int(major), int(minor))
        return self._version

    def put_index_template(self, name: str, **kwargs: Any) -> None:
        self._call("putting the index template", name, self.client.indices.put_index_template, name=name, **kwargs)

    def index_exists(self, index: str) -> bool:
        return bool(self._call("checking the index", index, self.client.indices.exists, index=index))

    def create_index(self, index: str, settings: dict[str, Any], mappings: dict[str, Any]) -> None:
        """Create the index; one a concurrent creator made meanwhile is as good."""
        try:
            self.client.indices.create(index=index, settings=settings, mappings=mappings)
        except ApiError as exc:
            # a concurrent creator won the race: the index exists with the same definition
            if _error_type(exc) != "resource_already_exists_exception":
                self._fail("creating the index", index, exc)
        except TransportError as exc:
            self._fail("creating the index", index, exc)

    def delete_index(self, index: str) -> None:
        self._read("deleting the index", index, self.client.indices.delete, index=index)

    def refresh(self, index: str) -> None:
        self._read("refreshing", index, self.client.indices.refresh, index=index)

    def put_mapping(self, index: str, name: str, mapping: dict[str, Any]) -> None:
        self._call(f"mapping {name}", index, self.client.indices.put_mapping, index=index,
                   properties={name: mapping})

    def field_mapped(self, index: str, name: str) -> bool:
        """Whether the index maps the field (False when the index does not exist)."""
        answer = self._read("reading the mapping", index, self.client.indices.get_field_mapping,
                            index=index, fields=name)
        return bool(answer) and any(name in (entry.get("mappings") or {}) for entry in answer.body.values())

    def close(self) -> None:
        self.client.close()


def _error_type(exc: ApiError) -> str:
    body = exc.body if isinstance(exc.body, dict) else {}
    error = body.get("error")
    return str(error.get("type", "")) if isinstance(error, dict) else ""


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
