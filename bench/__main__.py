"""Run every benchmark, each in a fresh subprocess pinned to one thread, and write the combined report.

Run from the repository root::

    python -m bench [--quick] [--only NAME ...] [--out DIR]

A benchmark is a module ``bench/<name>_bench.py`` or one of :data:`EXTRA_MODULES`. One that defines
``run(quick: bool) -> dict`` is called through it (``python -m bench --child MODULE``); one that does not is
run through its command line (``python -m bench.<name> ... --out FILE``) with the arguments :data:`CLI_ARGS`
gives it. Modules are inspected without being imported, so a benchmark whose optional dependencies are
missing fails alone.
Every subprocess gets :data:`~bench.report.ONE_CORE_ENV`; its output goes to ``DIR/logs/<name>.log``.

The report is ``DIR/latest.json`` (every result in full, plus the machine) and ``DIR/latest.md`` (a table
per benchmark: ratios against peers and targets), rewritten after each benchmark so a long run that is
stopped keeps what it finished. ``DIR`` defaults to ``bench/results/``, which git ignores. Exit status 1
when any benchmark failed.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from bench.report import ONE_CORE_ENV, machine, markdown, met, summary_rows

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
DEFAULT_OUT = BENCH_DIR / "results"
ERROR_TAIL_LINES = 25

CLI_ARGS: dict[str, dict[str, list[str]]] = {
    "parse_bench": {"quick": ["--pages", "60", "--repeat", "1", "--no-real-world"], "full": []},
    "chunk_bench": {"quick": ["--mb", "1", "--token-mb", "0.2", "--repeat", "1"], "full": []},
    "embed_bench": {"quick": ["--quick"], "full": []},
}
"""Arguments for benchmarks without ``run(quick)``; others get ``--quick`` in a quick run and nothing otherwise."""


@dataclass(frozen=True)
class Benchmark:
    name: str
    module: str
    entry: Literal["run", "cli"]


EXTRA_MODULES = ("soak",)
"""Benchmarks not named ``*_bench.py``: the soak, a bounded load test (``python -m bench.soak`` for the full form)."""


def discover(folder: Path = BENCH_DIR, package: str = "bench") -> list[Benchmark]:
    """The ``*_bench.py`` modules of ``folder`` and :data:`EXTRA_MODULES`, sorted by name, each with how it is
    to be started."""
    extra = [path for name in EXTRA_MODULES if (path := folder / f"{name}.py").is_file()]
    return [
        Benchmark(path.stem, f"{package}.{path.stem}", "run" if _defines_run(path) else "cli")
        for path in sorted([*folder.glob("*_bench.py"), *extra])
    ]


def command(benchmark: Benchmark, *, quick: bool, out: Path) -> list[str]:
    """The subprocess that runs ``benchmark`` and leaves its JSON result in ``out``."""
    size = ["--quick"] if quick else []
    if benchmark.entry == "run":
        return [sys.executable, "-m", "bench", "--child", benchmark.module, *size, "--out", str(out)]
    args = CLI_ARGS.get(benchmark.name, {"quick": ["--quick"], "full": []})["quick" if quick else "full"]
    return [sys.executable, "-m", benchmark.module, *args, "--out", str(out)]


def execute(benchmark: Benchmark, *, quick: bool, out_dir: Path) -> dict[str, Any]:
    """Run one benchmark in its own process; its entry in ``latest.json`` (status, seconds, result or error)."""
    logs = out_dir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    log, result_file = logs / f"{benchmark.name}.log", logs / f"{benchmark.name}.json"
    result_file.unlink(missing_ok=True)
    argv = command(benchmark, quick=quick, out=result_file)
    started = time.perf_counter()
    with log.open("w", encoding="utf-8") as output:
        completed = subprocess.run(
            argv,
            cwd=REPO_ROOT,
            env={**os.environ, **ONE_CORE_ENV},
            stdout=output,
            stderr=subprocess.STDOUT,
            check=False,
        )
    entry: dict[str, Any] = {
        "command": argv[1:],
        "returncode": completed.returncode,
        "seconds": round(time.perf_counter() - started, 1),
        "log": str(log),
    }
    if completed.returncode == 0 and result_file.is_file():
        return {"status": "ok", **entry, "result": json.loads(result_file.read_text(encoding="utf-8"))}
    tail = log.read_text(encoding="utf-8", errors="replace").splitlines()[-ERROR_TAIL_LINES:]
    return {"status": "failed", **entry, "error": "\n".join(tail) or "no output"}


def write_report(report: dict[str, Any], out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "latest.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    (out_dir / "latest.md").write_text(markdown(report) + "\n", encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smoke-sized runs (minutes, not tens of minutes)")
    parser.add_argument("--only", nargs="+", metavar="NAME", help="run only these (e.g. ingest_bench)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="folder for latest.json, latest.md, logs/")
    parser.add_argument("--child", metavar="MODULE", help=argparse.SUPPRESS)
    parser.add_argument(
        "--publish", action="store_true", help="copy the last report's tables into docs/benchmarks.md and stop"
    )
    args = parser.parse_args(argv)
    if args.child:
        return _child(args.child, quick=args.quick, out=args.out)
    if args.publish:
        publish((args.out / "latest.md").read_text(encoding="utf-8"))
        return 0

    benchmarks = discover()
    if args.only:
        unknown = sorted(set(args.only) - {b.name for b in benchmarks})
        if unknown:
            parser.error(f"unknown benchmark(s) {', '.join(unknown)}; known: {', '.join(b.name for b in benchmarks)}")
        benchmarks = [b for b in benchmarks if b.name in args.only]
    report: dict[str, Any] = {"machine": machine(), "quick": args.quick, "benchmarks": {}}
    for benchmark in benchmarks:
        print(f"bench: {benchmark.name} ...", file=sys.stderr, flush=True)
        entry = execute(benchmark, quick=args.quick, out_dir=args.out)
        report["benchmarks"][benchmark.name] = entry
        write_report(report, args.out)
        print(f"bench: {benchmark.name} {_verdict(entry)} in {entry['seconds']:.0f} s", file=sys.stderr, flush=True)
    print(f"bench: report in {args.out / 'latest.md'}", file=sys.stderr)
    return 0 if all(e["status"] == "ok" for e in report["benchmarks"].values()) else 1


DOCS = REPO_ROOT / "docs" / "benchmarks.md"
BEGIN, END = "<!-- bench:begin -->", "<!-- bench:end -->"


def publish(latest: str, docs: Path = DOCS) -> None:
    """Replace the figures between the markers of ``docs`` with a report (its title demoted under the page's)."""
    page = docs.read_text(encoding="utf-8")
    head, _, rest = page.partition(BEGIN)
    _, _, tail = rest.partition(END)
    body = latest.replace("\n## ", "\n### ").replace("# Benchmarks", "## Latest run", 1).strip()
    docs.write_text(f"{head}{BEGIN}\n{body}\n{END}{tail}", encoding="utf-8")


def _child(module: str, *, quick: bool, out: Path) -> int:
    """Inside the subprocess: call the module's ``run`` and write its result."""
    result = importlib.import_module(module).run(quick=quick)
    out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


def _defines_run(path: Path) -> bool:
    """Whether the module defines ``run(quick)`` at top level: its only parameter is named ``quick``."""
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.FunctionDef) and node.name == "run":
            arguments = node.args
            return [a.arg for a in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs)] == ["quick"]
    return False


def _verdict(entry: dict[str, Any]) -> str:
    if entry["status"] != "ok":
        return f"FAILED (exit {entry['returncode']}, see {entry['log']})"
    verdicts = [met(row) for row in summary_rows(entry["result"])]
    missed = sum(v is False for v in verdicts)
    return f"ok, {sum(v is True for v in verdicts)} target(s) met, {missed} missed"


if __name__ == "__main__":
    sys.exit(main())
