"""The ``ragu`` command as a user runs it: ``ragu token``'s secret and groups, and the help text."""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from common.auth import Authenticator, dev_secret
from common.config import load_settings
from ragu.cli import build_parser

REPO = Path(__file__).resolve().parents[2]


def _ragu(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "ragu.cli", *args]
    return subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True, check=False)  # noqa: S603


@pytest.fixture
def env() -> dict[str, str]:
    """The test's environment without Ragu settings, able to import ragu from any folder."""
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("RAGU_") and k != "DATABASE_URL"}
    return {**inherited, "PYTHONPATH": str(REPO)}


@pytest.fixture
def served_data_dir(tmp_path: Path) -> Path:
    """A data directory holding the signing secret, as ``ragu serve`` leaves it after its first start."""
    data_dir = tmp_path / "project" / ".ragu"
    dev_secret(load_settings({}, data_dir=str(data_dir)))
    return data_dir


def test_token_outside_the_served_folder_is_refused_instead_of_minting_with_a_new_secret(
    env: dict[str, str], served_data_dir: Path, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    result = _ragu("token", "--sub", "alice", cwd=elsewhere, env=env)
    assert result.returncode == 2
    assert result.stdout == ""
    assert "no_dev_secret" in result.stderr
    assert str(elsewhere / ".ragu" / "auth" / "dev-secret") in result.stderr
    assert "RAGU_DATA_DIR" in result.stderr
    assert not (elsewhere / ".ragu").exists(), "no secret nobody serves with is created"


def test_token_in_the_served_folder_trims_names_around_commas(env: dict[str, str], served_data_dir: Path) -> None:
    names = ("--groups", " hr, legal ", "--roles", "admin, ops")
    result = _ragu("token", "--sub", "alice", *names, cwd=served_data_dir.parent, env=env)
    assert result.returncode == 0, result.stderr
    server = Authenticator(load_settings({}, data_dir=str(served_data_dir)))
    principal = asyncio.run(server.authenticate(f"Bearer {result.stdout.strip()}"))
    assert principal.groups == {"hr", "legal"}
    assert principal.roles == {"admin", "ops"}
    assert principal.is_admin


def test_serve_inside_a_data_directory_refuses_to_make_a_new_one_there(
    env: dict[str, str], served_data_dir: Path
) -> None:
    """Started from inside ``.ragu``, ``ragu serve`` would make ``.ragu/.ragu``: a second, empty platform."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    command = [sys.executable, "-m", "ragu.cli", "serve"]
    started = {**env, "RAGU_PORT": port, "RAGU_LOCAL_LLM_MODEL": "none"}
    process = subprocess.Popen(command, env=started, cwd=served_data_dir, stderr=subprocess.PIPE, text=True)  # noqa: S603
    try:
        _, stderr = process.communicate(timeout=60)
    except subprocess.TimeoutExpired:  # it started a platform in there
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=60)
    assert process.returncode == 2, stderr
    assert stderr.splitlines() == [
        f"ragu: refusing to create a new data directory {served_data_dir / '.ragu'} inside the data directory "
        f"{served_data_dir} of another platform: to use that platform, set RAGU_DATA_DIR={served_data_dir} or start "
        f"ragu serve in {served_data_dir.parent}; for a new one, choose a folder outside it (data_dir_inside_data_dir)"
    ]
    assert not (served_data_dir / ".ragu").exists(), "nothing was created"


@pytest.mark.parametrize(
    ("groups", "code"),
    [("hr,,legal", "invalid_token_request"), ("hr,", "invalid_token_request"), ("hr,le\tgal", "invalid_group")],
)
def test_token_refuses_group_names_that_could_never_match(
    env: dict[str, str], served_data_dir: Path, groups: str, code: str
) -> None:
    result = _ragu("token", "--sub", "alice", "--groups", groups, cwd=served_data_dir.parent, env=env)
    assert result.returncode == 2
    assert result.stdout == ""
    assert f"({code})" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def _ragu_commands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    commands = _subcommands(parser)
    return {"ragu": parser, **commands, **{f"schemas {k}": v for k, v in _subcommands(commands["schemas"]).items()}}


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


@pytest.mark.parametrize("command", sorted(_ragu_commands()))
def test_help_is_plain_text_and_describes_every_argument(command: str) -> None:
    parser = _ragu_commands()[command]
    undescribed = [a.dest for a in parser._actions if not a.help]
    assert undescribed == []
    assert "``" not in parser.format_help()


def test_ragu_help_as_printed(env: dict[str, str], tmp_path: Path) -> None:
    result = _ragu("--help", cwd=tmp_path, env=env)
    assert result.returncode == 0
    assert result.stdout.startswith("usage: ragu")
    assert "``" not in result.stdout


def test_version_prints_the_installed_version(env: dict[str, str], tmp_path: Path) -> None:
    result = _ragu("--version", cwd=tmp_path, env=env)
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout == f"ragu {importlib.metadata.version('ragu')}\n"
