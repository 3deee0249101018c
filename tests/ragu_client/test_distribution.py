"""``ragu-client`` as a distribution of its own: its wheel builds from ``ragu_client/``, and installed alone into a
fresh venv (no system site packages) it pulls at most 10 packages, none of them part of Ragu's server, and works
there without the repository.

The fresh venv gets ``httpx`` and ``msgspec`` (and theirs) from the package index, as any user would.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
from setuptools import find_packages

REPO = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((REPO / "ragu_client" / "pyproject.toml").read_text("utf-8"))["project"]
SERVER_ONLY = {
    "litestar",
    "onnxruntime",
    "pymupdf",
    "uvicorn",
    "asyncpg",
    "onnx",
    "faiss-cpu",
    "qdrant-client",
    "weaviate-client",
    "cohere",
    "jsonschema",
    "ragu",
    "ragu-schemas",
}
"""Distributions that Ragu's services need and an application that only calls them must not be made to install."""
MOST = 10
"""Distributions the client may bring in, itself included (pip and setuptools, which come with every venv, not)."""
_LEFT_BEHIND = shutil.ignore_patterns("__pycache__", "*.egg-info", "build", "dist")


def _checked(command: list[str | Path], cwd: Path, timeout: float = 300) -> str:
    """Run without the test's PYTHONPATH or venv, so a fresh venv sees only what is installed in it."""
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV"}}
    done = subprocess.run(  # noqa: S603 - our own interpreters
        [str(part) for part in command], cwd=cwd, env=env, capture_output=True, text=True, check=False, timeout=timeout
    )
    assert done.returncode == 0, f"{command}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The client's wheel, built from a copy of its folder so that no build leftovers land in the working tree."""
    root = tmp_path_factory.mktemp("client-wheel")
    shutil.copytree(REPO / "ragu_client", root / "ragu_client", ignore=_LEFT_BEHIND)
    _checked([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", root / "dist", root / "ragu_client"], root)
    (built,) = (root / "dist").glob("*.whl")
    return built


@pytest.fixture(scope="module")
def fresh_venv(tmp_path_factory: pytest.TempPathFactory, wheel: Path) -> Path:
    """A new venv with the client's wheel and nothing else asked for; returns its bin folder."""
    venv = tmp_path_factory.mktemp("fresh-client") / "venv"
    _checked([sys.executable, "-m", "venv", venv], venv.parent)
    _checked([venv / "bin" / "python", "-m", "pip", "install", "-q", wheel], venv.parent)
    return venv / "bin"


def test_the_wheel_ships_the_package_and_requires_httpx_and_msgspec_only(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    shipped = {name for name in members if name.startswith("ragu_client/")}
    sources = {f"ragu_client/{path.name}" for path in (REPO / "ragu_client").glob("*.py")}

    assert shipped == sources | {"ragu_client/py.typed"}
    assert all(members[name] == (REPO / name).read_bytes() for name in shipped)
    metadata = next(content for name, content in members.items() if name.endswith(".dist-info/METADATA")).decode()
    requires = [line.removeprefix("Requires-Dist: ") for line in metadata.splitlines() if "Requires-Dist" in line]
    base = [requirement for requirement in requires if "extra ==" not in requirement]
    assert base == PROJECT["dependencies"] == ["httpx>=0.27", "msgspec>=0.19"]
    # the frameworks only on request (pip install 'ragu-client[langchain]'): tests/ragu_client/test_frameworks.py
    assert sorted(set(requires) - set(base)) == [
        'langchain-core>=1.0; extra == "langchain"',
        'llama-index-core>=0.14; extra == "llama-index"',
    ]


def test_alone_it_pulls_at_most_ten_packages_and_no_part_of_the_server(fresh_venv: Path) -> None:
    listed = json.loads(_checked([fresh_venv / "python", "-m", "pip", "list", "--format=json"], fresh_venv))
    installed = {package["name"].lower().replace("_", "-") for package in listed} - {"pip", "setuptools"}

    assert {"ragu-client", "httpx", "msgspec"} <= installed
    assert len(installed) <= MOST, sorted(installed)
    assert not installed & SERVER_ONLY


def test_alone_it_imports_from_the_venv_not_the_repository(fresh_venv: Path) -> None:
    script = "import ragu_client, ragu_client.models; print(ragu_client.__file__)"
    where = _checked([fresh_venv / "python", "-c", script], fresh_venv)

    assert Path(where.strip()).is_relative_to(fresh_venv.parent)


def test_the_ragu_distribution_leaves_the_client_to_its_own() -> None:
    """Ragu's wheel depends on ``ragu-client`` at the client's version instead of shipping its package."""
    ragu = tomllib.loads((REPO / "pyproject.toml").read_text("utf-8"))
    found = ragu["tool"]["setuptools"]["packages"]["find"]

    packages = find_packages(str(REPO), include=found["include"], exclude=found["exclude"])
    assert "ragu" in packages
    assert not [package for package in packages if package.startswith("ragu_client")]
    assert f"ragu-client=={PROJECT['version']}" in ragu["project"]["dependencies"]
