"""All of kbgraph's settings, in one place.

Sources, later ones winning: built-in defaults, an optional TOML file, then ``KBGRAPH_*``
environment variables. The TOML file is ``$KBGRAPH_CONFIG`` if set, else ``./kbgraph.toml`` if it
exists. Keys in the TOML file are the field names below (flat, e.g. ``store = "sqlite"``); the
environment variable for a field is ``KBGRAPH_`` + the upper-cased field name.

Every field is documented in the README's configuration table; keep the two in step.
"""

from __future__ import annotations

import dataclasses
import os
import re
import tomllib
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, get_type_hints


class ConfigError(ValueError):
    """A setting has a value kbgraph cannot use; the message names the setting."""


# the data folder's name; unset, it is found like git finds its folder (find_data_dir)
DATA_DIR_NAME = ".kbgraph"


@dataclass(frozen=True)
class Settings:
    # where the embedded store, metadata DB, caches and logs live; unset: the nearest .kbgraph folder
    # of the current directory and its parents, else ./.kbgraph (find_data_dir)
    data_dir: Path = Path(DATA_DIR_NAME)
    # document store engine: "sqlite" (embedded), "elasticsearch" or another registered one (kbgraph.store.factory)
    store: str = "sqlite"
    # metadata database; empty means SQLite in data_dir/meta.db
    database_url: str = ""
    # the tenant the CLI and the library act for (a service's API keys and web accounts each act for
    # one; `kbgraph --tenant T` works on that tenant's knowledge bases); it must exist unless "default"
    tenant: str = "default"
    # SQLite connections each process keeps open at most to the embedded store (threads wait for one)
    store_connections: int = 8
    # where uploaded files are kept (kbgraph.blob): "local" (a folder, blob_dir) or "s3" (a bucket of
    # any S3-compatible server, which web servers and workers on other machines share)
    blob_store: str = "local"
    # the local blob store's folder; unset = data_dir/uploads
    blob_dir: Path | None = None

    # the S3 blob store: endpoint (empty = AWS), bucket, region, credentials (empty = boto3's own
    # lookup: AWS_* variables, ~/.aws, an instance role) and a key prefix inside the bucket
    s3_endpoint_url: str = ""
    s3_bucket: str = "kbgraph"
    s3_region: str = "us-east-1"
    s3_access_key_id: str = ""
    s3_secret_access_key: str = ""
    s3_prefix: str = ""
    # a missing bucket is created on first use (true) or refused with an error naming it (false)
    s3_create_bucket: bool = True
    # "path" (http://host/bucket/key: what S3-compatible servers answer), "virtual" (bucket.host) or "auto"
    s3_addressing_style: str = "path"

    # Elasticsearch: es_url is one URL, or the nodes of one cluster comma-separated (the client spreads
    # requests over them and goes on without a node that stops answering)
    es_url: str = ""
    es_api_key: str = ""
    es_user: str = ""
    es_password: str = ""
    es_ca_certs: str = ""
    es_verify_certs: bool = True
    es_index_prefix: str = "kbgraph_"
    # shards and replicas of new tenant indices (`kbgraph store move-tenant` / `replicas` change existing ones)
    es_shards: int = 1
    es_replicas: int = 0
    es_refresh_interval: str = "1s"
    # seconds per Elasticsearch request: writes and index management, and searches and reads
    # (shorter: a question asked while the cluster hangs gets its "store unavailable" answer sooner)
    es_request_timeout: float = 30.0
    es_query_timeout: float = 10.0
    es_bulk_bytes: int = 5_000_000

    # embeddings: "local" (bundled multilingual-e5-small), "openai" (any compatible endpoint) or "hash"
    embedding_provider: str = "local"
    embedding_model: str = ""
    embedding_base_url: str = ""
    embedding_api_key: str = ""
    embedding_batch_size: int = 64
    # batches of one embed call in flight at once ("openai" provider)
    embedding_concurrency: int = 16
    embedding_dim: int = 384  # only for the hash embedder; the others report their own
    # batches the local embedder runs at once, one core each; 0 = the cores this process may use when
    # it is the machine's only indexer (the CLI, the library), 1 per process in service mode (a
    # deployment's worker and web processes share the machine)
    embedding_threads: int = 0
    # where the local model's prepared files live (made once per machine); empty = ~/.cache/kbgraph/models
    embedding_model_cache: str = ""
    # what a relation's vector is: "chunks" (the mean of the vectors of the chunks it is found in, no
    # model call), "text" (its text embedded) or "auto" (chunks with the local embedder, else text)
    relation_vectors: str = "auto"
    # what an entity's vector is: "chunk" (an entity found in one chunk only gets that chunk's vector
    # plus a little of its name's: one short model pass; entities of several chunks embed their
    # text), "text" (its text embedded) or "auto" (chunk with the local embedder, else text)
    entity_vectors: str = "auto"

    # chat model over the OpenAI protocol; unset base URL and model = no LLM configured
    llm_base_url: str = ""
    llm_api_key: str = ""
    llm_model: str = ""
    llm_temperature: float = 0.0
    llm_max_tokens: int = 4096
    llm_timeout: float = 120.0
    llm_max_retries: int = 4
    # chat calls in flight at once per process (hosted APIs allow this many and more)
    llm_concurrency: int = 16
    # chat calls in flight at once for one knowledge base (0: llm_concurrency)
    llm_kb_concurrency: int = 16
    # request and token budgets per minute for the chat model (0: unlimited); a 429's Retry-After
    # pauses every call to the model, not only the one that got it
    llm_requests_per_minute: int = 0
    llm_tokens_per_minute: int = 0

    # ingestion defaults (a knowledge base may override chunking)
    max_file_bytes: int = 50_000_000
    chunk_tokens: int = 512
    chunk_overlap: int = 64
    # documents of one indexing run parsed, embedded and stored together (one embedding batch and
    # one store transaction), and merged together into the graph
    index_batch_documents: int = 64
    # documents parsed but not yet merged into the graph: bounds the memory of a run
    index_documents_in_flight: int = 256

    # retrieval defaults
    # w in similarity = (1-w)·term + w·vector; unset = the embedder's own (EMBEDDER_VECTOR_WEIGHT)
    vector_similarity_weight: float | None = None
    similarity_threshold: float = 0.2
    top_k: int = 1024
    top_n: int = 8

    # knowledge graph defaults
    max_gleanings: int = 1
    # chunks of fewer tokens get no gleaning round (a short text is listed whole in one pass)
    glean_min_tokens: int = 256
    # "missed": glean a chunk only when its first pass left out at least glean_missed_names of the
    # proper names the offline detector finds in it; "always": every chunk (kbgraph/graph/extract/glean.py)
    glean_policy: str = "missed"
    glean_missed_names: int = 2
    summary_max_tokens: int = 500
    # fragments put into one summary prompt (at least twice summary_max_tokens); more are summarized
    # in groups, then the group summaries. 12k: the most cited entity of 1,890 MuSiQue passages
    # (United States, 286 fragments, 9.6k tokens) still takes one call, as in nano-graphrag (which
    # sends up to 32k); 4k had cost 11 group calls more than nano-graphrag's whole summary count
    summary_prompt_tokens: int = 12000
    # ask for summaries in the model calls an indexing run's last chunks leave free, for the entities
    # and relations those chunks cannot add to (kbgraph/index/summaries_ahead.py; needs the LLM cache)
    summarize_ahead: bool = True
    max_cluster_size: int = 10
    # communities with fewer entities get a report put together from their rows, not an LLM call
    report_min_entities: int = 3
    # "largest": LLM reports for the communities of the largest connected component, reports put
    # together from their rows for the rest (the islands a document or two form on their own), as
    # Microsoft GraphRAG, nano-graphrag and RAGFlow cluster only the largest component; "all": every
    # community of report_min_entities or more gets an LLM report
    report_scope: str = "largest"
    language: str = "English"
    empty_response: str = "I cannot find this in the knowledge base."

    # service mode
    redis_url: str = "redis://127.0.0.1:6379/0"
    redis_prefix: str = "kbgraph:"
    # seconds between a running task's liveness beats: a task or knowledge-base lock whose holder
    # missed three beats (a killed worker) is taken over by another worker, and the chat model
    # slots its calls held free themselves
    task_heartbeat: float = 5.0
    # seconds before Redis hands a message a worker took but never acknowledged (it was killed) to
    # another worker; a duplicate of a task still running elsewhere is recognised and dropped
    broker_visibility_timeout: float = 45.0
    # seconds a finished document waits before its knowledge base's graph refresh runs (a batch shares one)
    graph_refresh_delay: float = 5.0
    # the web server (gunicorn): worker processes, threads per process, seconds a request may run
    web_workers: int = 2
    web_threads: int = 8
    web_timeout: float = 120.0
    # gunicorn's access log: "-" (standard output, the default), a file path, or "" for none
    web_access_log: str = "-"
    # a worker's Prometheus metrics (tasks, model calls and tokens, embedder throughput) served at
    # http://<host>:<port>/metrics by its main process; 0: not served
    worker_metrics_port: int = 0
    # limits at the web server's door (max_file_bytes bounds each uploaded file)
    max_request_bytes: int = 128_000_000
    max_question_chars: int = 8192
    max_list_items: int = 1000
    max_page_size: int = 1000
    # signs the web pages' session cookies; empty = a random key kept in data_dir/web_secret_key
    web_secret_key: str = ""
    # encrypts the API keys of tenants' model providers at rest; empty = a random secret kept in
    # data_dir/provider_key_secret (several hosts: set the same value everywhere)
    provider_key_secret: str = ""
    # earlier values of provider_key_secret, comma-separated: keys sealed with them stay readable after
    # the secret changes, until `kbgraph-web providers reseal` seals them again with the current one
    provider_key_previous_secrets: str = ""
    # proxies in front of the web server whose X-Forwarded-For/-Proto/-Host headers are believed
    # (0: none; a client could forge them): HTTPS behind a proxy makes the session cookie Secure, and
    # the sign-in throttle counts the client's address, not the proxy's
    web_proxy_hops: int = 0
    # sign-in throttle: wrong passwords allowed per account and per client address within
    # login_window seconds; past either, sign-ins are refused (HTTP 429) until the window ends
    login_failures_per_account: int = 10
    login_failures_per_address: int = 30
    login_window: float = 900.0

    @property
    def data_location(self) -> str:
        """Where the knowledge bases are kept, for a message that finds none: the data folder, and
        the metadata database when it is a server's (its password hidden)."""
        folder = str(self.data_dir.absolute())
        if not self.database_url:
            return folder
        shown = re.sub(r"(://[^:/@]+):[^@]*@", r"\1:***@", self.database_url)
        return f"{shown} (data folder {folder})"

    @property
    def sqlite_store_path(self) -> Path:
        return self.data_dir / "store.db"

    @property
    def blob_path(self) -> Path:
        return self.blob_dir or self.data_dir / "uploads"

    @property
    def meta_url(self) -> str:
        return self.database_url or f"sqlite:///{(self.data_dir / 'meta.db').resolve()}"

    @property
    def cache_path(self) -> Path:
        return self.data_dir / "cache.db"

    @property
    def llm_configured(self) -> bool:
        return bool(self.llm_base_url and self.llm_model)

    @property
    def hybrid_vector_weight(self) -> float:
        """The vector share of hybrid chunk search: the setting, or the embedder's default when unset."""
        if self.vector_similarity_weight is not None:
            return self.vector_similarity_weight
        return EMBEDDER_VECTOR_WEIGHT.get(self.embedding_provider, 0.3)

    @property
    def relation_vectors_from_chunks(self) -> bool:
        """Whether relation vectors are their chunks' mean vector (``relation_vectors``). With the
        bundled e5 that loses nothing measurable and saves ~17 ms of a core per relation, 70% of an
        offline build's embedding (bench/README.md); other embedders keep embedding the text."""
        if self.relation_vectors == "auto":
            return self.embedding_provider == "local"
        return self.relation_vectors == "chunks"

    @property
    def entity_vectors_from_chunk(self) -> bool:
        """Whether an entity found in a single chunk gets its vector from that chunk's and its name's
        (``entity_vectors``) instead of embedding its text. With the bundled e5 that stays within
        0.01 of every retrieval figure and embeds a name (~2 ms) instead of a description (~17 ms)
        for 86% of the MuSiQue entities (bench/README.md); other embedders keep embedding the text."""
        if self.entity_vectors == "auto":
            return self.embedding_provider == "local"
        return self.entity_vectors == "chunk"

    @property
    def local_embedding_threads(self) -> int:
        """Batches the local embedder runs at once: ``embedding_threads``, or when that is 0 every
        core this process may run on (its CPU affinity). Each batch runs on one core of its own:
        unlike one batch spread over the cores, whose threads wait for each other at every layer
        (seven times slower per call once another job takes a core), independent batches lose
        nothing when a core is busy (bench/README.md)."""
        if self.embedding_threads:
            return self.embedding_threads
        try:
            return max(1, len(os.sched_getaffinity(0)))
        except AttributeError:  # not on Linux
            return max(1, os.cpu_count() or 1)

    def replace(self, **changes: Any) -> "Settings":
        return dataclasses.replace(self, **changes)


# The default vector share of hybrid search per embedding provider. The bundled multilingual-e5
# ranks passages better than BM25 (bench/README.md, retrieval): at 0.7 naive recall@5 goes
# MuSiQue 0.50 -> 0.59, HotpotQA 0.80 -> 0.865, the chat logs and Chinese news within noise;
# the hash embedder is only lexical hashing, and an unknown OpenAI-compatible model keeps
# RAGFlow's 0.3.
EMBEDDER_VECTOR_WEIGHT: dict[str, float] = {"local": 0.7, "hash": 0.3, "openai": 0.3}


# "store" is not among them: it names an engine registered in kbgraph.store.factory, which checks
# the name when the store is opened (a third engine registers itself there)
# What a knowledge base's entity types (``kb create/set --entity-types``, the settings page) do for
# the LLM-free ``nlp`` extraction method; the type its names get when no configured type fits them
# (kbgraph.graph.extract.nlp.types applies it).
NLP_FALLBACK_TYPE = "other"
ENTITY_TYPES_HELP = (
    "Entity types (per knowledge base: kbgraph kb create/set --entity-types, or the knowledge base's "
    "settings page). With an LLM method (general, light) the model is asked for these types. With the nlp "
    "method, which has no model, the extractor recognises people, organizations, places and events and "
    "gives each the first configured type that names that kind or a synonym of it (place, location, city; "
    "company, org; people, character); names of no such kind (products, works) go to a catch-all type if "
    "one is configured (category, concept, other, misc, thing), and a name that no configured type takes "
    f"gets the type '{NLP_FALLBACK_TYPE}'. A type the nlp method has no cue for (ghost, say) stays empty; "
    "change the types, then rebuild the graph (kbgraph graph refresh --rebuild) to retype what is indexed."
)


_CHOICES = {
    "embedding_provider": {"local", "openai", "hash"},
    "relation_vectors": {"auto", "chunks", "text"},
    "entity_vectors": {"auto", "chunk", "text"},
    "glean_policy": {"missed", "always"},
    "report_scope": {"largest", "all"},
    "blob_store": {"local", "s3"},
    "s3_addressing_style": {"auto", "path", "virtual"},
}

# S3's bucket names (and those of the servers that copy it): 3-63 lower-case letters, digits, dots and
# hyphens, starting and ending with a letter or digit
_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
# a key prefix inside the bucket: key segments (kbgraph.blob.base), each ending with "/"
_S3_PREFIX = re.compile(r"([A-Za-z0-9_-][A-Za-z0-9._-]*/)*")


def _coerce(name: str, kind: Any, raw: Any) -> Any:
    optional = [k for k in getattr(kind, "__args__", ()) if k is not type(None)]
    if optional:  # ``X | None``: empty means unset
        if raw is None or (isinstance(raw, str) and not raw.strip()):
            return None
        kind = optional[0]
    try:
        if kind is bool:
            if isinstance(raw, bool):
                return raw
            text = str(raw).strip().lower()
            if text in {"1", "true", "yes", "on"}:
                return True
            if text in {"0", "false", "no", "off", ""}:
                return False
            raise ValueError(raw)
        if kind is Path:
            return Path(str(raw)).expanduser()
        return kind(raw)
    except (TypeError, ValueError):
        raise ConfigError(f"setting {name!r}: cannot read {raw!r} as {kind.__name__}") from None


def _validate(settings: Settings) -> None:
    if not settings.tenant.strip() or len(settings.tenant) > 64:
        raise ConfigError(f"setting 'tenant' is {settings.tenant!r}: a tenant id has 1 to 64 characters")
    for name, allowed in _CHOICES.items():
        value = getattr(settings, name)
        if value not in allowed:
            raise ConfigError(f"setting {name!r} is {value!r}; choose one of {sorted(allowed)}")
    if settings.vector_similarity_weight is not None and not 0.0 <= settings.vector_similarity_weight <= 1.0:
        raise ConfigError("setting 'vector_similarity_weight' must lie between 0 and 1")
    for name in ("llm_concurrency", "embedding_concurrency", "embedding_batch_size",
                 "store_connections", "web_workers", "web_threads", "index_batch_documents", "index_documents_in_flight",
                 "glean_missed_names", "login_failures_per_account", "login_failures_per_address"):
        if getattr(settings, name) < 1:
            raise ConfigError(f"setting {name!r} must be at least 1, not {getattr(settings, name)}")
    if settings.embedding_threads < 0:
        raise ConfigError("setting 'embedding_threads' must be 0 (the cores this process may use) or more, "
                          f"not {settings.embedding_threads}")
    for name in ("llm_kb_concurrency", "llm_requests_per_minute", "llm_tokens_per_minute"):
        if getattr(settings, name) < 0:
            raise ConfigError(f"setting {name!r} must be 0 (no limit) or more, not {getattr(settings, name)}")
    for name in ("task_heartbeat", "broker_visibility_timeout"):
        if not getattr(settings, name) > 0:
            raise ConfigError(f"setting {name!r} must be positive, not {getattr(settings, name)}")
    if settings.chunk_overlap >= settings.chunk_tokens:
        raise ConfigError("setting 'chunk_overlap' must be smaller than 'chunk_tokens'")
    _validate_service(settings)
    _validate_elasticsearch(settings)
    _validate_s3(settings)


def _validate_service(settings: Settings) -> None:
    for name in ("llm_timeout", "web_timeout", "es_request_timeout", "es_query_timeout"):
        if not getattr(settings, name) > 0:
            raise ConfigError(f"setting {name!r} must be positive, not {getattr(settings, name)}")
    for name in ("max_file_bytes", "max_request_bytes", "chunk_tokens", "embedding_dim", "es_bulk_bytes",
                 "es_shards", "max_question_chars", "max_list_items", "max_page_size"):
        if getattr(settings, name) < 1:
            raise ConfigError(f"setting {name!r} must be at least 1, not {getattr(settings, name)}")
    for name in ("es_replicas", "graph_refresh_delay"):
        if getattr(settings, name) < 0:
            raise ConfigError(f"setting {name!r} must be 0 or more, not {getattr(settings, name)}")


# Elasticsearch's time units (its refresh_interval takes them; "-1" switches refreshing off)
_ES_TIME = re.compile(r"^(\d+(?:\.\d+)?)(nanos|micros|ms|s|m|h|d)$")
_ES_UNIT_SECONDS = {"nanos": 1e-9, "micros": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def es_interval_seconds(value: str) -> float | None:
    """An Elasticsearch time value in seconds; None when it is not one (or not positive)."""
    found = _ES_TIME.match(value.strip())
    if not found:
        return None
    seconds = float(found.group(1)) * _ES_UNIT_SECONDS[found.group(2)]
    return seconds if seconds > 0 else None


def _validate_elasticsearch(settings: Settings) -> None:
    if settings.store != "elasticsearch":
        return
    if not settings.es_url.strip():
        raise ConfigError("setting 'store' is 'elasticsearch' but 'es_url' is empty: set KBGRAPH_ES_URL, "
                          "e.g. http://elastic:PASSWORD@localhost:9200")
    for url in settings.es_url.split(","):
        if not url.strip().lower().startswith(("http://", "https://")):
            raise ConfigError(f"setting 'es_url': {url.strip()!r} must start with http:// or https://")
    if settings.web_timeout <= settings.es_query_timeout:
        # gunicorn restarts a worker whose request runs past web_timeout: a search waiting on a hung
        # store would be killed with its worker instead of answering "store unavailable"
        raise ConfigError(f"setting 'web_timeout' ({settings.web_timeout:g} s) must be longer than "
                          f"'es_query_timeout' ({settings.es_query_timeout:g} s): a request waiting on a hung "
                          "store would lose its worker before it could answer")
    if es_interval_seconds(settings.es_refresh_interval) is None:
        # a write that must be visible at once refreshes the index itself, and a process reads its own
        # writes; rows one process writes without a refresh reach the others only by the scheduled
        # refresh: with refreshing off ("-1") they never would, and an interval the cluster cannot
        # read fails at the first index creation
        raise ConfigError(f"setting 'es_refresh_interval' is {settings.es_refresh_interval!r}; it must be a positive "
                          "Elasticsearch time such as '1s' or '500ms': rows one process writes reach the others "
                          "only by the scheduled refresh, so with refreshing off ('-1') they never would")


def _validate_s3(settings: Settings) -> None:
    if settings.blob_store != "s3":
        return
    if not _BUCKET.fullmatch(settings.s3_bucket):
        raise ConfigError(f"setting 's3_bucket' is {settings.s3_bucket!r}: a bucket name is 3 to 63 lower-case "
                          "letters, digits, dots and hyphens, starting and ending with a letter or digit")
    if not _S3_PREFIX.fullmatch(settings.s3_prefix):
        raise ConfigError(f"setting 's3_prefix' is {settings.s3_prefix!r}: use segments of letters, digits, "
                          "'.', '_' and '-', each followed by '/' (e.g. 'kbgraph/'), or leave it empty")


def _toml_values(path: Path | None) -> dict[str, Any]:
    if path is None:
        env_path = os.environ.get("KBGRAPH_CONFIG")
        if env_path:
            path = Path(env_path)
            if not path.exists():
                raise ConfigError(f"KBGRAPH_CONFIG points at {path}, which does not exist")
        elif Path("kbgraph.toml").exists():
            path = Path("kbgraph.toml")
        else:
            return {}
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None


def find_data_dir(start: Path | None = None) -> Path:
    """The data folder when no setting names one: the nearest ``.kbgraph`` folder of ``start`` (the
    current directory) and its parents, as git finds its ``.git``, so that a command run from a
    subfolder of a project sees the project's knowledge bases; none: ``./.kbgraph``, made on first use."""
    try:
        here = (start or Path.cwd()).absolute()
    except OSError:  # the current directory was removed
        return Path(DATA_DIR_NAME)
    for folder in (here, *here.parents):
        candidate = folder / DATA_DIR_NAME
        if candidate.is_dir():
            return Path(DATA_DIR_NAME) if start is None and folder == here else candidate
    return Path(DATA_DIR_NAME)


def load_settings(config_file: Path | None = None, **overrides: Any) -> Settings:
    """Build the settings from defaults, the TOML file, the environment, then ``overrides``; a data
    folder none of them names is found from the current directory up (``find_data_dir``)."""
    hints = get_type_hints(Settings)
    known = {f.name for f in fields(Settings)}
    values: dict[str, Any] = {}
    for key, raw in _toml_values(config_file).items():
        if key not in known:
            raise ConfigError(f"unknown setting {key!r} in the config file")
        values[key] = _coerce(key, hints[key], raw)
    for name in known:
        raw = os.environ.get(f"KBGRAPH_{name.upper()}")
        if raw is not None:
            values[name] = _coerce(name, hints[name], raw)
    for key, raw in overrides.items():
        if key not in known:
            raise ConfigError(f"unknown setting {key!r}")
        values[key] = _coerce(key, hints[key], raw)
    if values.get("data_dir") is None:
        values["data_dir"] = find_data_dir()
    settings = Settings(**values)
    _validate(settings)
    return settings


def settings_table() -> list[tuple[str, str, Any]]:
    """(setting, environment variable, default) rows, for the README and `kbgraph config`."""
    return [(f.name, f"KBGRAPH_{f.name.upper()}", f.default) for f in fields(Settings)]


__all__ = ["DATA_DIR_NAME", "find_data_dir", "EMBEDDER_VECTOR_WEIGHT", "ENTITY_TYPES_HELP", "NLP_FALLBACK_TYPE", "ConfigError", "Settings", "load_settings", "settings_table"]
