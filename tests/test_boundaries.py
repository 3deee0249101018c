"""The services meet only through ``schemas`` and the vector store; the kernel depends on neither; and within each of
them no two parts import each other, however indirectly."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from collections import defaultdict
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

FORBIDDEN = {
    "schemas": {"common", "chonkit", "kappi", "ragu"},
    "common": {"chonkit", "kappi", "ragu"},
    "chonkit": {"kappi", "ragu"},
    "kappi": {"chonkit", "ragu"},
    "console": {"chonkit", "kappi", "ragu"},  # the console speaks to the services over HTTP only
    "ragu_client": {"common", "chonkit", "kappi", "ragu", "console", "schemas"},  # httpx and msgspec only
}


SOURCES = ("schemas", "common", "chonkit", "kappi", "ragu", "console", "migrations", "bench")


def _python_files(package: str) -> list[Path]:
    """The package's tracked Python files: what a benchmark downloads into its git-ignored results folder
    (other projects' sources, some not even Python 3) is not ours to check."""
    git = shutil.which("git") or "git"
    listed = subprocess.run(  # noqa: S603 - git from PATH, listing this checkout
        [git, "ls-files", "--cached", "--others", "--exclude-standard", "--", f"{package}/*.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return sorted(ROOT / name for name in listed)


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def _imported_names(path: Path) -> set[str]:
    """:func:`_imports` plus ``package.name`` for every ``from package import name`` (a module, maybe)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found = _imports(path)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


PARTITIONED = ("chonkit", "kappi", "common")
"""Packages whose parts (``chonkit.embedding``, ``kappi.chat``, ``common.vectors``...) must import each other in one
direction only."""


def _part(module: str) -> str:
    """The second-level package (or module) a module is in: ``chonkit.embedding.worker`` → ``chonkit.embedding``."""
    return ".".join(module.split(".")[:2])


def _module(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def part_imports(package: str) -> dict[str, set[str]]:
    """Which parts of ``package`` each part imports, counting every import: at the top, inside a function, under
    ``TYPE_CHECKING``."""
    edges: dict[str, set[str]] = defaultdict(set)
    for path in _python_files(package):
        source = _part(_module(path))
        for name in _imported_names(path):
            target = _part(name)
            if name.split(".")[0] == package and "." in name and source not in {target, package}:
                edges[source].add(target)
    return edges


def cycles(edges: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one node (Tarjan), each sorted: parts that import each other."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in edges.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while (member := stack.pop()) != node:
                group.append(member)
            group.append(node)
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


@pytest.mark.parametrize("package", PARTITIONED)
def test_no_two_parts_of_a_package_import_each_other(package: str) -> None:
    edges = part_imports(package)
    assert cycles(edges) == [], {a: sorted(b) for a, b in edges.items()}


def test_the_cycle_check_sees_a_cycle_through_a_third_part_and_a_type_checking_import(tmp_path: Path) -> None:
    sample = tmp_path / "m.py"
    sample.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from chonkit.collection import x\n")
    assert _imports(sample) == {"typing", "chonkit.collection"}
    edges = {"chonkit.collection": {"chonkit.embedding"}, "chonkit.embedding": {"chonkit.reembedding"}}
    assert cycles(edges) == []
    assert cycles({**edges, "chonkit.reembedding": {"chonkit.collection"}, "chonkit.jobs": {"chonkit.collection"}}) == [
        ["chonkit.collection", "chonkit.embedding", "chonkit.reembedding"]
    ]


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_package_imports_respect_boundaries(package: str) -> None:
    violations = [
        f"{path.relative_to(ROOT)} imports {name}"
        for path in _python_files(package)
        for name in _imports(path)
        if name.split(".")[0] in FORBIDDEN[package]
    ]
    assert not violations


def test_only_common_auth_imports_the_jwt_library() -> None:
    importers = {
        str(path.relative_to(ROOT))
        for package in ("schemas", "common", "chonkit", "kappi", "ragu", "console")
        for path in _python_files(package)
        if any(name.split(".")[0] == "jose" for name in _imports(path))
    }
    assert importers == {"common/auth.py"}


def test_boundary_check_sees_relative_and_nested_imports(tmp_path: Path) -> None:
    sample = tmp_path / "m.py"
    sample.write_text("def f():\n    import kappi.chat\n    from chonkit.document import x\n")
    assert _imports(sample) == {"kappi.chat", "chonkit.document"}


def test_only_kappis_composition_root_imports_the_in_memory_copies() -> None:
    """Searching in memory is kappi's choice: chonkit, the workers and reconcile use the plain pgvector store
    and never hold the change feed's listening connection (a benchmark may measure the copies themselves)."""
    importers = {
        str(path.relative_to(ROOT))
        for package in SOURCES
        if package != "bench"
        for path in _python_files(package)
        if "common.vectors.resident" in _imported_names(path)
    }
    assert importers == {"kappi/app.py"}


def test_the_change_feed_is_heard_only_by_the_in_memory_copies() -> None:
    """The change feed's SQL is shared (collection creation, migration 0006); its listener is the copies' alone."""
    listeners = {
        str(path.relative_to(ROOT))
        for package in SOURCES
        for path in _python_files(package)
        if "common.vectors.changes.ChangeFeed" in _imported_names(path)
    }
    assert listeners == {"common/vectors/resident.py"}


def test_boundary_check_sees_modules_imported_from_their_package(tmp_path: Path) -> None:
    sample = tmp_path / "m.py"
    sample.write_text("from common.vectors import resident\nimport common.vectors.changes\n")
    assert _imported_names(sample) == {"common.vectors", "common.vectors.resident", "common.vectors.changes"}


@pytest.mark.parametrize("service", ["chonkit", "kappi"])
def test_controllers_look_nothing_up_in_the_apps_state(service: str) -> None:
    """Handlers get typed services from the composition root (``<service>/app.py``), never from ``state``."""
    lookups = [
        f"{path.relative_to(ROOT)}:{n}"
        for path in sorted((ROOT / service).glob("*/controller.py"))
        for n, line in enumerate(path.read_text().splitlines(), start=1)
        if "state." in line or "State" in line
    ]
    assert lookups == []


SERVER_NEVER_IMPORTS = ("alembic", "pymupdf", "docx", "markdown_it", "rapidocr", "onnx")
"""What a server process has no use for: migrations run before it serves (and only when asked), parsing runs in
the parse processes, and ``onnx`` only rewrites the local embedder's graph, which is cached
(``common/embedders/local.py``). Each costs every ``ragu serve`` and ``ragu worker`` start a share of a second."""


def test_the_server_imports_neither_the_parsers_nor_alembic_nor_onnx() -> None:
    loaded = subprocess.run(
        [sys.executable, "-c", "import sys, ragu.serve, ragu.worker; print(' '.join(sys.modules))"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert sorted({name.split(".")[0] for name in loaded} & set(SERVER_NEVER_IMPORTS)) == []
