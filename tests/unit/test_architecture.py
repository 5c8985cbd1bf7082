"""The shape of the code: layers, no import cycles, no oversized modules (docs/architecture.md).

The layer rules live in pyproject.toml ([tool.importlinter]) and are checked by import-linter;
the cycle and size rules are checked here on grimp's import graph (import-linter's own graph)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("kbgraph", "web", "task_executor")
# a module past this many lines holds more than one concern (the house rule is ~450, at most 600)
MAX_LINES = 600


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    # the package's own code, even when the tests run from a worktree beside an editable install
    sys.path.insert(0, str(ROOT))
    try:
        return grimp.build_graph(*PACKAGES, cache_dir=None)
    finally:
        sys.path.remove(str(ROOT))


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child)))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_two_modules_import_each_other_even_through_others(graph: grimp.ImportGraph):
    assert _cycles(graph) == []


def test_no_module_imports_the_package_that_holds_it(graph: grimp.ImportGraph):
    upward = sorted((module, imported) for module in graph.modules
                    for imported in graph.find_modules_directly_imported_by(module)
                    if module.startswith(imported + "."))
    assert upward == []


def test_the_layers_and_forbidden_imports_of_pyproject_hold():
    answer = subprocess.run([str(Path(sys.executable).parent / "lint-imports"), "--no-cache", "pyproject.toml"],
                            cwd=ROOT, capture_output=True, text=True, env={"PYTHONPATH": str(ROOT), "PATH": ""})
    assert answer.returncode == 0, answer.stdout[-4000:] + answer.stderr[-2000:]
    assert "0 broken" in answer.stdout


def test_no_module_is_over_the_size_of_one_concern():
    sizes = {str(path.relative_to(ROOT)): sum(1 for _ in path.open(encoding="utf-8"))
             for package in PACKAGES for path in (ROOT / package).rglob("*.py")}
    assert {path: lines for path, lines in sizes.items() if lines > MAX_LINES} == {}


def test_the_cycle_finder_finds_a_cycle():
    planted = grimp.ImportGraph()
    for module in ("a", "a.one", "a.two", "a.three"):
        planted.add_module(module)
    planted.add_import(importer="a.one", imported="a.two")
    planted.add_import(importer="a.two", imported="a.three")
    planted.add_import(importer="a.three", imported="a.one")
    assert _cycles(planted) == [["a.one", "a.three", "a.two"]]


def test_docs_architecture_names_every_module_of_the_library():
    doc = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    unnamed = [str(path.relative_to(ROOT)) for path in sorted((ROOT / "kbgraph").rglob("*.py"))
               if path.name not in ("__init__.py", "__main__.py") and path.name not in doc]
    assert unnamed == []
