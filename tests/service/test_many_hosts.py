"""Three hosts, one deployment: ``kbgraph-web serve`` (gunicorn) on one host and ``kbgraph-worker`` on
two others. Each host has a folder of its own (data directory, HOME, TMPDIR), its own hostname, and
sees the other hosts' folders as empty read-only directories (tests/support/hosts.py: mount and UTS
namespaces), so nothing on disk is shared and nothing of another host's can be read. They share what
machines share: PostgreSQL (a fresh database), Redis (a fresh prefix), the Elasticsearch node (a
fresh index prefix) and the S3 server (blob_store = "s3", a fresh key prefix); each host calls an
endpoint of its own of the scripted OpenAI-compatible model (embeddings, and the web's chat answers).

Documents are uploaded through the REST API (real HTTP) and parsed on the workers; one worker host is
killed (kill -9 of its whole process group) in the middle of a document. Every document still
finishes, on the other host (the killed task's claim lapses after three beats and the survivor's
sweeper sends it again; task_executor/README.md, "A killed worker"), and the graph (entity and
relation rows, PageRank, communities, reports) equals a clean build of the same files in a fresh
knowledge base. Retrieval and a chat answer come through the API. The uploads exist in S3 only, and
no host's folder holds a copy of one.
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import redis
import requests

from conftest import REDIS_URL, require_service, s3_overrides, scratch_postgres_database, scratch_redis_prefix, \
    store_overrides
from kbgraph.blob import BlobStore, document_key, open_blob_store
from kbgraph.config import Settings, load_settings
from kbgraph.data import SAMPLE_CORPUS_DIR
from kbgraph.graph.invariants import check_graph
from kbgraph.graph.describe import Describer
from kbgraph.meta import FINISHED, MetaDB, Task
from kbgraph.store import DocStore, open_store
from support.deployment import DEPLOYMENT_SHAPE, deployment_shape
from support.graph_phases import assert_same_phases, phases_by_content
from support.graphs import graph_by_names
from support.hosts import Host, HostGroup, unshare_prefix
from support.processes import ServiceProcess, WebServer, Worker
from support.scripted_llm import MODEL, ScriptedLLM
from task_executor.heartbeat import workers_seen
from task_executor.locks import kb_lock_key
from task_executor.tasks import refresh_pending_key

pytestmark = [pytest.mark.services, pytest.mark.slow]

DOCS = ["glass_tower.md", "great_flood_of_varrow.md", "guild_registry.md", "lumen_cartographers_guild.md",
        "mira_castell.md", "order_of_the_tidewardens.md", "salt_war.md", "tobias_wren.txt"]
WORKERS = ["worker-a", "worker-b"]
TENANT = "hosts"
# a killed worker's claims lapse after three beats (3 s), and the survivor's sweeper looks every three
HEARTBEAT = 1.0
# the kill lands on a worker host's this-many-th embeddings request: two chunks a request
# (embedding_batch_size), so its first document's chunks are half embedded, or a later document's
KILL_AT_REQUEST = 3
PARSER_CONFIG = {"chunk_token_num": 128, "graphrag": {"use_graphrag": True, "method": "nlp", "community": True}}


class KillTrap:
    """Armed with the worker hosts' kill switches: the first of them whose model endpoint gets its
    ``nth`` embeddings request is killed before the request is answered (in the middle of its task)."""

    def __init__(self) -> None:
        self.requests: Counter[str] = Counter()
        self.victim: str | None = None
        self.fired = threading.Event()
        self._armed: tuple[int, dict[str, Callable[[], None]]] | None = None
        self._lock = threading.Lock()

    def arm(self, nth: int, kills: dict[str, Callable[[], None]]) -> None:
        with self._lock:
            self.requests.clear()
            self._armed = (nth, kills)

    def embeddings_request(self, host: str) -> None:
        with self._lock:
            self.requests[host] += 1
            if self._armed is None or host not in self._armed[1] or self.requests[host] < self._armed[0]:
                return
            kill, self._armed, self.victim = self._armed[1][host], None, host
        kill()
        self.fired.set()


class HostModel(ScriptedLLM):
    """One host's endpoint of the model: hash embeddings (kbgraph's HashEmbedder, as every endpoint
    gives), each request shown to the trap first; chat answers cite the first excerpt they were given."""

    def __init__(self, host: str, trap: KillTrap) -> None:
        super().__init__(responder=self._answer)
        self.host, self.trap = host, trap

    def embedding_vectors(self, texts: list[str]) -> np.ndarray:
        self.trap.embeddings_request(self.host)
        return super().embedding_vectors(texts)

    @staticmethod
    def _answer(body: dict[str, Any]) -> str:
        markers = re.findall(r"\[ID:(\d+)\]", body["messages"][0]["content"])
        if not markers:
            return "No excerpts were given."
        return f"Mira Castell founded the Lumen Cartographers Guild in Varrow [ID:{markers[0]}]."


# -- the deployment -------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The settings every host has alike: the four shared services, the model's names, short beats."""
    if not os.environ.get("KBGRAPH_ES_URL"):
        require_service("Elasticsearch", "KBGRAPH_ES_URL is not set (bash tests/es_node/es-node.sh start)")
    if unshare_prefix() is None:
        require_service("Linux namespaces", "unshare cannot give a process its own mount and UTS namespaces here")
    with scratch_redis_prefix() as prefix, scratch_postgres_database() as url:
        yield {"database_url": url, "redis_url": REDIS_URL, "redis_prefix": prefix, **store_overrides(),
               **s3_overrides(), "embedding_provider": "openai", "embedding_batch_size": 2,
               "task_heartbeat": HEARTBEAT, "broker_visibility_timeout": 6.0, "graph_refresh_delay": 0.5,
               "llm_max_retries": 1, "web_workers": 2, "web_threads": 4}


@pytest.fixture(scope="module")
def trap() -> KillTrap:
    return KillTrap()


@pytest.fixture(scope="module")
def group(tmp_path_factory: pytest.TempPathFactory) -> HostGroup:
    return HostGroup(tmp_path_factory.mktemp("hosts"), ["web", *WORKERS])


@pytest.fixture(scope="module")
def models(trap: KillTrap) -> Iterator[dict[str, HostModel]]:
    started = {name: HostModel(name, trap).start() for name in ["web", *WORKERS]}
    yield started
    for model in started.values():
        model.stop()


def _settings(host: Host, shared: dict[str, Any], model: HostModel) -> Settings:
    """The host's settings: the shared ones, its folder, its endpoint of the model. Only the web host
    has a chat model: the workers' nlp graph needs none (and so writes what a rebuild without one does)."""
    own = {"embedding_base_url": model.base_url, "embedding_model": "scripted-embed", "embedding_api_key": "test-key"}
    if host.name == "web":
        own.update(llm_base_url=model.base_url, llm_model=MODEL, llm_api_key="test-key")
    settings = load_settings(data_dir=host.data_dir, **shared, **own)
    assert deployment_shape(settings) == DEPLOYMENT_SHAPE  # what docker/compose.yaml runs too
    return settings


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("logs")  # written by this process, outside every host's folder


@pytest.fixture(scope="module")
def web(group: HostGroup, shared: dict[str, Any], models: dict[str, HostModel], logs: Path) -> Iterator[WebServer]:
    host = group["web"]
    server = host.run(WebServer(_settings(host, shared, models["web"]), logs / "web.log"))
    with server:
        yield server


def _worker(group: HostGroup, name: str, shared: dict[str, Any], models: dict[str, HostModel], logs: Path) -> Worker:
    host = group[name]
    return host.run(Worker(_settings(host, shared, models[name]), logs / f"{name}.log", concurrency=1))


@pytest.fixture(scope="module")
def workers(web: WebServer, group: HostGroup, shared: dict[str, Any], models: dict[str, HostModel],
            logs: Path) -> Iterator[dict[str, Worker]]:
    running = {name: _worker(group, name, shared, models, logs).start() for name in WORKERS}
    yield running
    for worker in running.values():
        worker.stop()


@pytest.fixture(scope="module")
def operator(tmp_path_factory: pytest.TempPathFactory, shared: dict[str, Any]) -> Settings:
    """What this test reads the shared services with (a folder of its own, never a host's)."""
    return load_settings(data_dir=tmp_path_factory.mktemp("operator"), **shared)


@pytest.fixture(scope="module")
def meta(operator: Settings, web: WebServer) -> Iterator[MetaDB]:
    with MetaDB.open(operator.meta_url) as db:  # the schema is the web server's migrations'
        yield db


@pytest.fixture(scope="module")
def store(operator: Settings) -> Iterator[DocStore]:
    opened = open_store(operator)
    yield opened
    opened.drop_index(TENANT)
    opened.close()


@pytest.fixture(scope="module")
def blobs(operator: Settings) -> Iterator[BlobStore]:
    opened = open_blob_store(operator)
    yield opened
    opened.delete_prefix("")
    opened.close()


@pytest.fixture(scope="module")
def key(meta: MetaDB) -> str:
    meta.ensure_tenant(TENANT)
    return meta.create_api_key(TENANT)[1]


# -- the REST API -----------------------------------------------------------------------------------

def _ok(web: WebServer, key: str, method: str, path: str, **kwargs: Any) -> Any:
    answer = requests.request(method, web.url + "/api/v1" + path, headers={"Authorization": f"Bearer {key}"},
                              timeout=60, **kwargs)
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["code"] == 0, body
    return body.get("data")


def _upload(web: WebServer, key: str, name: str) -> tuple[str, dict[str, str]]:
    """A dataset with the graph on (nlp) holding DOCS: its id and {document id: file name}."""
    ds = _ok(web, key, "POST", "/datasets", json={"name": name, "parser_config": PARSER_CONFIG})["id"]
    files = [("file", (n, (SAMPLE_CORPUS_DIR / n).read_bytes())) for n in DOCS]
    docs = _ok(web, key, "POST", f"/datasets/{ds}/documents", files=files)
    return ds, {d["id"]: d["name"] for d in docs}


def _parse(web: WebServer, key: str, ds: str, names: dict[str, str]) -> None:
    _ok(web, key, "POST", f"/datasets/{ds}/chunks", json={"document_ids": list(names)})


def _wait(check: Callable[[], Any], timeout: float, what: Callable[[], str]) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := check():
            return value
        time.sleep(0.25)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what()}")


def _parsed(web: WebServer, key: str, ds: str, workers: list[Worker], timeout: float) -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []

    def finished() -> list[dict[str, Any]] | None:
        assert web.alive() and all(w.alive() for w in workers), "\n\n".join(p.output() for p in [web, *workers])
        docs[:] = _ok(web, key, "GET", f"/datasets/{ds}/documents?page_size=100")["docs"]
        return docs if all(d["run"] in ("DONE", "FAIL", "CANCEL") for d in docs) else None

    def waiting() -> str:
        rows = [f"  {d['name']}: {d['run']} {d['progress_msg'][-200:]!r}" for d in docs if d["run"] != "DONE"]
        return "the documents to be parsed:\n" + "\n".join(rows) + "\n\n" + "\n\n".join(w.output() for w in workers)

    _wait(finished, timeout, waiting)
    assert all(d["run"] == "DONE" and d["chunk_count"] > 0 for d in docs), docs
    return docs


def _settled(meta: MetaDB, settings: Settings, kb_id: str) -> bool:
    """Every task of the knowledge base finished, no graph refresh waiting and nobody holding its lock."""
    client = redis.Redis.from_url(settings.redis_url)
    try:
        return (all(t.status in FINISHED for t in meta.list_tasks(kb_id))
                and not client.exists(refresh_pending_key(settings.redis_prefix, kb_id))
                and not client.exists(kb_lock_key(settings.redis_prefix, kb_id)))
    finally:
        client.close()


def _wait_settled(meta: MetaDB, settings: Settings, kb_id: str, workers: list[Worker]) -> None:
    # the debounced refresh runs after the last document: settled twice, a beat apart, is done
    _wait(lambda: _settled(meta, settings, kb_id) and not time.sleep(HEARTBEAT) and _settled(meta, settings, kb_id),
          120, lambda: "the graph refresh:\n" + "\n\n".join(w.output() for w in workers))


# -- what the drill checks ----------------------------------------------------------------------------

def _ready(web: WebServer, operator: Settings, hosts: set[str]) -> dict[str, Any]:
    """/ready once exactly ``hosts`` beat (a killed host drops out three beats after its last)."""
    client = redis.Redis.from_url(operator.redis_url)
    try:
        _wait(lambda: {m.split(":")[0] for m in workers_seen(client, operator)} == hosts, 60,
              lambda: f"the beats of {sorted(hosts)} only (seen: {workers_seen(client, operator)})")
    finally:
        client.close()
    answer = requests.get(web.url + "/ready", timeout=30)
    assert answer.status_code == 200, answer.text
    checks = answer.json()["checks"]
    assert set(checks) == {"meta", "redis", "store", "blob_store", "workers"}, checks
    assert checks["workers"].startswith(f"ok: {len(hosts)} worker(s)"), checks
    return checks


def _wait_for_the_kill(web: WebServer, key: str, ds: str, trap: KillTrap, workers: list[Worker]) -> None:
    """Until the trap fired; a document that failed or finished first is the answer instead."""
    deadline = time.monotonic() + 120
    while not trap.fired.wait(0.5):
        docs = _ok(web, key, "GET", f"/datasets/{ds}/documents?page_size=100")["docs"]
        over = [f"{d['name']}: {d['run']} {d['progress_msg'][-300:]!r}" for d in docs if d["run"] in ("FAIL", "DONE")]
        assert not any(d["run"] == "FAIL" for d in docs), "documents failed before the kill:\n" + "\n".join(over)
        assert time.monotonic() < deadline, "no worker host reached the trap:\n" + "\n\n".join(
            [*over, *(w.output() for w in workers)])


def _killed_mid_task(meta: MetaDB, ds: str) -> list[Task]:
    """At the kill: the dataset's unfinished parsing tasks, one of them running (the killed one's)."""
    unfinished = [t for t in meta.list_tasks(ds, kind="index") if t.status not in FINISHED]
    assert any(t.status == "running" for t in unfinished), unfinished
    return unfinished


def _comparable(store: DocStore, operator: Settings, ds: str, names: dict[str, str]) -> tuple[Any, ...]:
    """The graph by names (document names for ids, description fragments sorted) and its phases."""
    return graph_by_names(operator, TENANT, ds, names), phases_by_content(store, TENANT, ds)


def _stored_copies(host: Host, uploads: dict[str, bytes]) -> list[str]:
    """Files in the host's folder whose bytes are an upload's."""
    digests = {hashlib.sha256(data).hexdigest(): name for name, data in uploads.items()}
    return [f"{path} = {digests[d]}" for path in host.root.rglob("*")
            if path.is_file() and (d := hashlib.sha256(path.read_bytes()).hexdigest()) in digests]


def _check_isolation(group: HostGroup, services: dict[str, ServiceProcess], blobs: BlobStore,
                     datasets: dict[str, dict[str, str]]) -> None:
    # every running host sees its own folder, and the others' empty
    for name, service in services.items():
        host = group[name]
        assert host.sees(service.pid, host.root) == ["data", "home", "tmp"]
        assert all(host.sees(service.pid, other) == [] for other in host.others), name
    # the web server's request metrics are its own processes' (named after its main process)
    assert sorted(p.name for p in (group["web"].data_dir / "metrics").iterdir()) == [f"web-{services['web'].pid}"]
    # the uploads are in S3, under exactly the documents' keys, and no host keeps a copy of one
    keys = sorted(i.key for i in blobs.list(""))
    assert keys == sorted(document_key(ds, doc) for ds, names in datasets.items() for doc in names)
    uploads = {n: (SAMPLE_CORPUS_DIR / n).read_bytes() for n in DOCS}
    for host in group.hosts.values():
        assert _stored_copies(host, uploads) == [], host.name
        assert not (host.data_dir / "uploads").exists(), host.name
        # the metadata database is PostgreSQL, the document store Elasticsearch: no SQLite of either
        assert not any(host.data_dir.rglob("meta.db")) and not any(host.data_dir.rglob("store.db")), host.name


def test_three_hosts_share_only_their_services(web: WebServer, workers: dict[str, Worker], group: HostGroup,
                                               shared: dict[str, Any], models: dict[str, HostModel], logs: Path,
                                               operator: Settings, meta: MetaDB, store: DocStore,
                                               blobs: BlobStore, key: str, trap: KillTrap) -> None:
    _ready(web, operator, set(WORKERS))  # each worker host beats under its own hostname

    crashed, crashed_names = _upload(web, key, f"crashed {uuid.uuid4().hex[:6]}")
    assert sorted(i.key for i in blobs.list("")) == sorted(document_key(crashed, d) for d in crashed_names)
    trap.arm(KILL_AT_REQUEST, {name: worker.kill9 for name, worker in workers.items()})
    _parse(web, key, crashed, crashed_names)
    _wait_for_the_kill(web, key, crashed, trap, list(workers.values()))
    unfinished = _killed_mid_task(meta, crashed)
    killed = trap.victim
    assert killed is not None
    victim, survivor = workers[killed], next(w for name, w in workers.items() if name != killed)
    assert not victim.alive() and survivor.alive()

    _parsed(web, key, crashed, [survivor], 180)
    _wait_settled(meta, operator, crashed, [survivor])
    _ready(web, operator, set(WORKERS) - {killed})
    tasks = {t.id: t for t in meta.list_tasks(crashed, kind="index")}
    assert all(t.status == "done" for t in tasks.values())
    # the killed host's task was started again once, by the survivor; every other task ran once (the
    # survivor's own task running at the kill too)
    again = [t.id for t in tasks.values() if t.attempts != 1]
    assert len(again) == 1 and tasks[again[0]].attempts == 2, [(t.doc_id, t.attempts) for t in tasks.values()]
    assert again[0] in {t.id for t in unfinished if t.status == "running"}
    assert check_graph(store, TENANT, crashed, Describer(None, operator.summary_max_tokens)) == []

    found = _ok(web, key, "POST", "/retrieval", json={"question": "Who founded the Lumen Cartographers Guild?",
                                                        "dataset_ids": [crashed], "use_kg": True})
    assert {"mira_castell.md", "lumen_cartographers_guild.md"} & {c.get("document_keyword") for c in found["chunks"]}
    _answers_a_question(web, key, crashed)

    # the killed host comes back with its own folder; a fresh knowledge base of the same files is the reference
    workers[killed] = victim = _worker(group, killed, shared, models, logs).start()
    clean, clean_names = _upload(web, key, f"clean {uuid.uuid4().hex[:6]}")
    _parse(web, key, clean, clean_names)
    _parsed(web, key, clean, [victim, survivor], 180)
    _wait_settled(meta, operator, clean, [victim, survivor])
    crashed_graph = _comparable(store, operator, crashed, crashed_names)
    clean_graph = _comparable(store, operator, clean, clean_names)
    assert crashed_graph[0][0] and crashed_graph[1].reports  # entities, and community reports
    assert crashed_graph[0] == clean_graph[0]
    assert_same_phases(crashed_graph[1], clean_graph[1])

    _check_isolation(group, {"web": web, **workers}, blobs, {crashed: crashed_names, clean: clean_names})


def _answers_a_question(web: WebServer, key: str, ds: str) -> None:
    """A chat assistant on the dataset answers, through the web host's model, citing its chunks."""
    chat = _ok(web, key, "POST", "/chats", json={"name": f"asker {uuid.uuid4().hex[:6]}", "dataset_ids": [ds]})
    session = _ok(web, key, "POST", f"/chats/{chat['id']}/sessions", json={"name": "hosts"})
    answer = _ok(web, key, "POST", f"/chats/{chat['id']}/completions", json={
        "question": "Who founded the Lumen Cartographers Guild?", "stream": False, "session_id": session["id"]})
    assert answer["answer"].startswith("Mira Castell founded the Lumen Cartographers Guild"), answer
    cited = answer["reference"]["chunks"]
    assert cited and {c["dataset_id"] for c in cited} == {ds}, cited
