"""Calibrates the relevance floors of :mod:`kappi.chat.grounding` on SciFact with all-MiniLM-L6-v2.

Run from the repository root::

    nice python -m bench.relevance_floor [--full] [--data ../shared/data/scifact] [--out result.json]

Each test query is embedded with ``embed_query`` and every corpus document ("title abstract", truncated to the
model's 256-token window, about one default chunk) with ``embed_sync``; similarity is the cosine the vector
stores return as ``1 - distance``. Two situations are measured for every query:

- *answerable*: the corpus as it is. What matters is the cosine of the query's best relevant document, and its
  ratio to the top hit's cosine (the relative floor must keep it), and the cosines of the irrelevant documents
  that rank in the top ``k`` (what a floor should drop);
- *unanswerable*: the same query with its relevant documents taken out. Its top hit's cosine is what the
  absolute floor must stay above for Ragu to decline before the model speaks.

The absolute floor chosen is the highest that keeps :data:`KEEP` of the relevant documents found in the top
``k``; the relative floor likewise, as a ratio to the top hit. The report gives, at those floors, the share of
relevant documents kept, of irrelevant top-``k`` hits dropped, and of unanswerable queries declined.
``--full`` uses the whole corpus and all 300 test queries (about 10 minutes on one core); the default keeps
the quick subset of :mod:`bench.scifact_bench` (100 queries, their documents and 1,000 distractors).
The data is evaluation-only (CC BY-NC) and never shipped.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from bench.report import pin_one_core
from bench.scifact_bench import DEFAULT_DATA, Dataset, load_dataset, quick_subset

MODEL = "all-MiniLM-L6-v2"
TOP_K = 5
"""Passages an assignment gives by default (``top_k``)."""
KEEP = 0.95
"""Share of the relevant documents found in the top ``k`` that a floor must keep."""

Floats = npt.NDArray[np.float32]


def _quantile_floor(values: Sequence[float], keep: float) -> float:
    """The highest floor that ``keep`` of ``values`` still reach (rounded down to 0.01)."""
    ordered = sorted(values)
    at = ordered[int((1.0 - keep) * len(ordered))]
    return float(np.floor(at * 100) / 100)


def _share(values: Sequence[bool]) -> float:
    return round(sum(values) / len(values), 3) if values else 0.0


def _summary(values: Sequence[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "p05": round(ordered[int(0.05 * len(ordered))], 3),
        "median": round(statistics.median(ordered), 3),
        "p95": round(ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))], 3),
    }


def calibrate(
    queries: Floats, documents: Floats, data: Dataset, query_ids: list[str], doc_ids: list[str]
) -> dict[str, Any]:
    """The floors and what they keep and drop; ``queries`` and ``documents`` are unit vectors in id order."""
    similarities = queries @ documents.T
    index = {doc: n for n, doc in enumerate(doc_ids)}
    gold_cosine: list[float] = []
    gold_ratio: list[float] = []
    off_cosine: list[float] = []
    off_ratio: list[float] = []
    unanswerable_top: list[float] = []
    for row, query in enumerate(query_ids):
        cosines = similarities[row]
        gold = {index[d] for d in data.qrels[query] if d in index}
        order = np.argsort(-cosines)
        top = float(cosines[order[0]])
        for n in order[:TOP_K]:
            value = float(cosines[n])
            (gold_cosine if n in gold else off_cosine).append(value)
            (gold_ratio if n in gold else off_ratio).append(value / top)
        without = [n for n in order[: TOP_K + len(gold)] if n not in gold]
        unanswerable_top.append(float(cosines[without[0]]))
    absolute = _quantile_floor(gold_cosine, KEEP)
    relative = _quantile_floor(gold_ratio, KEEP)
    return {
        "top_k": TOP_K,
        "keep_target": KEEP,
        "absolute_floor": absolute,
        "relative_floor": relative,
        "relevant_in_top_k": len(gold_cosine),
        "irrelevant_in_top_k": len(off_cosine),
        "relevant_cosine": _summary(gold_cosine),
        "irrelevant_cosine": _summary(off_cosine),
        "unanswerable_top_cosine": _summary(unanswerable_top),
        "at_absolute": {
            "relevant_kept": _share([c >= absolute for c in gold_cosine]),
            "irrelevant_dropped": _share([c < absolute for c in off_cosine]),
            "unanswerable_declined": _share([c < absolute for c in unanswerable_top]),
        },
        "at_relative": {
            "relevant_kept": _share([r >= relative for r in gold_ratio]),
            "irrelevant_dropped": _share([r < relative for r in off_ratio]),
        },
        "at_both": {
            "relevant_kept": _share(
                [c >= absolute and r >= relative for c, r in zip(gold_cosine, gold_ratio, strict=True)]
            ),
            "irrelevant_dropped": _share(
                [c < absolute or r < relative for c, r in zip(off_cosine, off_ratio, strict=True)]
            ),
        },
        "at_product_floors": _at_floors(gold_cosine, gold_ratio, off_cosine, off_ratio, unanswerable_top),
        "declined_at": {
            str(floor): _share([c < floor for c in unanswerable_top]) for floor in (0.2, 0.25, 0.3, 0.35, 0.4, 0.45)
        },
        "relevant_kept_at": {
            str(floor): _share([c >= floor for c in gold_cosine]) for floor in (0.2, 0.25, 0.3, 0.35, 0.4, 0.45)
        },
    }


def _at_floors(
    gold_cosine: list[float],
    gold_ratio: list[float],
    off_cosine: list[float],
    off_ratio: list[float],
    unanswerable_top: list[float],
) -> dict[str, float]:
    """What the floors kappi applies (:mod:`kappi.chat.grounding`) keep, drop and decline here."""
    from kappi.chat.grounding import ABSOLUTE_FLOORS, RELATIVE_FLOOR

    absolute, relative = ABSOLUTE_FLOORS[MODEL], RELATIVE_FLOOR
    return {
        "absolute": absolute,
        "relative": relative,
        "relevant_kept": _share(
            [c >= absolute and r >= relative for c, r in zip(gold_cosine, gold_ratio, strict=True)]
        ),
        "irrelevant_dropped": _share(
            [c < absolute or r < relative for c, r in zip(off_cosine, off_ratio, strict=True)]
        ),
        "unanswerable_declined": _share([c < absolute for c in unanswerable_top]),
    }


def measure(*, full: bool, data_folder: Path = DEFAULT_DATA) -> dict[str, Any]:
    from common.embedders.local import LocalEmbedder

    data = load_dataset(data_folder)
    if not full:
        data = quick_subset(data)
    embedder = LocalEmbedder(threads=1, batch_size=8)
    started = time.perf_counter()
    doc_ids = list(data.corpus)
    documents = embedder.embed_sync([f"{title} {text}" for title, text in data.corpus.values()])
    query_ids = list(data.queries)
    queries = np.stack([embedder.embed_sync([data.queries[q]])[0] for q in query_ids])
    result = calibrate(_unit(queries), _unit(documents), data, query_ids, doc_ids)
    result.update(
        model=MODEL,
        queries=len(query_ids),
        documents=len(doc_ids),
        embed_seconds=round(time.perf_counter() - started, 1),
        full=full,
    )
    return result


def _unit(vectors: Floats) -> Floats:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    unit: Floats = vectors / np.maximum(norms, 1e-12)
    return unit


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--full", action="store_true", help="the whole corpus and every test query")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--out", type=Path, help="also write the result as JSON here")
    args = parser.parse_args(argv)
    pin_one_core()
    result = measure(full=args.full, data_folder=args.data)
    text = json.dumps(result, indent=2)
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
