"""Retrieval quality through the whole ingestion pipeline: SciFact nDCG@10, chunked in pgvector vs exact cosine.

Run from the repository root::

    python -m bench.scifact_bench [--quick] [--data ../shared/data/scifact] [--out result.json]

Every corpus document (title, blank line, abstract) goes through the embedding worker's path as a text upload:
``parse`` (``DocumentType.TEXT``), ``chunk`` with the default config (250 tokens, 25 overlap, counted by the
local tokenizer), ``embed_documents`` per document (all-MiniLM-L6-v2 on onnxruntime), and the worker's records
written with ``delete_document`` + ``upsert`` into pgvector, the production default store, on an embedded
PostgreSQL started in a temporary folder and migrated like production. Each test query is embedded with
``embed_query``; ``search`` returns the top ``--k`` chunks through pgvector's HNSW index and a document scores
its best chunk (max pooling). The reference is exact cosine between the same query vectors and whole-document
embeddings ("title abstract", truncated to the model's 256-token window) from the same model in the same run;
the published figure for it is 0.649 on the full corpus. Target: pipeline >= 0.98x exact.

nDCG@10 is computed here, as trec_eval's ``ndcg_cut_10`` (BEIR's figure): graded gains from the qrels, a
``log2(rank + 1)`` discount, the ideal DCG from the query's qrels; averaged over every test query with qrels.
``--quick`` keeps 100 test queries and a corpus of their relevant documents plus 1,000 distractors (seeded);
the full run embeds the whole corpus twice (chunks, then whole documents): about 25 minutes on one core.
The data is evaluation-only (CC BY-NC) and never shipped.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import random
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.report import SummaryRow, pin_one_core

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from common.embedders.local import LocalEmbedder
    from common.vectors.pgvector import PgVectorStore

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "scifact"
TARGET_VS_EXACT = 0.98
REFERENCE_EXACT_NDCG = 0.649
COLLECTION = "ScifactBench"
NAMESPACE = uuid.UUID("9d2f6f3e-71c4-4b8a-a0f3-3c1e5d8b7a24")
QUICK_QUERIES = 100
QUICK_DISTRACTORS = 1000
SEED = 13

Qrels = dict[str, dict[str, int]]
"""Query id -> {document id: graded relevance}."""
Ranking = dict[str, list[str]]
"""Query id -> document ids, best first."""


@dataclass(frozen=True)
class Dataset:
    corpus: dict[str, tuple[str, str]]
    queries: dict[str, str]
    qrels: Qrels


def load_corpus(folder: Path) -> dict[str, tuple[str, str]]:
    """Document id -> (title, abstract), in file order."""
    corpus: dict[str, tuple[str, str]] = {}
    with (folder / "corpus.jsonl").open(encoding="utf-8") as lines:
        for line in lines:
            record = json.loads(line)
            corpus[record["_id"]] = (record["title"].strip(), record["text"].strip())
    return corpus


def load_dataset(folder: Path) -> Dataset:
    """The corpus, the test queries that have qrels, and those qrels."""
    qrels: Qrels = {}
    with (folder / "qrels" / "test.tsv").open(encoding="utf-8") as lines:
        next(lines)  # header
        for line in lines:
            query_id, doc_id, score = line.rstrip("\n").split("\t")
            qrels.setdefault(query_id, {})[doc_id] = int(score)
    queries: dict[str, str] = {}
    with (folder / "queries.jsonl").open(encoding="utf-8") as lines:
        for line in lines:
            query = json.loads(line)
            if query["_id"] in qrels:
                queries[query["_id"]] = query["text"]
    return Dataset(load_corpus(folder), queries, qrels)


def quick_subset(data: Dataset, queries: int = QUICK_QUERIES, distractors: int = QUICK_DISTRACTORS) -> Dataset:
    """The first ``queries`` test queries, their relevant documents and ``distractors`` seeded others."""
    kept = dict(list(data.queries.items())[:queries])
    qrels = {q: data.qrels[q] for q in kept}
    relevant = {doc for judged in qrels.values() for doc in judged if doc in data.corpus}
    others = sorted(set(data.corpus) - relevant)
    chosen = relevant | set(random.Random(SEED).sample(others, min(distractors, len(others))))
    return Dataset({d: text for d, text in data.corpus.items() if d in chosen}, kept, qrels)


def ndcg_at_k(ranking: Ranking, qrels: Qrels, k: int = 10) -> float:
    """Mean nDCG@k over the queries in ``qrels`` (a query missing from ``ranking`` scores 0)."""
    scores = []
    for query_id, judged in qrels.items():
        ranked = ranking.get(query_id, [])[:k]
        dcg = sum(judged.get(doc, 0) / math.log2(position + 2) for position, doc in enumerate(ranked))
        ideal = sorted(judged.values(), reverse=True)[:k]
        idcg = sum(gain / math.log2(position + 2) for position, gain in enumerate(ideal))
        scores.append(dcg / idcg if idcg > 0 else 0.0)
    return sum(scores) / len(scores) if scores else 0.0


def recall_at_k(ranking: Ranking, qrels: Qrels, k: int) -> float:
    """Mean share of each query's relevant documents found in its top ``k``."""
    scores = []
    for query_id, judged in qrels.items():
        relevant = {doc for doc, grade in judged.items() if grade > 0}
        if relevant:
            scores.append(len(relevant & set(ranking.get(query_id, [])[:k])) / len(relevant))
    return sum(scores) / len(scores) if scores else 0.0


def max_pooled(hits: Sequence[tuple[str, float]]) -> list[str]:
    """Documents ranked by their best chunk's score (ties by document id): chunk hits -> document ranking."""
    best: dict[str, float] = {}
    for document, score in hits:
        if score > best.get(document, -math.inf):
            best[document] = score
    return sorted(best, key=lambda document: (-best[document], document))


def run(quick: bool) -> dict[str, Any]:
    """The benchmark on the quick subset or the full corpus; the runner's entry point."""
    return measure(quick=quick)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="100 queries, their documents + 1,000 distractors")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="SciFact folder (BEIR layout)")
    parser.add_argument("--k", type=int, default=100, help="chunks retrieved per query before max pooling")
    parser.add_argument("--out", type=Path, help="write the JSON result here instead of stdout")
    args = parser.parse_args(argv)
    text = json.dumps(measure(quick=args.quick, data=args.data, k=args.k), indent=2)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    else:
        print(text)
    return 0


def measure(*, quick: bool, data: Path = DEFAULT_DATA, k: int = 100) -> dict[str, Any]:
    pin_one_core()
    from common.db import migrate
    from common.db.embedded import EmbeddedPostgres, ensure_database, with_database

    dataset = load_dataset(data)
    if quick:
        dataset = quick_subset(dataset)
    with tempfile.TemporaryDirectory(prefix="ragu-bench-pg-") as folder:
        server = EmbeddedPostgres(Path(folder))
        try:
            admin_url = server.start()
            asyncio.run(ensure_database(admin_url, "ragu_bench"))
            url = with_database(admin_url, "ragu_bench")
            migrate.upgrade(url)  # alembic runs its own event loop: before ours starts
            result = asyncio.run(_measure(dataset, url, k))
        finally:
            server.stop()
    result["mode"] = "quick" if quick else "full"
    return result


async def _measure(data: Dataset, url: str, k: int) -> dict[str, Any]:
    import numpy as np

    from common.embedders.local import LocalEmbedder
    from common.vectors.pgvector import PgVectorStore, open_pool

    embedder = LocalEmbedder(threads=1)
    pool = await open_pool(url, max_size=2)
    try:
        store = PgVectorStore(pool)
        ingest = await _ingest(data, store, embedder)
        query_ids = list(data.queries)
        started = time.perf_counter()
        query_vectors = np.stack([await embedder.embed_query(data.queries[q]) for q in query_ids])
        query_seconds = time.perf_counter() - started
        pipeline, search_ms = await _pipeline_ranking(store, ingest.document_of, query_ids, query_vectors, k)
        exact, exact_seconds = await _exact_ranking(data, embedder, query_ids, query_vectors)
    finally:
        await pool.close()
        await embedder.aclose()
    return _result(
        data=data,
        ingest=ingest,
        pipeline=pipeline,
        exact=exact,
        search_ms=search_ms,
        query_seconds=query_seconds,
        exact_seconds=exact_seconds,
        k=k,
    )


@dataclass
class Ingested:
    document_of: dict[str, str]
    """Chunk payload ``document_id`` -> SciFact id."""
    chunks: int
    tokens: int
    cpu_seconds: float
    wall_seconds: float


async def _ingest(data: Dataset, store: PgVectorStore, embedder: LocalEmbedder) -> Ingested:
    """Every document through the worker's stages, one document at a time, as the worker takes them."""
    import hashlib

    from bench.ingest_bench import worker_records
    from chonkit.document.chunking import chunk, default_chunk_config
    from chonkit.document.parsing import DocumentType, ParseConfig, parse
    from chonkit.embedding.worker import EMBED_BATCH, WRITE_BATCH
    from schemas.models import Identity

    collection_id = uuid.uuid5(NAMESPACE, COLLECTION)
    identity = Identity(
        collection_id=str(collection_id),
        name=COLLECTION,
        model=embedder.model,
        vectorProvider=store.provider,
        embeddingProvider=embedder.provider,
    )
    await store.create_collection(identity, embedder.dimension)
    parse_config, chunk_config = ParseConfig(), default_chunk_config()
    document_of: dict[str, str] = {}
    chunks = tokens = 0
    cpu, wall = time.process_time(), time.perf_counter()
    for scifact_id, (title, abstract) in data.corpus.items():
        upload = f"{title}\n\n{abstract}".encode()
        document_id = uuid.uuid5(NAMESPACE, scifact_id)
        document_of[str(document_id)] = scifact_id
        parsed = await asyncio.to_thread(parse, upload, DocumentType.TEXT, parse_config)
        result = await asyncio.to_thread(chunk, parsed, chunk_config, embedder, max_tokens=embedder.max_tokens)
        if result.oversized:
            raise RuntimeError(f"document {scifact_id}: the default chunk config produced oversized chunks")
        vectors: list[list[float]] = []
        for start in range(0, len(result.chunks), EMBED_BATCH):
            batch = result.chunks[start : start + EMBED_BATCH]
            vectors.extend((await embedder.embed_documents([c.text for c in batch])).tolist())
        records = worker_records(
            collection_id=collection_id,
            identity=identity,
            document_id=document_id,
            document_name=f"scifact-{scifact_id}.txt",
            document_sha256=hashlib.sha256(upload).hexdigest(),
            result=result,
            vectors=vectors,
        )
        await store.delete_document(COLLECTION, str(document_id))
        for start in range(0, len(records), WRITE_BATCH):
            await store.upsert(COLLECTION, records[start : start + WRITE_BATCH])
        chunks += len(result.chunks)
        tokens += sum(c.token_count for c in result.chunks)
    return Ingested(document_of, chunks, tokens, time.process_time() - cpu, time.perf_counter() - wall)


async def _pipeline_ranking(
    store: PgVectorStore, document_of: dict[str, str], query_ids: list[str], query_vectors: npt.NDArray[Any], k: int
) -> tuple[Ranking, list[float]]:
    ranking: Ranking = {}
    search_ms: list[float] = []
    for query_id, vector in zip(query_ids, query_vectors, strict=True):
        started = time.perf_counter()
        hits = await store.search(COLLECTION, vector, limit=k, properties=["document_id"])
        search_ms.append((time.perf_counter() - started) * 1000)
        ranking[query_id] = max_pooled([(document_of[hit.payload["document_id"]], hit.score) for hit in hits])
    return ranking, search_ms


async def _exact_ranking(
    data: Dataset, embedder: LocalEmbedder, query_ids: list[str], query_vectors: npt.NDArray[np.float32]
) -> tuple[Ranking, float]:
    """Whole documents, exact cosine (unit vectors: a dot product), top 100 per query."""
    import numpy as np

    doc_ids = list(data.corpus)
    started = time.perf_counter()
    documents = await embedder.embed_documents([f"{title} {abstract}" for title, abstract in data.corpus.values()])
    seconds = time.perf_counter() - started
    scores = query_vectors @ documents.T
    top = np.argsort(-scores, axis=1, kind="stable")[:, :100]
    return {query_id: [doc_ids[j] for j in top[i]] for i, query_id in enumerate(query_ids)}, seconds


def _result(
    *,
    data: Dataset,
    ingest: Ingested,
    pipeline: Ranking,
    exact: Ranking,
    search_ms: list[float],
    query_seconds: float,
    exact_seconds: float,
    k: int,
) -> dict[str, Any]:
    from importlib.metadata import version

    pipeline_ndcg = ndcg_at_k(pipeline, data.qrels)
    exact_ndcg = ndcg_at_k(exact, data.qrels)
    ratio = round(pipeline_ndcg / exact_ndcg, 4) if exact_ndcg else 0.0
    recall = {
        (name, cut): round(recall_at_k(ranking, data.qrels, cut), 4)
        for name, ranking in (("pipeline", pipeline), ("exact", exact))
        for cut in (10, 100)
    }
    summary = [
        SummaryRow(
            metric="nDCG@10, pipeline (pgvector, max-pooled chunks) vs exact whole-document cosine",
            ours=round(pipeline_ndcg, 4),
            peer=round(exact_ndcg, 4),
            value=ratio,
            target=TARGET_VS_EXACT,
        ),
        SummaryRow(
            metric="Recall@100, pipeline vs exact",
            ours=recall["pipeline", 100],
            peer=recall["exact", 100],
            value=round(recall["pipeline", 100] / max(recall["exact", 100], 1e-9), 4),
            target=None,
        ),
    ]
    return {
        "benchmark": "scifact_retrieval",
        "corpus_docs": len(data.corpus),
        "test_queries": len(data.queries),
        "k_chunks": k,
        "metric": "nDCG@10 as trec_eval ndcg_cut_10 (graded gains, log2 discount, ideal from qrels), own code",
        "pipeline": {
            "ndcg_at_10": round(pipeline_ndcg, 4),
            "recall_at_10": recall["pipeline", 10],
            "recall_at_100": recall["pipeline", 100],
            "chunks": ingest.chunks,
            "chunks_per_document": round(ingest.chunks / len(data.corpus), 3),
            "tokens_embedded": ingest.tokens,
            "ingest_cpu_seconds": round(ingest.cpu_seconds, 1),
            "ingest_wall_seconds": round(ingest.wall_seconds, 1),
            "documents_per_s": round(len(data.corpus) / ingest.wall_seconds, 2),
            "search_ms_p50": round(statistics.median(search_ms), 2),
            "search_ms_max": round(max(search_ms), 2),
            "query_embed_ms_mean": round(query_seconds * 1000 / len(data.queries), 2),
        },
        "exact": {
            "ndcg_at_10": round(exact_ndcg, 4),
            "recall_at_10": recall["exact", 10],
            "recall_at_100": recall["exact", 100],
            "embed_seconds": round(exact_seconds, 1),
            "reference_full_corpus_ndcg_at_10": REFERENCE_EXACT_NDCG,
        },
        "pipeline_vs_exact": ratio,
        "versions": {"python": sys.version.split()[0], **{p: version(p) for p in ("onnxruntime", "asyncpg")}},
        "targets": {"pipeline_vs_exact": TARGET_VS_EXACT},
        "meets_targets": ratio >= TARGET_VS_EXACT,
        "summary": summary,
    }


if __name__ == "__main__":
    sys.exit(main())
