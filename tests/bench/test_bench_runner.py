"""The benchmark runner: discovery, the commands it starts, the report it writes — never the real benchmarks.

This module doubles as a tiny benchmark (:func:`run`), so one test drives a real child process end to end.
"""

from __future__ import annotations

import importlib
import inspect
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from bench.__main__ import BEGIN, END, Benchmark, command, discover, execute, main, publish, write_report
from bench.report import ONE_CORE_ENV, markdown, met, summary_rows
from bench.scifact_bench import max_pooled, ndcg_at_k, recall_at_k

FAKE_MACHINE = {
    "cpu": "Test CPU 9000",
    "cores": 2,
    "ram_gib": 24.0,
    "python": "3.11.7",
    "platform": "Linux",
    "date": "2026-01-01 00:00 UTC",
}


def run(quick: bool) -> dict[str, Any]:
    """The stand-in benchmark that :func:`test_execute_runs_a_child_and_collects_its_result` starts."""
    return {
        "quick": quick,
        "omp_threads": os.environ.get("OMP_NUM_THREADS"),
        "summary": [{"metric": "speed", "ours": 2.0, "peer": 1.0, "value": 2.0, "target": 1.5}],
    }


def test_discover_finds_every_benchmark_with_a_usable_entry_point() -> None:
    benchmarks = {b.name: b for b in discover()}
    assert {"ingest_bench", "scifact_bench", "parse_bench", "chunk_bench"} <= set(benchmarks)
    assert benchmarks["ingest_bench"].entry == benchmarks["scifact_bench"].entry == "run"
    for benchmark in benchmarks.values():
        module = importlib.import_module(benchmark.module)
        if benchmark.entry == "run":
            assert list(inspect.signature(module.run).parameters) == ["quick"]
        else:
            assert callable(module.main), f"{benchmark.name} has neither run(quick) nor main(argv)"


def test_quick_commands() -> None:
    out = Path("/tmp/result.json")
    ours = command(Benchmark("ingest_bench", "bench.ingest_bench", "run"), quick=True, out=out)
    assert ours == [sys.executable, "-m", "bench", "--child", "bench.ingest_bench", "--quick", "--out", str(out)]
    legacy = command(Benchmark("parse_bench", "bench.parse_bench", "cli"), quick=True, out=out)
    assert legacy[1:3] == ["-m", "bench.parse_bench"]
    assert "--no-real-world" in legacy
    assert "--quick" not in legacy  # parse_bench has no such flag
    unknown = command(Benchmark("new_bench", "bench.new_bench", "cli"), quick=False, out=out)
    assert unknown == [sys.executable, "-m", "bench.new_bench", "--out", str(out)]


def test_declared_summary_rows_and_targets() -> None:
    result = {
        "summary": [
            {"metric": "pages/s", "ours": 13.0, "peer": 10.0, "value": 1.3, "target": 1.3},
            {"metric": "embed share", "value": 0.8, "target": 0.85},
            {"metric": "latency", "value": 0.5, "target": 1.0, "higher_is_better": False},
            {"metric": "chunks/s", "value": 1.1, "target": None},
        ]
    }
    assert [met(row) for row in summary_rows(result)] == [True, False, True, None]


def test_ratio_rows_are_found_in_results_without_a_summary() -> None:
    parse_like = {
        "targets": {"ours_vs_pypdf": 10.0},
        "total": {"pages": 380, "ours_vs_pypdf": 12.5, "ours": {"pages_per_s": 900.0}},
        "speedup_vs_langchain": {"tokens_snap=true": 3.2},
        "throughput": {"ratio": 1.1, "passages": 400},
        "meets_targets": True,
    }
    rows = {row["metric"]: row for row in summary_rows(parse_like)}
    assert set(rows) == {"total.ours_vs_pypdf", "speedup_vs_langchain.tokens_snap=true", "throughput.ratio"}
    assert rows["total.ours_vs_pypdf"]["target"] == 10.0
    assert met(rows["total.ours_vs_pypdf"]) is True
    assert met(rows["throughput.ratio"]) is None


def test_markdown_report_has_the_machine_a_table_per_benchmark_and_failures() -> None:
    report = {
        "machine": FAKE_MACHINE,
        "quick": True,
        "benchmarks": {
            "ingest_bench": {"status": "ok", "seconds": 42.0, "result": run(quick=True)},
            "broken_bench": {"status": "failed", "returncode": 3, "seconds": 1.0, "error": "ImportError: torch"},
        },
    }
    text = markdown(report)
    assert "quick run" in text
    assert "Test CPU 9000" in text
    assert "2 cores" in text
    assert "24.0 GiB" in text
    assert "Python 3.11.7" in text
    assert "2026-01-01" in text
    assert "## ingest_bench" in text
    assert "| speed | 2 | 1 | 2 | >= 1.5 | yes |" in text
    assert "## broken_bench" in text
    assert "failed** (exit 3)" in text
    assert "ImportError: torch" in text


def test_write_report(tmp_path: Path) -> None:
    report = {"machine": FAKE_MACHINE, "quick": False, "benchmarks": {}}
    write_report(report, tmp_path / "results")
    assert json.loads((tmp_path / "results" / "latest.json").read_text()) == report
    assert (tmp_path / "results" / "latest.md").read_text().startswith("# Benchmarks (full run)")


def test_execute_runs_a_child_and_collects_its_result(tmp_path: Path) -> None:
    entry = execute(Benchmark("fake", __name__, "run"), quick=True, out_dir=tmp_path)
    assert entry["status"] == "ok", entry
    assert entry["result"]["quick"] is True
    assert entry["result"]["omp_threads"] == ONE_CORE_ENV["OMP_NUM_THREADS"] == "1"  # pinned in the child
    assert entry["result"]["summary"] == run(quick=True)["summary"]


def test_execute_reports_a_failing_child(tmp_path: Path) -> None:
    entry = execute(Benchmark("missing", "bench.no_such_bench", "run"), quick=True, out_dir=tmp_path)
    assert entry["status"] == "failed"
    assert entry["returncode"] != 0
    assert "No module named 'bench.no_such_bench'" in entry["error"]


def test_only_refuses_unknown_names(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--only", "nonexistent_bench"])
    assert exited.value.code == 2
    assert "unknown benchmark(s) nonexistent_bench" in capsys.readouterr().err


def test_ndcg_recall_and_max_pooling() -> None:
    qrels = {"q1": {"a": 2, "b": 1}, "q2": {"c": 1}}
    ranking = {"q1": ["b", "a", "x"], "q2": ["x", "c"]}
    ideal_q1 = 2 + 1 / 1.584962500721156
    expected_q1 = (1 + 2 / 1.584962500721156) / ideal_q1
    expected_q2 = (1 / 1.584962500721156) / 1
    assert ndcg_at_k(ranking, qrels) == pytest.approx((expected_q1 + expected_q2) / 2)
    assert ndcg_at_k({"q1": ["a", "b"], "q2": ["c"]}, qrels) == pytest.approx(1.0)
    assert recall_at_k(ranking, qrels, 1) == pytest.approx(0.25)
    assert max_pooled([("a", 0.5), ("b", 0.7), ("a", 0.9), ("c", 0.7)]) == ["a", "b", "c"]


def test_publish_replaces_only_the_figures_between_the_markers(tmp_path: Path) -> None:
    docs = tmp_path / "benchmarks.md"
    docs.write_text(f"# Benchmarks\n\nintro\n\n{BEGIN}\nold figures\n{END}\n\n## After\n", encoding="utf-8")
    publish("# Benchmarks (full run)\n\nmachine\n\n## kappi_bench\n\n| a |\n", docs)
    page = docs.read_text(encoding="utf-8")
    assert page.startswith("# Benchmarks\n\nintro\n\n")
    assert "old figures" not in page
    assert f"{BEGIN}\n## Latest run (full run)\n\nmachine\n\n### kappi_bench\n\n| a |\n{END}" in page
    assert page.endswith("\n\n## After\n")
