"""Where kappi's question path spends its CPU, stage by stage, in one process: this checkout against a peer.

Run from the repository root::

    python -m bench.kappi_stages --peer /path/to/other/checkout [--peer ...] [--runs 3] [--rounds 40] [--out FILE]

``kappi_bench`` says *that* a question costs more CPU (kappi's whole server, HTTP included, under wrk); this says
*where*. Each run sets up what ``kappi_bench --quick`` sets up (its SciFact documents, chunking, payloads and four
collections, in an embedded PostgreSQL), opens kappi's app in this process (its lifespan, so the in-memory copies
answer dense searches; the garbage collector tuned as ``ragu serve`` tunes it) and asks the 50 cached claims
through ``ChatService.ask_once`` round after round, as the user of ``kappi_bench``; an answer is JSON-encoded as
the controller would. Per question it reports the thread's CPU time (``time.thread_time``: another process
taking the core is not counted; one sharing it still slows the caches) and, per stage, the CPU inside the
functions of :data:`STAGES` (wrapped where they are looked up; a stage the checkout does not have is absent).

Runs alternate between this checkout and each peer (``--peer``, e.g. a ``git worktree`` of the release before),
each in a fresh subprocess started in its checkout, so each imports its own code (the result names the file
imported). The figures are medians over runs and rounds, with the ratio ours / each peer. The machine is shared:
only runs of the same hour compare, and a stage of a few µs is within the noise.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

STAGES: tuple[tuple[str, str, str, str], ...] = (
    # (module, owner ("" for the module), function, stage)
    ("kappi.chat.answering", "Answerer", "query", "question (Answerer.query, whole)"),
    ("kappi.retrieval.service", "Retriever", "retrieve", "retrieval (Retriever.retrieve)"),
    ("kappi.retrieval.service", "Retriever", "_search", "searches and hits read (Retriever._search)"),
    ("common.vectors.resident", "ResidentVectors", "search_many", "in-memory searches (ResidentVectors)"),
    ("kappi.chat.answering", "", "relevant", "relevance floor (relevant)"),
    ("kappi.chat.answering", "", "joined_neighbours", "neighbour join (joined_neighbours)"),
    ("kappi.chat.answering", "", "_llm_request", "prompt and passages (_llm_request)"),
    ("kappi.llm.extractive", "", "extract_answer", "extractive answer (extract_answer)"),
    ("kappi.chat.answering", "", "citations_of", "citations (citations_of)"),
)
"""Where each stage is looked up when called (``answering`` imports ``relevant`` by name: it is wrapped there)."""
CHILD_MARKER = "KAPPI_STAGES_JSON "


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--peer", type=Path, action="append", default=[], help="another checkout to compare with")
    parser.add_argument("--runs", type=int, default=3, help="runs of each side, alternating")
    parser.add_argument("--rounds", type=int, default=40, help="rounds of the 50 claims per run")
    parser.add_argument("--data", type=Path, default=None, help="the SciFact folder (kappi_bench's default)")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(CHILD_MARKER + json.dumps(_child(args.rounds, args.data)), flush=True)
        return 0
    here = Path(__file__).resolve().parent.parent
    sides = {"ours": here} | {f"peer {n}": peer.resolve() for n, peer in enumerate(args.peer, start=1)}
    runs: dict[str, list[dict[str, Any]]] = {side: [] for side in sides}
    for n in range(args.runs):
        for side, checkout in sides.items():
            runs[side].append(_run(checkout, args.rounds, args.data))
            print(
                f"kappi_stages: {side} run {n + 1}: {runs[side][-1]['question_cpu_us']['median']} µs", file=sys.stderr
            )
    result = _summary(runs)
    text = json.dumps(result, indent=2)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    print(text)
    return 0


def _run(checkout: Path, rounds: int, data: Path | None) -> dict[str, Any]:
    """One run in a fresh process started in ``checkout`` (its code first on the path)."""
    # this file runs in the checkout (which may not have it), importing the checkout's code
    command = [sys.executable, str(Path(__file__).resolve()), "--child", "--rounds", str(rounds)]
    if data is not None:
        command += ["--data", str(data)]
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    done = subprocess.run(command, cwd=checkout, env=env, capture_output=True, text=True, check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith(CHILD_MARKER)]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"kappi_stages in {checkout} failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(lines[-1].removeprefix(CHILD_MARKER))
    return result


def _summary(runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    def median(side: str, pick: Callable[[dict[str, Any]], float | None]) -> float | None:
        values = [v for run in runs[side] if (v := pick(run)) is not None]
        return round(statistics.median(values), 1) if values else None

    stages = [stage for *_, stage in STAGES]
    summary: dict[str, Any] = {
        "benchmark": "kappi_stages",
        "unit": "µs of CPU per question (thread time), median over runs",
        "code": {side: sorted({run["code"] for run in side_runs}) for side, side_runs in runs.items()},
        "load_average": {side: [run["load_average"] for run in side_runs] for side, side_runs in runs.items()},
        "question": {side: median(side, lambda r: r["question_cpu_us"]["median"]) for side in runs},
        "stages": {
            stage: {side: median(side, functools.partial(_stage_of, stage)) for side in runs} for stage in stages
        },
        "runs": runs,
    }
    ours = summary["question"]["ours"]
    summary["question_ratio"] = {
        side: round(ours / peer, 3) if ours and peer else None
        for side, peer in summary["question"].items()
        if side != "ours"
    }
    return summary


def _stage_of(stage: str, run: dict[str, Any]) -> float | None:
    spent: float | None = run["stages_us"].get(stage)
    return spent


def _child(rounds: int, data: Path | None) -> dict[str, Any]:
    """One run, in this checkout's code (the parent started this process in it)."""
    from bench.report import pin_one_core

    pin_one_core()
    import bench.kappi_bench as kb
    from bench.scifact_bench import DEFAULT_DATA, load_corpus
    from common.db import migrate
    from common.db.embedded import EmbeddedPostgres, ensure_database, with_database

    data = data or DEFAULT_DATA
    sizes = kb.QUICK
    questions = kb.load_questions(data, sizes).cached
    documents = kb.chunk_corpus(load_corpus(data), sizes.documents)
    vectors = kb.embedded_chunks(documents)
    with tempfile.TemporaryDirectory(prefix="ragu-kappi-stages-") as folder:
        server = EmbeddedPostgres(Path(folder) / "pg")  # ragu refuses a data dir inside a database
        try:
            admin_url = server.start()
            asyncio.run(ensure_database(admin_url, "ragu_bench"))
            url = with_database(admin_url, "ragu_bench")
            migrate.upgrade(url)
            asyncio.run(kb.write_collections(url, documents, vectors))
            result = asyncio.run(_questions(url, Path(folder), questions, rounds))
        finally:
            server.stop()
    import kappi.retrieval.service

    return {**result, "code": kappi.retrieval.service.__file__, "load_average": [round(x, 2) for x in os.getloadavg()]}


async def _questions(url: str, folder: Path, questions: list[str], rounds: int) -> dict[str, Any]:
    import httpx
    import msgspec

    import bench.kappi_bench as kb
    from common.auth import Principal
    from common.config import load_settings
    from kappi.app import create_app

    settings = load_settings(
        {}, database_url=url, auth_hs256_secret=kb.SECRET, data_dir=str(folder / "data"), log_level="WARNING"
    )
    app = create_app(settings)
    gc.collect()  # as ragu serve does before serving (ragu/serve.py)
    gc.freeze()
    gc.set_threshold(10_000, 10, 10)
    admin, user, _ = kb._tokens(folder)
    transport = httpx.ASGITransport(app=app)  # type: ignore[arg-type]  # Litestar's scope types are narrower
    async with app.lifespan(), httpx.AsyncClient(transport=transport, base_url="http://kappi") as client:
        agent_id = await _agent(client, admin)
        for _ in range(2):  # embeds each claim once, then the in-memory copies are loaded and settled
            for question in questions:
                answer = await client.post(
                    f"/agents/{agent_id}/query", json={"content": question}, headers={"Authorization": f"Bearer {user}"}
                )
                answer.raise_for_status()
            await asyncio.sleep(2)
        chats = app.state.kappi.chats
        principal = Principal(
            subject="bench-user", name=None, groups=frozenset(kb.USER_GROUPS), roles=frozenset(), is_admin=False
        )
        agent = uuid.UUID(agent_id)

        async def one_round() -> None:
            for question in questions:
                msgspec.json.encode(await chats.ask_once(agent, question, principal))

        spent: defaultdict[str, float] = defaultdict(float)
        _wrap_stages(spent)
        await one_round()
        spent.clear()
        per_round = []
        for _ in range(rounds):
            started = time.thread_time()
            await one_round()
            per_round.append((time.thread_time() - started) / len(questions) * 1e6)
    asked = rounds * len(questions)
    return {
        "question_cpu_us": {"median": round(statistics.median(per_round), 1), "min": round(min(per_round), 1)},
        "stages_us": {stage: round(seconds / asked * 1e6, 1) for stage, seconds in spent.items()},
    }


async def _agent(client: Any, admin: str) -> str:
    """An extractive agent over the four collections, searched dense (as ``kappi_bench``'s)."""
    import bench.kappi_bench as kb

    headers = {"Authorization": f"Bearer {admin}"}
    body = {"name": "SciFact helper (dense)", "llm_provider": "extractive", "llm_model": "extractive"}
    made = await client.post("/admin/agents", json=body, headers=headers)
    made.raise_for_status()
    agent_id: str = made.json()["id"]
    assign = {
        "add": [
            {"vector_provider": "pgvector", "name": name, "instruction": f"SciFact abstracts ({name})", "mode": "dense"}
            for name, _ in kb.COLLECTIONS
        ]
    }
    (await client.put(f"/admin/agents/{agent_id}/collections", json=assign, headers=headers)).raise_for_status()
    return agent_id


def _wrap_stages(spent: defaultdict[str, float]) -> None:
    """Each stage's function replaced, where it is looked up, by one adding its thread CPU time to ``spent``."""
    import importlib
    import inspect

    for module_name, owner_name, name, stage in STAGES:
        module = importlib.import_module(module_name)
        owner = getattr(module, owner_name) if owner_name else module
        original = getattr(owner, name, None)
        if original is None:
            continue  # a stage this checkout does not have
        setattr(owner, name, _timed(original, stage, spent, is_async=inspect.iscoroutinefunction(original)))


def _timed(original: Any, stage: str, spent: defaultdict[str, float], *, is_async: bool) -> Any:
    if is_async:

        @functools.wraps(original)
        async def timed_async(*args: Any, **kwargs: Any) -> Any:
            started = time.thread_time()
            try:
                return await original(*args, **kwargs)
            finally:
                spent[stage] += time.thread_time() - started

        return timed_async

    @functools.wraps(original)
    def timed(*args: Any, **kwargs: Any) -> Any:
        started = time.thread_time()
        try:
            return original(*args, **kwargs)
        finally:
            spent[stage] += time.thread_time() - started

    return timed


if __name__ == "__main__":
    sys.exit(main())
