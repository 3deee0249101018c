"""What the benchmark runner shares with the benchmarks: the one-core environment, the machine, the report.

Every benchmark compares us with a peer in the same run, so a result is read as ratios against targets.
A benchmark states them in a ``summary`` list of rows (see :class:`SummaryRow`); for results without one
(benchmarks written before this convention) :func:`summary_rows` falls back to every number whose path
says it is a ratio (``ratio``, ``_vs_``, ``speedup``), with a target when the result's ``targets`` mapping
names the same key.
"""

from __future__ import annotations

import datetime as dt
import os
import platform
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, TypedDict, cast

ONE_CORE_ENV = {
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "RAYON_NUM_THREADS": "1",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
}
"""Pins numeric libraries to one thread and keeps model loaders off the network; set before importing them."""

_RATIO_MARKERS = ("ratio", "_vs_", "speedup")


class SummaryRow(TypedDict, total=False):
    """One line of a benchmark's table: ``value`` is the ratio (ours vs peer) or the figure held to ``target``."""

    metric: str
    ours: float | None
    peer: float | None
    value: float
    target: float | None
    higher_is_better: bool


def pin_one_core() -> None:
    """Apply :data:`ONE_CORE_ENV` to this process (only effective before numpy, torch or onnxruntime load)."""
    os.environ.update(ONE_CORE_ENV)


def machine() -> dict[str, Any]:
    """What the figures were measured on: CPU model, cores, RAM, Python and the date."""
    return {
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "ram_gib": _ram_gib(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
    }


def summary_rows(result: Mapping[str, Any]) -> list[SummaryRow]:
    """The rows a benchmark declared in ``summary``, or the ratios found in its result."""
    declared = result.get("summary")
    if isinstance(declared, list):
        return [cast(SummaryRow, row) for row in declared if isinstance(row, dict)]
    targets = result.get("targets") if isinstance(result.get("targets"), dict) else {}
    rows: list[SummaryRow] = []
    for path, value in _numbers(result):
        if path[0] != "targets" and any(marker in ".".join(path) for marker in _RATIO_MARKERS):
            target = targets.get(path[-1]) if targets else None
            rows.append(SummaryRow(metric=".".join(path), value=value, target=_number(target)))
    return rows


def met(row: SummaryRow) -> bool | None:
    """Whether the row meets its target (``None`` when it has none)."""
    target = row.get("target")
    if target is None:
        return None
    return row["value"] >= target if row.get("higher_is_better", True) else row["value"] <= target


def markdown(report: Mapping[str, Any]) -> str:
    """The report as Markdown: a machine header, then one table per benchmark (failures say why)."""
    host = report["machine"]
    lines = [
        f"# Benchmarks ({'quick' if report.get('quick') else 'full'} run)",
        "",
        f"{host['date']} · {host['cpu']} · {host['cores']} cores · {host['ram_gib']} GiB RAM · "
        f"Python {host['python']} · one thread per benchmark",
        "",
    ]
    for name, entry in report["benchmarks"].items():
        lines += [f"## {name}", ""]
        if entry.get("status") != "ok":
            lines += [f"**failed** (exit {entry.get('returncode')}):", "", "```", entry.get("error", ""), "```", ""]
            continue
        rows = summary_rows(entry["result"])
        lines.append(f"{len(rows)} figure(s) in {entry['seconds']:.0f} s.")
        lines.append("")
        if rows:
            lines += ["| metric | ours | peer | ratio / value | target | met |", "|---|---:|---:|---:|---:|:-:|"]
            lines += [_table_line(row) for row in rows]
            lines.append("")
    return "\n".join(lines)


def _table_line(row: SummaryRow) -> str:
    verdict = {True: "yes", False: "**no**", None: ""}[met(row)]
    target = row.get("target")
    comparison = "" if target is None else (">= " if row.get("higher_is_better", True) else "<= ") + _fmt(target)
    cells = [row["metric"], _fmt(row.get("ours")), _fmt(row.get("peer")), _fmt(row["value"]), comparison, verdict]
    return "| " + " | ".join(cells) + " |"


def _fmt(value: float | None) -> str:
    if value is None:
        return ""
    return f"{value:.3g}" if abs(value) < 100 else f"{value:,.0f}"


def _numbers(node: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], float]]:
    if isinstance(node, dict):
        for key, child in node.items():
            yield from _numbers(child, (*path, str(key)))
    elif (number := _number(node)) is not None and path:
        yield path, number


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _ram_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 1024**2, 1)
    except OSError:
        pass
    return None
