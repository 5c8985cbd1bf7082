"""docker/compose.yaml, checked without a Docker engine: it is read as Compose reads it (YAML with
anchors, then ``${VAR...}`` interpolated from docker/.env.example) and must run the shape of the
many-hosts test (tests/service/test_many_hosts.py): Elasticsearch, PostgreSQL, Redis and an S3 server,
web and a scalable worker that share no volume and whose every KBGRAPH_* variable is a setting kbgraph
accepts, pointing at those services by their names. Images are pinned, every service has a
healthcheck, and the image (docker/Dockerfile) has what those settings need."""

from __future__ import annotations

import ast
import importlib
import json
import os
import re
import tomllib
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from kbgraph.config import Settings, load_settings
from support.deployment import DEPLOYMENT_SHAPE, deployment_shape

ROOT = Path(__file__).resolve().parents[2]
DOCKER = ROOT / "docker"
KBGRAPH_SERVICES = ("web", "worker", "mcp")
BACKING_SERVICES = {"store": "elasticsearch", "metadata": "postgres", "queue": "redis", "blob_store": "s3"}

# Compose's interpolation: $$ is a dollar sign; ${NAME}, ${NAME:-default}, ${NAME-default},
# ${NAME:?error}, ${NAME?error}, ${NAME:+other}, ${NAME+other}; $NAME
_VARIABLE = re.compile(r"\$(?:(?P<dollar>\$)|\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?[-?+])(?P<arg>[^}]*))?\}"
                       r"|(?P<bare>[A-Za-z_][A-Za-z0-9_]*))")


class MissingVariable(ValueError):
    pass


def interpolate(text: str, env: dict[str, str]) -> str:
    def one(match: re.Match[str]) -> str:
        if match["dollar"]:
            return "$"
        name = match["name"] or match["bare"]
        op, arg, value = match["op"], match["arg"], env.get(name)
        unset_or_empty = value is None or (value == "" and op is not None and op.startswith(":"))
        if op in (":-", "-"):
            return arg if unset_or_empty else value or ""
        if op in (":?", "?"):
            if unset_or_empty:
                raise MissingVariable(f"{name}: {arg}")
            return value or ""
        if op in (":+", "+"):
            return "" if unset_or_empty else arg
        return value or ""

    return _VARIABLE.sub(one, text)


def _interpolated(node: Any, env: dict[str, str]) -> Any:
    if isinstance(node, str):
        return interpolate(node, env)
    if isinstance(node, dict):
        return {key: _interpolated(value, env) for key, value in node.items()}
    if isinstance(node, list):
        return [_interpolated(value, env) for value in node]
    return node


def env_file(path: Path) -> dict[str, str]:
    values = {}
    for line in path.read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            name, _, value = line.partition("=")
            values[name.strip()] = value.strip()
    return values


@pytest.fixture(scope="module")
def example_env() -> dict[str, str]:
    return env_file(DOCKER / ".env.example")


@pytest.fixture(scope="module")
def compose(example_env: dict[str, str]) -> dict[str, Any]:
    """compose.yaml as Compose runs it with the example .env."""
    return _interpolated(yaml.safe_load((DOCKER / "compose.yaml").read_text()), example_env)


def _environment(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):  # the NAME=value list form
        env = dict(item.partition("=")[::2] for item in env)
    return {key: "" if value is None else str(value) for key, value in env.items()}


def _named_volumes(compose: dict[str, Any], service: str) -> set[str]:
    named = set(compose.get("volumes") or {})
    found = set()
    for mount in compose["services"][service].get("volumes") or []:
        source = mount.split(":")[0] if isinstance(mount, str) else mount.get("source", "")
        if source in named:
            found.add(source)
        else:  # a host folder would be a disk shared with whatever else mounts it
            assert not source.startswith((".", "/", "~")), f"{service} mounts the host folder {source}"
    return found


def _kbgraph_settings(compose: dict[str, Any], service: str, monkeypatch: pytest.MonkeyPatch,
                      tmp_path: Path) -> Settings:
    """What kbgraph's load_settings makes of the service's environment (nothing else set)."""
    for name in [n for n in os.environ if n.startswith("KBGRAPH_")]:
        monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)  # no kbgraph.toml
    env = _environment(compose["services"][service])
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return load_settings()


def test_interpolation_reads_compose_syntax() -> None:
    env = {"SET": "x", "EMPTY": ""}
    assert interpolate("$${SET} ${SET} $SET ${UNSET:-d} ${EMPTY:-d} ${EMPTY-d} ${SET:+alt} ${UNSET:+alt}", env) == \
        "${SET} x x d d  alt "
    with pytest.raises(MissingVariable, match="EMPTY: say"):
        interpolate("${EMPTY:?say}", env)


def test_every_variable_it_needs_is_in_the_example_env(example_env: dict[str, str]) -> None:
    raw = (DOCKER / "compose.yaml").read_text()
    required = set(re.findall(r"\$\{([A-Za-z_][A-Za-z0-9_]*):?\?", raw))
    assert required and required <= {name for name, value in example_env.items() if value}
    # the PostgreSQL password goes into the database URL as it is
    assert re.fullmatch(r"[A-Za-z0-9_-]+", example_env["POSTGRES_PASSWORD"])


def test_it_runs_the_four_services_web_worker_and_mcp(compose: dict[str, Any]) -> None:
    assert set(compose["services"]) == {*BACKING_SERVICES.values(), *KBGRAPH_SERVICES}
    web, worker, mcp = (compose["services"][name] for name in KBGRAPH_SERVICES)
    # `kbgraph-web serve` runs the migrations once, before gunicorn forks its workers
    assert web["command"][:2] == ["kbgraph-web", "serve"]
    assert worker["command"][0] == "kbgraph-worker"
    # MCP over HTTP on every interface of its container, on the port it publishes
    assert mcp["command"][:3] == ["kbgraph", "mcp", "--http"] and "0.0.0.0" in mcp["command"]
    port = mcp["command"][mcp["command"].index("--port") + 1]
    assert any(str(mapping).endswith(f":{port}") for mapping in mcp["ports"])
    for service in (web, worker):
        assert {name for name, when in service["depends_on"].items() if when["condition"] == "service_healthy"} \
            == set(BACKING_SERVICES.values())
    # and after the schema migrations web runs at its start
    assert {name for name, when in mcp["depends_on"].items() if when["condition"] == "service_healthy"} \
        == {*BACKING_SERVICES.values(), "web"}


def test_web_and_worker_share_no_volume(compose: dict[str, Any]) -> None:
    mounted = {name: _named_volumes(compose, name) for name in compose["services"]}
    assert not mounted["web"] & mounted["worker"]
    # the worker scales (--scale worker=N): a named volume of its would be shared by its replicas
    assert mounted["worker"] == set()
    # and no two services share one
    every = [volume for volumes in mounted.values() for volume in volumes]
    assert len(every) == len(set(every)), mounted


@pytest.mark.parametrize("service", KBGRAPH_SERVICES)
def test_every_kbgraph_variable_is_a_setting_kbgraph_accepts(compose: dict[str, Any], service: str,
                                                             monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    known = {f"KBGRAPH_{name.upper()}" for name in Settings.__dataclass_fields__}
    env = _environment(compose["services"][service])
    assert {name for name in env if name.startswith("KBGRAPH_")} <= known
    settings = _kbgraph_settings(compose, service, monkeypatch, tmp_path)
    assert deployment_shape(settings) == DEPLOYMENT_SHAPE  # the many-hosts test's shape
    # every shared service is reached by its compose name, on the port it listens on
    addresses = {"store": settings.es_url, "metadata": settings.database_url, "queue": settings.redis_url,
                 "blob_store": settings.s3_endpoint_url}
    ports = {"store": 9200, "metadata": 5432, "queue": 6379, "blob_store": 8333}
    for role, url in addresses.items():
        parts = urlsplit(url)
        assert (parts.hostname, parts.port) == (BACKING_SERVICES[role], ports[role]), (role, url)


def test_web_worker_and_mcp_are_configured_alike(compose: dict[str, Any]) -> None:
    web = _environment(compose["services"]["web"])
    assert web == _environment(compose["services"]["worker"]) == _environment(compose["services"]["mcp"])


def test_the_backing_services_know_the_credentials_kbgraph_uses(compose: dict[str, Any], tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    settings = _kbgraph_settings(compose, "web", monkeypatch, tmp_path)
    database = urlsplit(settings.database_url)
    postgres = _environment(compose["services"]["postgres"])
    assert (database.username, database.password, database.path.lstrip("/")) == (
        postgres["POSTGRES_USER"], postgres["POSTGRES_PASSWORD"], postgres["POSTGRES_DB"])
    assert settings.es_password == _environment(compose["services"]["elasticsearch"])["ELASTIC_PASSWORD"]
    s3 = compose["services"]["s3"]
    assert s3["command"][:2] == ["server", "-s3"] and "-s3.port=8333" in s3["command"]
    target = next(c["target"] for c in s3["configs"])
    assert f"-s3.config={target}" in s3["command"]
    identities = json.loads(compose["configs"][s3["configs"][0]["source"]]["content"])["identities"]
    credentials = {(c["accessKey"], c["secretKey"]) for i in identities for c in i["credentials"]}
    assert credentials == {(settings.s3_access_key_id, settings.s3_secret_access_key)}


def test_images_are_pinned(compose: dict[str, Any]) -> None:
    for name, service in compose["services"].items():
        if "build" in service:
            continue  # built here from this checkout
        image = service["image"]
        tag = image.rsplit(":", 1)[1] if ":" in image.rsplit("/", 1)[-1] else ""
        assert re.match(r"\d+\.\d+", tag), f"{name}: {image} is not pinned to a version"


def _check_python_snippet(code: str) -> None:
    """A ``python -c`` healthcheck: valid Python whose imports exist in this tree."""
    tree = ast.parse(code)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                importlib.import_module(alias.name)
        elif isinstance(node, ast.ImportFrom) and node.module:
            module = importlib.import_module(node.module)
            for alias in node.names:
                assert hasattr(module, alias.name), f"{node.module} has no {alias.name}"


def test_every_service_has_a_healthcheck(compose: dict[str, Any]) -> None:
    for name, service in compose["services"].items():
        test = service["healthcheck"]["test"]
        assert test[0] in ("CMD", "CMD-SHELL"), name
        if test[:3] == ["CMD", "python", "-c"]:
            _check_python_snippet(test[3])
    web_check = compose["services"]["web"]["healthcheck"]["test"]
    assert "http://127.0.0.1:9380/ready" in " ".join(web_check)


def test_the_image_has_what_these_settings_need() -> None:
    dockerfile = (DOCKER / "Dockerfile").read_text()
    # PostgreSQL's driver is the postgres extra; the image installs it
    assert re.search(r'pip install "\.\[postgres\]"', dockerfile)
    # the worker keeps its caches in the anonymous volume the image declares (no named one: it scales)
    assert 'VOLUME ["/data"]' in dockerfile and "KBGRAPH_DATA_DIR=/data" in dockerfile
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    needs = {re.split(r"[<>=\[; ]", d)[0].lower() for d in project["dependencies"]}
    assert {"boto3", "alembic", "redis", "celery", "elasticsearch", "gunicorn"} <= needs
    assert any(d.startswith("psycopg") for d in project["optional-dependencies"]["postgres"])


def test_elasticsearch_answers_the_same_question_the_same_way_every_time(compose: dict[str, Any]) -> None:
    # kNN searches walk a shard's segments one after the other, as the test nodes do
    # (tests/integration/test_es_node.py; docs/cluster.md, "The same answer every time")
    assert compose["services"]["elasticsearch"]["environment"]["search.worker_threads_enabled"] == "false"
