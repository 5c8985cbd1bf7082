"""Elasticsearch indices the tests make are dropped by the fixtures that made them, and a session
that leaves any behind fails.

Every test prefix comes from ``es_prefix`` and starts with this session's own root
(``kbgraph_test_<session>_``), so a check at the end of the session finds exactly what this session
left, even on a node other sessions use at the same time. A prefix made while a fixture is being
set up is dropped (its indices and index templates) when that fixture is finalized; one made in a
test's body, when the test is torn down. At the end, any index or template under the session's
root on a node the session used fails the run (``pytest_sessionfinish``), naming what was left.

Registered with ``pytest_plugins`` in tests/conftest.py.
"""

from __future__ import annotations

import uuid
from collections.abc import Generator
from typing import Any

import pytest
from elasticsearch import Elasticsearch, NotFoundError

SESSION_ROOT = f"kbgraph_test_{uuid.uuid4().hex[:6]}_"

_made: list[tuple[str, str]] = []  # (es_url, prefix), in the order made
_owned: dict[int, list[tuple[str, str]]] = {}  # id(fixturedef) -> the prefixes made in its setup
_urls: set[str] = set()  # every node or cluster this session wrote to


def es_prefix(es_url: str) -> str:
    """A fresh index prefix under this session's root, dropped after whoever asked for it."""
    prefix = f"{SESSION_ROOT}{uuid.uuid4().hex[:8]}_"
    _made.append((es_url, prefix))
    _urls.add(es_url)
    return prefix


def _client(es_url: str) -> Elasticsearch:
    return Elasticsearch([u.strip() for u in es_url.split(",") if u.strip()], request_timeout=60, max_retries=3)


def under(es_url: str, root: str) -> tuple[list[str], list[str]]:
    """(indices, index templates) whose names start with ``root``."""
    client = _client(es_url)
    try:
        indices = sorted(client.indices.get_alias(index=f"{root}*", expand_wildcards="open,closed",
                                                  allow_no_indices=True).body)
        try:
            templates = sorted(t["name"] for t in client.indices.get_index_template(name=f"{root}*")["index_templates"])
        except NotFoundError:
            templates = []
        return indices, templates
    finally:
        client.close()


def drop_prefix(es_url: str, prefix: str) -> None:
    """Delete every index and index template under ``prefix`` (named one by one: clusters refuse
    wildcard deletes by default)."""
    indices, templates = under(es_url, prefix)
    client = _client(es_url)
    try:
        for start in range(0, len(indices), 50):
            client.options(ignore_status=404).indices.delete(index=",".join(indices[start:start + 50]))
        for name in templates:
            client.options(ignore_status=404).indices.delete_index_template(name=name)
    finally:
        client.close()


def _drop_made_since(mark: int) -> None:
    made = _made[mark:]
    del _made[mark:]
    for es_url, prefix in made:
        drop_prefix(es_url, prefix)


@pytest.hookimpl(hookwrapper=True)
def pytest_fixture_setup(fixturedef: pytest.FixtureDef[Any], request: pytest.FixtureRequest) -> Generator[None]:
    mark = len(_made)
    yield
    made = _made[mark:]
    del _made[mark:]
    if made:
        _owned.setdefault(id(fixturedef), []).extend(made)


def pytest_fixture_post_finalizer(fixturedef: pytest.FixtureDef[Any], request: pytest.FixtureRequest) -> None:
    for es_url, prefix in _owned.pop(id(fixturedef), []):
        drop_prefix(es_url, prefix)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None]:
    mark = len(_made)
    yield
    _drop_made_since(mark)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    left: list[str] = []
    for es_url in sorted(_urls):
        try:
            indices, templates = under(es_url, SESSION_ROOT)
        except Exception:  # a cluster the session started and stopped: nothing can be left there
            continue
        left += [f"index {name} on {es_url}" for name in indices]
        left += [f"index template {name} on {es_url}" for name in templates]
    if left:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        message = f"this test session left {len(left)} Elasticsearch indices/templates behind: " + "; ".join(left[:20])
        if reporter is not None:
            reporter.write_line(message, red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
