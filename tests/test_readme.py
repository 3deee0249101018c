"""The README's first session runs as written, against a real ``ragu serve``: every id it passes on comes from
the step before (``jq``), and the last step streams a cited answer."""

from __future__ import annotations

import asyncio
import re
import shutil
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.hardening.live_stack import REPO, RaguServer, served
from tests.support.documents import pdf

SECRET = "readme-hs256-secret-0123456789abcdef"
pytestmark = pytest.mark.skipif(shutil.which("jq") is None, reason="the README's walkthrough uses jq")


def first_session() -> str:
    readme = (REPO / "README.md").read_text()
    section = readme[readme.index("## A first session") :]
    match = re.search(r"```bash\n(.*?)```", section, re.DOTALL)
    assert match, "the first session has a bash block"
    return match.group(1)


@pytest.fixture(scope="module")
async def server() -> AsyncIterator[tuple[RaguServer, dict[str, str]]]:
    async with served("ragu-readme-", SECRET) as running:
        yield running.server, running.env


async def test_the_first_session_runs_as_written(server: tuple[RaguServer, dict[str, str]], tmp_path: Path) -> None:
    running, env = server
    (tmp_path / "handbook.pdf").write_bytes(pdf(["Vacation: employees get 25 vacation days per year."]))
    script = first_session()
    script = script.replace("http://127.0.0.1:8000", running.base_url)
    script = script.replace(".venv/bin/ragu", f"{sys.executable} -m ragu.cli")
    process = await asyncio.create_subprocess_exec(
        "bash",
        "-euo",
        "pipefail",
        "-c",
        script,
        cwd=tmp_path,
        env={**running.env, **env, "PYTHONPATH": str(REPO)},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), timeout=120)
    output = out.decode()
    assert process.returncode == 0, f"{err.decode()}\n{output}\n{running.tail()}"
    assert '"ok": true' in output  # the assignment
    assert "event: done" in output  # the job's events, then the answer's
    assert "25 vacation days" in output.rsplit("event: sources", 1)[-1]
    assert '"status":"done"' in output  # the job ran to its end: every id reached the step that needed it


def test_the_readme_stays_a_reference_under_2000_words() -> None:
    words = len((REPO / "README.md").read_text().split())
    assert words < 2000, f"README.md has {words} words; move detail to docs/"
