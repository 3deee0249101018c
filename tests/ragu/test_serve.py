"""``ragu serve`` on embedded defaults, as a real process: both services answer, and it stops cleanly."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from common.auth import Authenticator, dev_secret
from common.config import load_settings


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _wait_until_up(url: str, process: subprocess.Popen[bytes], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"ragu serve exited early with {process.returncode}")
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"{url} did not answer within {timeout}s")


def _env(data_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGU_") and k != "DATABASE_URL"}
    env.update(RAGU_DATA_DIR=str(data_dir), RAGU_PORT=str(_free_port()))
    return env


@pytest.fixture
def ragu_env(tmp_path: Path) -> dict[str, str]:
    return _env(tmp_path / "data")


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[dict[str, str], Path]]:
    """One ``ragu serve`` on a fresh data directory for the module: its environment and its stderr log."""
    folder = tmp_path_factory.mktemp("running")
    env, log = _env(folder / "data"), folder / "stderr.log"
    with log.open("wb") as stderr:  # the child keeps its own copy of the descriptor
        process = subprocess.Popen([sys.executable, "-m", "ragu.cli", "serve"], env=env, cwd=folder, stderr=stderr)
    try:
        _wait_until_up(f"http://127.0.0.1:{env['RAGU_PORT']}/chonkit/ready", process)
        yield env, log
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)


def _second_serve(env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "ragu.cli", "serve"]
    return subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True, check=False, timeout=120)  # noqa: S603


def test_serve_brings_up_both_services_on_embedded_defaults(ragu_env: dict[str, str], tmp_path: Path) -> None:
    base = f"http://127.0.0.1:{ragu_env['RAGU_PORT']}"
    process = subprocess.Popen(
        [sys.executable, "-m", "ragu.cli", "serve"], env=ragu_env, cwd=tmp_path, stderr=subprocess.PIPE
    )
    try:
        _wait_until_up(f"{base}/chonkit/health", process)
        for service in ("chonkit", "kappi"):
            assert httpx.get(f"{base}/{service}/health").json() == {"status": "ok", "service": service}
            assert httpx.get(f"{base}/{service}/ready").json()["status"] == "ready"
            assert httpx.get(f"{base}/{service}/schemas/identity").status_code == 200
        index = httpx.get(f"{base}/api").json()
        assert set(index["services"]) == {"chonkit", "kappi"}
    finally:
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=30)
    assert process.returncode == 0, stderr.decode()
    pgdata = Path(ragu_env["RAGU_DATA_DIR"]) / "postgres"
    assert (pgdata / "PG_VERSION").exists()
    assert not (pgdata / "postmaster.pid").exists(), "embedded postgres was left running"


def test_token_command_mints_a_token_the_services_accept(ragu_env: dict[str, str], tmp_path: Path) -> None:
    dev_secret(load_settings({"RAGU_DATA_DIR": ragu_env["RAGU_DATA_DIR"]}))  # as ragu serve does at its first start
    minted = subprocess.run(
        [sys.executable, "-m", "ragu.cli", "token", "--sub", "alice", "--groups", "hr,legal", "--admin"],
        env=ragu_env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    token = minted.stdout.strip()
    settings = load_settings({"RAGU_DATA_DIR": ragu_env["RAGU_DATA_DIR"]})
    principal = asyncio.run(Authenticator(settings).authenticate(f"Bearer {token}"))
    assert principal.subject == "alice"
    assert principal.groups == {"hr", "legal"}
    assert principal.is_admin


def test_token_command_refuses_when_a_jwks_is_configured(ragu_env: dict[str, str], tmp_path: Path) -> None:
    ragu_env["RAGU_AUTH_JWKS_URL"] = "https://idp.example/jwks.json"
    result = subprocess.run(
        [sys.executable, "-m", "ragu.cli", "token", "--sub", "alice"],
        env=ragu_env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 2
    assert "jwks_configured" in result.stderr
    assert result.stdout == ""


def test_unknown_setting_stops_the_cli_with_a_message(ragu_env: dict[str, str], tmp_path: Path) -> None:
    ragu_env["RAGU_PROT"] = "1"
    result = subprocess.run(
        [sys.executable, "-m", "ragu.cli", "migrate"],
        env=ragu_env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 2
    assert "RAGU_PROT" in result.stderr


def test_a_first_start_says_where_it_created_the_signing_secret(running: tuple[dict[str, str], Path]) -> None:
    env, log = running
    assert f"created a development signing secret at {env['RAGU_DATA_DIR']}/auth/dev-secret" in log.read_text()


def test_a_first_start_says_it_made_a_new_data_directory_in_one_line(running: tuple[dict[str, str], Path]) -> None:
    """Started from another folder, ``ragu serve`` makes a new, empty platform there: the log must say so."""
    env, log = running
    lines = [line for line in log.read_text().splitlines() if "new data directory" in line]
    assert len(lines) == 1, lines
    assert f"ragu.bootstrap: new data directory {env['RAGU_DATA_DIR']} (no platform was there" in lines[0]


def test_a_second_serve_on_a_taken_port_says_so_in_one_line(
    running: tuple[dict[str, str], Path], tmp_path: Path
) -> None:
    env, _ = running
    result = _second_serve({**env, "RAGU_DATA_DIR": str(tmp_path / "other")}, tmp_path)
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"ragu: port {env['RAGU_PORT']} on 127.0.0.1 is in use (another ragu serve?); "
        "choose another with --port or RAGU_PORT (port_in_use)"
    ]
    assert not (tmp_path / "other").exists(), "nothing was started"


def test_a_second_serve_on_a_data_directory_in_use_says_so_in_one_line(
    running: tuple[dict[str, str], Path], tmp_path: Path
) -> None:
    env, _ = running
    result = _second_serve({**env, "RAGU_PORT": str(_free_port())}, tmp_path)
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"ragu: the data directory {env['RAGU_DATA_DIR']} is in use by another ragu process (the embedded Qdrant "
        "allows one at a time); stop that process, or give this one another RAGU_DATA_DIR (data_dir_in_use)"
    ]


def test_a_start_warns_of_development_auth_once_and_not_of_xdg_runtime_dir(
    running: tuple[dict[str, str], Path],
) -> None:
    stderr = running[1].read_text()
    assert stderr.count("development authentication") == 1, stderr
    assert "XDG_RUNTIME_DIR" not in stderr


LOG_LINE = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (DEBUG|INFO|WARNING|ERROR|CRITICAL) +\S+: ")


def test_a_first_start_logs_every_line_with_its_time_and_level(running: tuple[dict[str, str], Path]) -> None:
    """The migrations' docstrings, wrapped over several lines, once printed their later lines bare."""
    stderr = running[1].read_text()
    assert "Running upgrade 0005 -> 0006" in stderr, stderr  # a revision whose docstring's summary is 3 lines
    assert [line for line in stderr.splitlines() if not LOG_LINE.match(line)] == []
