"""What a question's hits cost on their way to citations since passages and citations share one struct (issue #32
item 4), against the field-by-field copies they replaced, paired in one process.

Run from the repository root::

    python -m bench.citation_bench [--hits 50] [--repeats 2000] [--rounds 9] [--out FILE]

Both sides turn the same ``--hits`` search hits (payloads as chonkit writes them, one collection, dense) into
passages and then citations, as a question does after its search: *after* calls kappi's own
:func:`~kappi.retrieval.service._chunk` and :func:`~kappi.chat.answering.citations_of`; *before* is the code they
replaced — a flat struct of a passage's every field and a citation built by naming 13 of them. Rounds alternate
(ABBA); the figure is the CPU (``time.process_time``) per hit, median over rounds, and the ratio after / before.
Both sides are microseconds per hit against milliseconds per question: the ratio says whether the shared struct
costs the hot path anything, not what a question costs.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import msgspec

from common.vectors.base import ChunkFields, Legs, SearchHit, read_chunk
from kappi.agent.models import Assignment
from kappi.chat.answering import citations_of
from kappi.chat.models import Citation
from kappi.retrieval.service import Retrieval, _chunk


class _FlatChunk(msgspec.Struct, frozen=True, kw_only=True):
    """The passage before the shared struct: every field declared on it."""

    vector_provider: str
    collection: str
    instruction: str
    document_id: str
    document_name: str | None
    page_start: int | None
    page_end: int | None
    text: str
    context: str
    score: float
    distance: float
    legs: Legs | None = None
    rerank_score: float | None = None
    ocr: bool = False
    chunk_index: int | None = None
    char_start: int | None = None
    char_end: int | None = None


def _flat_chunk(assignment: Assignment, hit: SearchHit, found: ChunkFields) -> _FlatChunk:
    return _FlatChunk(
        vector_provider=assignment.vector_provider,
        collection=assignment.name,
        instruction=assignment.instruction,
        document_id=found.document_id,
        document_name=found.document_name,
        page_start=found.page_start,
        page_end=found.page_end,
        chunk_index=found.chunk_index,
        char_start=found.char_start,
        char_end=found.char_end,
        text=found.content,
        context=found.parent_content or found.content,
        score=hit.score,
        distance=hit.distance,
        legs=hit.legs,
        ocr=found.ocr,
    )


def _named_citations(chunks: list[_FlatChunk]) -> list[Citation]:
    return [
        Citation(
            citation=n,
            collection=c.collection,
            vector_provider=c.vector_provider,
            document_id=c.document_id,
            document_name=c.document_name,
            page_start=c.page_start,
            page_end=c.page_end,
            text=c.text,
            score=round(c.score, 6),
            legs=c.legs,
            rerank_score=c.rerank_score,
            ocr=c.ocr,
            distance=round(c.distance, 6),
            chunk_index=c.chunk_index,
        )
        for n, c in enumerate(chunks, start=1)
    ]


def _before(assignment: Assignment, hits: list[SearchHit]) -> list[Citation]:
    return _named_citations([_flat_chunk(assignment, hit, read_chunk(hit.payload)) for hit in hits])


def _after(assignment: Assignment, hits: list[SearchHit]) -> list[Citation]:
    chunks = [_chunk(assignment, hit, read_chunk(hit.payload)) for hit in hits]
    return citations_of(Retrieval(chunks=chunks, collections_searched=1, embed_ms=0.0, search_ms=0.0))


Side = Callable[[Assignment, list[SearchHit]], list[Citation]]
SIDES: dict[str, Side] = {"before": _before, "after": _after}


def _hits(count: int) -> list[SearchHit]:
    """Hits as a dense search of chonkit's chunks returns them (kappi's passage properties)."""
    return [
        SearchHit(
            id=f"00000000-0000-0000-0000-{n:012d}",
            score=0.9 - n / 1000,
            distance=0.1 + n / 1000,
            payload={
                "content": f"Section {n}. Employees accrue vacation days monthly; see the handbook's table {n}.",
                "document_id": f"doc-{n % 7}",
                "document_name": f"handbook-{n % 7}.pdf",
                "page_start": n,
                "page_end": n + 1,
                "chunk_index": n,
                "char_start": n * 800,
                "char_end": n * 800 + 900,
                "ocr": False,
                "model": "bge-small",
                "embeddingProvider": "local",
            },
        )
        for n in range(count)
    ]


def _cpu_per_hit(side: Side, assignment: Assignment, hits: list[SearchHit], repeats: int) -> float:
    started = time.process_time()
    for _ in range(repeats):
        side(assignment, hits)
    return (time.process_time() - started) * 1e6 / (repeats * len(hits))


def measure(hits: int, repeats: int, rounds: int) -> dict[str, Any]:
    """Both sides' CPU per hit, median over ABBA rounds; they must give equal citations first."""
    assignment = Assignment(
        vector_provider="pgvector",
        name="handbook",
        collection_id="c1",
        top_k=hits,
        max_distance=None,
        instruction="HR policies for all staff",
        created_at=datetime.now(UTC),
    )
    found = _hits(hits)
    assert _before(assignment, found) == _after(assignment, found), "the two sides cite differently"
    samples: dict[str, list[float]] = {name: [] for name in SIDES}
    order = list(SIDES)
    for _ in range(rounds):
        for name in order:
            samples[name].append(_cpu_per_hit(SIDES[name], assignment, found, repeats))
        order.reverse()
    medians = {name: statistics.median(values) for name, values in samples.items()}
    return {
        "hits": hits,
        "repeats_per_round": repeats,
        "rounds": rounds,
        "cpu_us_per_hit": {name: round(value, 3) for name, value in medians.items()},
        "ratio_after_to_before": round(medians["after"] / medians["before"], 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--hits", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--out")
    args = parser.parse_args()
    text = json.dumps(measure(args.hits, args.repeats, args.rounds), indent=2)
    print(text)
    if args.out:
        with open(args.out, "w") as out:
            out.write(text + "\n")


if __name__ == "__main__":
    main()
