"""The README's first session runs as written, against a real ``ragu serve``: every id it passes on comes from
the step before (``jq``), and the last step streams a cited answer. Every command the README and docs/ show runs
from the project's venv (``.venv/bin/...``): on a fresh machine a bare ``pip`` is the system interpreter's, and
what it installs lands elsewhere (issue #29)."""

from __future__ import annotations

import asyncio
import re
import shlex
import shutil
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.hardening.live_stack import REPO, RaguServer, served
from tests.support.documents import pdf

SECRET = "readme-hs256-secret-0123456789abcdef"
needs_jq = pytest.mark.skipif(shutil.which("jq") is None, reason="the README's walkthrough uses jq")


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


@needs_jq
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


# What the project's venv provides: run bare, each is whatever the machine's PATH finds first, or nothing.
VENV_PROGRAMS = re.compile(r"pip3?|python3?(\.\d+)?|ragu|ragu-schemas|pytest|alembic|ruff|mypy")
SHELL_BLOCKS = {"", "bash", "sh", "shell", "zsh", "console"}  # untyped blocks are read as shell too
SEPARATORS = {"&&", "||", ";", ";;", "|", "|&", "&", "(", ")"}  # each starts a new command; `$(` ends in `(`
WRAPPERS = {"sudo", "nice", "time", "env", "nohup", "exec", "command"}  # run the word after them
ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
FENCE = re.compile(r"\s*(`{3,}|~{3,})\s*([\w+-]*)")
INLINE = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", re.DOTALL)


def bare_programs(command_line: str) -> list[str]:
    """The programs a shell line runs by bare name that only the venv has, in order (``python3 -m venv``, which
    makes the venv, excepted)."""
    lexer = shlex.shlex(command_line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        tokens = list(lexer)
    except ValueError:  # an unclosed quote in prose: words are good enough
        tokens = command_line.split()
    found: list[str] = []
    at_start = True
    for index, token in enumerate(tokens):
        if token in SEPARATORS:
            at_start = True
        elif at_start and not (ASSIGNMENT.match(token) or token in WRAPPERS or token.startswith("-")):
            at_start = False
            makes_venv = tokens[index + 1 : index + 3] == ["-m", "venv"]
            if VENV_PROGRAMS.fullmatch(token) and not makes_venv:
                found.append(token)
    return found


def shown_commands(page: str) -> list[tuple[int, str]]:
    """(line, text) of each shell line in a fenced shell block and each inline code span that reads as a command:
    two words or more (a lone `ragu` or `ruff` is a name), or `pytest`."""
    shown: list[tuple[int, str]] = []
    lines = page.splitlines()
    fence: tuple[str, str] | None = None  # the open block's fence and language
    prose: list[str] = []
    prose_start = 1
    continued, continued_from = "", 0
    for number, line in enumerate(lines, 1):
        opening = FENCE.match(line)
        if fence is None:
            if opening:
                fence = opening.group(1), opening.group(2).lower()
                shown += inline_commands(prose, prose_start)
                prose = []
            else:
                prose.append(line)
            continue
        if line.strip().startswith(fence[0][0] * len(fence[0])) and not line.strip().strip(fence[0][0]):
            fence, prose_start = None, number + 1
            continue
        if fence[1] not in SHELL_BLOCKS:
            continue
        text = line.strip()
        if fence[1] == "console":  # the prompt marks a command; the rest is its output
            if not text.startswith("$ "):
                continue
            text = text[2:]
        continued_from = continued_from or number
        continued += text
        if continued.endswith("\\"):
            continued = continued[:-1] + " "
            continue
        shown.append((continued_from, " ".join(continued.split())))
        continued, continued_from = "", 0
    return shown + inline_commands(prose, prose_start)


def inline_commands(prose: list[str], first_line: int) -> list[tuple[int, str]]:
    text = "\n".join(prose)
    found: list[tuple[int, str]] = []
    for span in INLINE.finditer(text):
        code = " ".join(span.group(2).split())
        if "\n\n" not in span.group(2) and (len(code.split()) > 1 or code == "pytest"):
            found.append((first_line + text.count("\n", 0, span.start()), code))
    return found


@pytest.mark.parametrize(
    ("line", "bare"),
    [
        ("python3 -m venv .venv && .venv/bin/pip install -e ./schemas -e . && .venv/bin/ragu serve", []),
        ("python3 -m venv .venv && pip install -e . && ragu serve", ["pip", "ragu"]),
        ("ADMIN=$(ragu token --sub admin --admin)", ["ragu"]),
        ("ADMIN=$(.venv/bin/ragu token --sub admin --admin)", []),
        ("RAGU_X=1 .venv/bin/ragu serve; $VENV/bin/pytest -q", []),
        ("RAGU_X=1 ragu serve --port 8001 | tee log", ["ragu"]),
        ("nice python -m bench --only kappi_bench", ["python"]),
        ("sudo apt-get install -y jq && sudo pip install x", ["pip"]),
        ("git log -1 && curl -s http://127.0.0.1:8000/health && cd docs && export RAGU_X=1", []),
        ("pytest -q && ruff check . && mypy --strict x && alembic upgrade head", ["pytest", "ruff", "mypy", "alembic"]),
        (".venv/bin/pytest -q && .venv/bin/ruff check . && sudo apt-get install -y chromium", []),
        ("python3.11 -m pytest", ["python3.11"]),
        ('curl -s -H "$AUTH" -d \'{"a": "b | pip"}\' $C/x | jq -r .id', []),
    ],
)
def test_the_command_check_finds_bare_venv_programs(line: str, bare: list[str]) -> None:
    assert bare_programs(line) == bare


def test_the_check_reads_shell_blocks_and_inline_commands() -> None:
    page = "\n".join(
        [
            "Run `ragu serve` (the `ragu` command) after `pip install -e .`, then `pytest`.",  # 1
            "```bash",
            "RAGU_X=1 ragu serve \\",  # 3
            "    --port 8001",
            "```",
            "```python",
            "import ragu",
            "```",
            "```console",
            "$ .venv/bin/ragu worker",  # 10
            "python output that is not a command",
            "```",
            "```",
            "pytest -q",  # 14
            "```",
            "and `python -m bench.soak",  # 16: a span across a line break
            "--users 24`.",
        ]
    )
    assert sorted(shown_commands(page)) == [
        (1, "pip install -e ."),
        (1, "pytest"),
        (1, "ragu serve"),
        (3, "RAGU_X=1 ragu serve --port 8001"),
        (10, ".venv/bin/ragu worker"),
        (14, "pytest -q"),
        (16, "python -m bench.soak --users 24"),
    ]


def test_every_command_the_readme_and_docs_show_runs_from_the_venv() -> None:
    pages = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    bare: list[str] = []
    for page in pages:
        name = page.relative_to(REPO).as_posix()
        for number, command in shown_commands(page.read_text()):
            programs = bare_programs(command)
            if programs:
                bare.append(f"{name}:{number}: {command}  (bare {', '.join(programs)}: use .venv/bin/{programs[0]})")
    assert not bare, "commands that do not run from the project's venv:\n" + "\n".join(bare)
