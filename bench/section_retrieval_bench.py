"""Is the chunk that states a fact among its collection's top 3? Chunk configs compared on the answer bench's corpus.

Run from the repository root::

    nice python -m bench.section_retrieval_bench [--out result.json]

The answer bench (``bench/answer_bench.py``) scores answers; this one scores only what retrieval hands the answer:
for each of its answerable questions, whether a chunk of a gold document that states every fact of the question
is among the top :data:`TOP_K` hybrid hits of the gold document's collection (the agent's ``top_k`` there). Each
chunk config of :func:`_configs` chunks the same parsed pages (chonkit's parser, the local model's tokenizer);
chunks are embedded by the local model (all-MiniLM-L6-v2) and searched in memory: the dense leg by exact cosine,
the lexical leg by BM25 over the product's own analyser and weights (``common.vectors.lexical``: the terms, k1,
b and Lucene IDF that pgvector's SQL uses), both fused by the product's own ``common.vectors.fusion.fuse`` at the
default dense weight and leg depth. The peer is the config new documents had before contextual chunk headers
(``fixed`` without ``repeat_headings`` and ``snap_to_headings``); ``structure`` is measured beside them, and the
chunk and token counts say what each costs to embed. ``--quick`` is the same run (it takes about a minute).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.answer_bench import CORPUS, fetch_corpus, load_questions, states_facts
from bench.report import SummaryRow, pin_one_core

TOP_K = 3
"""Hits per collection, as the answer bench's agents take them."""


def _configs() -> dict[str, Any]:
    from chonkit.document.chunking import FixedChunking, StructureChunking, default_chunk_config

    return {
        "fixed, before (no headers)": FixedChunking(repeat_headings=False, snap_to_headings=False),
        "fixed + repeat_headings": FixedChunking(snap_to_headings=False),
        "fixed + snap_to_headings": FixedChunking(repeat_headings=False),
        "fixed + both (the default)": default_chunk_config(),
        "structure": StructureChunking(),
    }


PEER = "fixed, before (no headers)"
OURS = "fixed + both (the default)"


class _Collection:
    """One collection's chunks, their vectors and an inverted index, searched as hybrid in memory."""

    def __init__(self, chunks: list[tuple[str, str]], embedder: Any) -> None:
        import numpy as np

        from common.vectors.lexical import bm25_weights, document_terms

        self.chunks = chunks
        self.vectors = np.asarray(embedder.embed_sync([text for _, text in chunks]))
        terms = [document_terms(text) for _, text in chunks]
        mean_length = sum(t.length for t in terms) / max(len(terms), 1)
        self.postings: dict[int, list[tuple[int, float]]] = {}
        for n, t in enumerate(terms):
            for term, weight in zip(t.ids, bm25_weights(t.tfs, t.length, mean_length), strict=True):
                self.postings.setdefault(term, []).append((n, weight))

    def search(self, query: str, embedder: Any) -> list[int]:
        import numpy as np

        from common.vectors.base import DEFAULT_DENSE_WEIGHT, SearchHit
        from common.vectors.fusion import fuse, leg_depth
        from common.vectors.lexical import query_terms

        depth = leg_depth(TOP_K)
        similarities = self.vectors @ np.asarray(embedder.embed_sync([query]))[0]
        dense = [
            SearchHit(id=str(n), score=float(similarities[n]), distance=1.0 - float(similarities[n]), payload={})
            for n in np.argsort(-similarities, kind="stable")[:depth]
        ]
        scores: dict[int, float] = {}
        asked = query_terms(query)
        for term, tf in zip(asked.ids, asked.tfs, strict=True):
            found = self.postings.get(term, [])
            idf = math.log(1 + (len(self.chunks) - len(found) + 0.5) / (len(found) + 0.5))
            for n, weight in found:
                scores[n] = scores.get(n, 0.0) + tf * idf * weight
        ranked = sorted(scores, key=lambda n: (-scores[n], str(n)))[:depth]
        lexical = [
            SearchHit(id=str(n), score=scores[n], distance=1.0 - float(similarities[n]), payload={}) for n in ranked
        ]
        hits = fuse(dense, lexical, dense_weight=DEFAULT_DENSE_WEIGHT, limit=TOP_K)
        return [int(hit.id) for hit in hits]


def measure() -> dict[str, Any]:
    """Every config of :func:`_configs` over the corpus: chunks, tokens, and which questions find their fact."""
    from chonkit.document.chunking import chunk
    from chonkit.document.parsing import DocumentType, ParseConfig
    from chonkit.document.parsing.parser import parse
    from common.embedders.local import LocalEmbedder

    embedder = LocalEmbedder()
    pages = fetch_corpus()
    parsed = {p.name: parse(p.data, DocumentType.HTML, ParseConfig()) for p in pages}
    collection_of = {p.name: p.collection for p in pages}
    questions = [q for q in load_questions() if q.answerable]
    results: dict[str, Any] = {}
    for name, config in _configs().items():
        chunked = {page: chunk(doc, config, embedder, max_tokens=embedder.max_tokens) for page, doc in parsed.items()}
        collections = {
            package.collection: _Collection(
                [(page, c.text) for page in package.pages.values() for c in chunked[page].chunks], embedder
            )
            for package in CORPUS
        }
        found: dict[str, bool] = {}
        for question in questions:
            collection = collections[collection_of[question.gold[0]]]
            top = collection.search(question.question, embedder)
            found[question.id] = any(
                collection.chunks[n][0] in question.gold and states_facts(collection.chunks[n][1], question.facts)
                for n in top
            )
        results[name] = {
            "chunks": sum(len(r.chunks) for r in chunked.values()),
            "tokens": sum(c.token_count for r in chunked.values() for c in r.chunks),
            "found": sum(found.values()),
            "questions": len(found),
            "missed": sorted(q for q, hit in found.items() if not hit),
        }
    ours, peer = results[OURS], results[PEER]
    summary: list[SummaryRow] = [
        SummaryRow(
            metric="fact chunk in top 3, default vs before",
            ours=ours["found"],
            peer=peer["found"],
            value=round(ours["found"] / max(peer["found"], 1), 3),
            target=None,
            higher_is_better=True,
        ),
        SummaryRow(
            metric="tokens embedded, default vs before",
            ours=ours["tokens"],
            peer=peer["tokens"],
            value=round(ours["tokens"] / max(peer["tokens"], 1), 3),
            target=None,
            higher_is_better=False,
        ),
    ]
    return {"top_k": TOP_K, "configs": results, "summary": summary}


def run(quick: bool) -> dict[str, Any]:
    """The runner's entry (``python -m bench``); a quick run is the whole run."""
    del quick
    return measure()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="the same run (kept for the runner)")
    parser.add_argument("--out", type=Path, help="write the JSON result here instead of stdout")
    args = parser.parse_args(argv)
    pin_one_core()
    result = measure()
    for name, figures in result["configs"].items():
        print(
            f"{name:28} fact chunk in top {TOP_K}: {figures['found']}/{figures['questions']}  "
            f"chunks {figures['chunks']}  tokens {figures['tokens']}  missed {', '.join(figures['missed'])}",
            file=sys.stderr,
        )
    encoded = json.dumps(result, indent=2)
    if args.out:
        args.out.write_text(encoded + "\n", encoding="utf-8")
    else:
        print(encoded)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
