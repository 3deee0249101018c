"""The services meet only through ``schemas`` and the vector store; the kernel depends on neither."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

FORBIDDEN = {
    "schemas": {"common", "chonkit", "kappi", "ragu"},
    "common": {"chonkit", "kappi", "ragu"},
    "chonkit": {"kappi", "ragu"},
    "kappi": {"chonkit", "ragu"},
    "console": {"chonkit", "kappi", "ragu"},  # the console speaks to the services over HTTP only
}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_package_imports_respect_boundaries(package: str) -> None:
    violations = [
        f"{path.relative_to(ROOT)} imports {name}"
        for path in sorted((ROOT / package).rglob("*.py"))
        for name in _imports(path)
        if name.split(".")[0] in FORBIDDEN[package]
    ]
    assert not violations


def test_only_common_auth_imports_the_jwt_library() -> None:
    importers = {
        str(path.relative_to(ROOT))
        for package in ("schemas", "common", "chonkit", "kappi", "ragu", "console")
        for path in (ROOT / package).rglob("*.py")
        if any(name.split(".")[0] == "jose" for name in _imports(path))
    }
    assert importers == {"common/auth.py"}


def test_boundary_check_sees_relative_and_nested_imports(tmp_path: Path) -> None:
    sample = tmp_path / "m.py"
    sample.write_text("def f():\n    import kappi.chat\n    from chonkit.document import x\n")
    assert _imports(sample) == {"kappi.chat", "chonkit.document"}
