"""``ragu-schemas`` as a distribution of its own: both wheels build from this repository, and the contract's
wheel, installed alone into a fresh venv, brings no part of Ragu yet judges the golden records exactly as
``ragu schemas validate`` does.

The fresh venv gets ``jsonschema`` and ``msgspec`` (and theirs) from the package index, as any user would.
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
from typing import Any

import pytest

from schemas import SCHEMA_NAMES

REPO = Path(__file__).resolve().parents[2]
GOLDEN = Path(__file__).parent / "golden"
VERSION = tomllib.loads((REPO / "schemas" / "pyproject.toml").read_text("utf-8"))["project"]["version"]
RAGU_ONLY = {
    "litestar",
    "uvicorn",
    "asyncpg",
    "onnxruntime",
    "onnx",
    "pymupdf",
    "faiss-cpu",
    "qdrant-client",
    "weaviate-client",
    "cohere",
    "ragu",
}
"""Distributions that Ragu needs and an application that only checks records must not be made to install."""

_LEFT_BEHIND = shutil.ignore_patterns("__pycache__", "*.egg-info", "build", "dist", "results")
"""Build output, and the benchmarks' git-ignored results (their corpus cache holds dangling links)."""


def _run(command: list[str | Path], cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run without the test's PYTHONPATH or venv, so a fresh venv sees only what is installed in it."""
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV"}}
    return subprocess.run(  # noqa: S603 - our own interpreters and scripts
        [str(part) for part in command], cwd=cwd, env=env, capture_output=True, text=True, check=False, timeout=timeout
    )


def _checked(command: list[str | Path], cwd: Path, timeout: float = 120) -> str:
    done = _run(command, cwd, timeout)
    assert done.returncode == 0, f"{command}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Both wheels, built from copies of the tree so that no build leftovers land in the working tree."""
    root = tmp_path_factory.mktemp("wheels")
    ragu = root / "ragu"
    ragu.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, ragu / name)
    for package in REPO.iterdir():  # every import package, schemas/ included: the ragu wheel must leave it out
        if (package / "__init__.py").is_file():
            shutil.copytree(package, ragu / package.name, ignore=_LEFT_BEHIND)
    dist = root / "dist"
    _checked([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", dist, ragu / "schemas", ragu], root, 300)
    built = {path.name.split("-")[0]: path for path in dist.glob("*.whl")}
    assert set(built) == {"ragu", "ragu_schemas"}
    return built


@pytest.fixture(scope="module")
def fresh_venv(tmp_path_factory: pytest.TempPathFactory, wheels: dict[str, Path]) -> Path:
    """A new venv with the ragu-schemas wheel and nothing else asked for; returns its bin folder."""
    venv = tmp_path_factory.mktemp("fresh") / "venv"
    _checked([sys.executable, "-m", "venv", venv], venv.parent)
    bin_ = venv / "bin"
    _checked([bin_ / "python", "-m", "pip", "install", "-q", wheels["ragu_schemas"]], venv.parent, 300)
    return bin_


def _members(wheel: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(wheel) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def _requires(members: dict[str, bytes]) -> list[str]:
    metadata = next(content for name, content in members.items() if name.endswith(".dist-info/METADATA"))
    return [line.removeprefix("Requires-Dist: ") for line in metadata.decode().splitlines() if "Requires-Dist" in line]


def test_the_contract_wheel_ships_the_repositorys_files_byte_for_byte(wheels: dict[str, Path]) -> None:
    members = _members(wheels["ragu_schemas"])
    shipped = {name: content for name, content in members.items() if name.startswith("schemas/")}

    assert {f"schemas/{name}.schema.json" for name in SCHEMA_NAMES} <= set(shipped)
    assert {"schemas/models.py", "schemas/cli.py", "schemas/py.typed"} <= set(shipped)
    assert {name: (REPO / name).read_bytes() for name in shipped} == shipped
    assert _requires(members) == ["jsonschema>=4.23", "msgspec>=0.19"]
    assert "ragu-schemas = schemas.cli:main" in members[f"ragu_schemas-{VERSION}.dist-info/entry_points.txt"].decode()


def test_the_ragu_wheel_depends_on_the_contract_instead_of_shipping_it(wheels: dict[str, Path]) -> None:
    members = _members(wheels["ragu"])

    assert not [name for name in members if name.startswith("schemas/")]
    assert f"ragu-schemas=={VERSION}" in _requires(members)


def test_alone_it_installs_no_part_of_ragu(fresh_venv: Path) -> None:
    listed = json.loads(_checked([fresh_venv / "python", "-m", "pip", "list", "--format=json"], fresh_venv))
    installed = {package["name"].lower().replace("_", "-") for package in listed}

    assert {"ragu-schemas", "jsonschema", "msgspec"} <= installed
    assert not installed & RAGU_ONLY
    where = _checked([fresh_venv / "python", "-c", "import schemas; print(schemas.__file__)"], fresh_venv)
    assert Path(where.strip()).is_relative_to(fresh_venv.parent)


@pytest.mark.parametrize("name", SCHEMA_NAMES)
def test_its_command_agrees_with_ragu_schemas_validate_on_the_golden_files(
    fresh_venv: Path, name: str, tmp_path: Path
) -> None:
    cases: list[dict[str, Any]] = json.loads((GOLDEN / f"{name}.json").read_text("utf-8"))
    files = []
    for index, case in enumerate(cases):  # one JSON Lines record each, so an array case stays one document
        files.append(f"case-{index:02}.jsonl")
        (tmp_path / files[-1]).write_text(json.dumps(case["data"]), encoding="utf-8")
    files.append(str(GOLDEN / f"{name}.json"))  # the file itself: a list of case wrappers, none of them valid

    alone = _run([fresh_venv / "ragu-schemas", "validate", name, *files], tmp_path)
    ragu = _run([Path(sys.executable).parent / "ragu", "schemas", "validate", name, *files], tmp_path)

    assert (alone.returncode, alone.stdout, alone.stderr) == (ragu.returncode, ragu.stdout, ragu.stderr)
    assert alone.returncode == 1
    ok = {line.removesuffix(": ok") for line in alone.stdout.splitlines() if line.endswith(": ok")}
    assert ok == {file for file, case in zip(files, cases, strict=False) if case["valid"]}


def test_its_list_names_the_same_ids(fresh_venv: Path, tmp_path: Path) -> None:
    alone = _checked([fresh_venv / "ragu-schemas", "list"], tmp_path)

    assert alone == _checked([Path(sys.executable).parent / "ragu", "schemas", "list"], tmp_path)
    assert [line.split()[1] for line in alone.splitlines()] == [
        f"https://ragu.dev/schemas/{name}.schema.json" for name in SCHEMA_NAMES
    ]


def test_its_usage_names_the_command_a_user_typed(fresh_venv: Path, tmp_path: Path) -> None:
    assert _checked([fresh_venv / "ragu-schemas", "--help"], tmp_path).startswith("usage: ragu-schemas ")
