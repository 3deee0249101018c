"""The services meet only through ``schemas`` and the vector store; the kernel depends on neither."""

from __future__ import annotations

import ast
import shutil
import subprocess
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
    and never hold the change feed's listening connection."""
    importers = {
        str(path.relative_to(ROOT))
        for package in SOURCES
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
