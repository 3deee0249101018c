"""No Docker engine runs here, so the production stack is checked statically: it cannot silently rot."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from common.config import settings_env_names
from ragu.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((ROOT / "compose.yaml").read_text())
    return data


def _ragu_services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {name: svc for name, svc in compose["services"].items() if svc.get("image", "").startswith("ragu:")}


def test_stack_has_every_part(compose: dict[str, Any]) -> None:
    assert {"postgres", "qdrant", "weaviate", "migrate", "chonkit", "kappi", "worker"} <= set(compose["services"])


def test_chonkit_and_workers_share_the_document_store(compose: dict[str, Any]) -> None:
    """Workers read originals from the content-addressed store chonkit writes."""
    services = compose["services"]
    assert services["chonkit"]["volumes"] == services["worker"]["volumes"]
    assert services["chonkit"]["environment"]["RAGU_CHONKIT_INPROCESS_WORKER"] == "false"


def test_every_ragu_variable_is_a_setting_the_code_reads(compose: dict[str, Any]) -> None:
    known = settings_env_names()
    for name, service in _ragu_services(compose).items():
        unknown = set(service.get("environment", {})) - known
        assert not unknown, f"{name} sets variables no code reads: {sorted(unknown)}"
        assert "DATABASE_URL" in service["environment"], f"{name} would start an embedded database"


def test_services_run_real_ragu_commands(compose: dict[str, Any]) -> None:
    parser = build_parser()
    for name, service in _ragu_services(compose).items():
        command = service["command"]
        assert command[0] == "ragu", name
        parser.parse_args(command[1:])  # exits (SystemExit) on a command the CLI does not know


def test_long_running_services_have_health_checks(compose: dict[str, Any]) -> None:
    for name, service in compose["services"].items():
        if name != "migrate":
            assert "healthcheck" in service, f"{name} has no health check"


def test_dependencies_exist_and_wait_on_conditions(compose: dict[str, Any]) -> None:
    services = compose["services"]
    for name, service in services.items():
        for dependency, rule in service.get("depends_on", {}).items():
            assert dependency in services, f"{name} depends on unknown {dependency}"
            assert rule["condition"] in {"service_healthy", "service_completed_successfully"}
    assert services["chonkit"]["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
    assert services["migrate"]["depends_on"]["postgres"]["condition"] == "service_healthy"


def test_services_do_not_race_to_migrate(compose: dict[str, Any]) -> None:
    for name in ("chonkit", "kappi"):
        assert compose["services"][name]["environment"]["RAGU_AUTO_MIGRATE"] == "false"


def test_dockerfile_copies_every_package_ragu_serve_imports() -> None:
    """Every package ``ragu serve all`` imports (the console too), read from the import graph, not listed."""
    dockerfile = (ROOT / "Dockerfile").read_text()
    served = subprocess.run(
        [sys.executable, "-c", "import sys, ragu.serve; print(' '.join(sorted(sys.modules)))"],
        capture_output=True, text=True, check=True, cwd=ROOT,
    ).stdout.split()  # fmt: skip
    ours = {name.split(".")[0] for name in served if (ROOT / name.split(".")[0]).is_dir()}
    assert ours >= {"schemas", "common", "chonkit", "kappi", "ragu", "console"}
    for folder in sorted(ours | {"migrations"}):
        assert f"COPY {folder} ./{folder}" in dockerfile


def test_qdrant_peers_form_one_replicated_cluster(compose: dict[str, Any]) -> None:
    """docs/scaling.md's layout: one peer starts the cluster, the others join it by name, and shards are replicated."""
    services = compose["services"]
    peers = {name: svc for name, svc in services.items() if svc.get("image", "").startswith("qdrant/")}
    assert len(peers) >= 3
    founders = []
    for name, peer in peers.items():
        assert peer["environment"]["QDRANT__CLUSTER__ENABLED"] == "true", name
        assert 2 <= int(peer["environment"]["QDRANT__STORAGE__COLLECTION__REPLICATION_FACTOR"]) <= len(peers), name
        command = peer["command"]
        assert command[command.index("--uri") + 1] == f"http://{name}:6335", name
        if "--bootstrap" in command:
            assert command[command.index("--bootstrap") + 1].removeprefix("http://").split(":")[0] in peers, name
        else:
            founders.append(name)
    assert founders == ["qdrant"]
    assert services["kappi"]["deploy"]["replicas"] >= 2
