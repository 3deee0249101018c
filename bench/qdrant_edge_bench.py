"""The embedded Qdrant: qdrant-client's local mode against Qdrant Edge (``qdrant-edge-py``), same data, same run.

Run from the repository root::

    nice python -m bench.qdrant_edge_bench [--quick] [--data ../shared/data/scifact] [--out result.json]

Both engines sit behind the same adapter, :class:`~common.vectors.qdrant.QdrantStore`: local mode through
``AsyncQdrantClient(path=...)``, Edge through :class:`~common.vectors.qdrant_edge.EdgeClient`. So every figure is
the adapter's call as chonkit and kappi make it (``VectorStore.search``), with the query already embedded: this
is the store's share of a search, the part the two engines differ in.

**Data**: SciFact's ``--quick`` subset as ``bench/scifact_bench.py`` makes it (100 test queries, their relevant
documents and 1,000 seeded distractors), each document chunked by the default config and embedded by the local
model (all-MiniLM-L6-v2); the chunk and query vectors are cached in ``bench/results/qdrant_edge_bench/`` keyed by
a hash of the texts. The chunk records are the embedding worker's own (``chunk_records``).

**Measured**, per engine, on a collection of its own in a temporary folder: ingest (``upsert`` in the worker's
batches, the lexical analysis included; and Edge's reopen of what it wrote), resident memory grown by the
ingest (each engine ingests in a child process of its own, so neither's allocations count against the
other), then every query in every mode (``dense``, ``lexical``, ``hybrid``, 100 chunks; plus hybrid for an
agent's 10), the engines interleaved query by query, with p50 / p95 per mode; quality as nDCG@10 of the
max-pooled document ranking; and fidelity: whether each query's hits (ids in order) are the same in both.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.report import SummaryRow, machine, pin_one_core
from bench.scifact_bench import (
    DEFAULT_DATA,
    NAMESPACE,
    Ranking,
    load_dataset,
    max_pooled,
    ndcg_at_k,
    quick_subset,
)

if TYPE_CHECKING:
    from common.vectors.base import RetrievalMode, Search, VectorRecord, VectorStore
    from schemas.models import Identity

CACHE_DIR = Path(__file__).resolve().parent / "results" / "qdrant_edge_bench"
ENGINES = ("local", "edge")
"""``local``: qdrant-client's local mode; ``edge``: Qdrant Edge (qdrant-edge-py)."""
K = 100
SMALL_LIMIT = 10
WARM_UP_QUERIES = 5
COLLECTION = "Scifact_embedded"
TARGET_HYBRID_VS_DENSE = 1.5
"""Issue #30: the embedded Qdrant's hybrid p50 at most 1.5x its dense p50."""


@dataclass(frozen=True)
class Corpus:
    """What both engines are given: the worker's records per document, and the embedded queries."""

    documents: list[list[VectorRecord]]
    document_of: dict[str, str]
    """Chunk payload ``document_id`` -> SciFact id."""
    queries: dict[str, tuple[str, list[float]]]
    """Query id -> (text, vector)."""
    qrels: dict[str, dict[str, int]]
    identity: Identity


def build_corpus(data_folder: Path, *, quick: bool) -> Corpus:
    """Chunk and embed (or read the cached vectors of) SciFact's quick subset or its whole corpus."""
    import numpy as np

    from chonkit.document.chunking import chunk, default_chunk_config
    from chonkit.document.parsing import DocumentType, ParseConfig
    from chonkit.document.parsing.parser import parse
    from chonkit.ingest.pipeline import chunk_records
    from common.embedders.registry import default_registry
    from schemas.models import Identity

    dataset = load_dataset(data_folder)
    if quick:
        dataset = quick_subset(dataset)
    embedders = default_registry(local_threads=1)
    model = "all-MiniLM-L6-v2"
    embedder = embedders.get("local", model)
    parse_config, chunk_config = ParseConfig(), default_chunk_config()
    uploads, results = [], []
    for title, abstract in dataset.corpus.values():
        upload = f"{title}\n\n{abstract}".encode()
        parsed = parse(upload, DocumentType.TEXT, parse_config)
        uploads.append(upload)
        results.append(chunk(parsed, chunk_config, embedder, max_tokens=embedder.max_tokens))
    texts = [c.text for result in results for c in result.chunks]
    query_texts = list(dataset.queries.values())
    chunk_vectors = _cached_vectors(texts, model, lambda: _embed(embedder, texts, query=False))
    query_vectors = _cached_vectors(query_texts, model, lambda: _embed(embedder, query_texts, query=True))
    asyncio.run(embedders.aclose())
    identity = Identity(
        collection_id=str(uuid.uuid5(NAMESPACE, COLLECTION)),
        name=COLLECTION,
        model=model,
        vectorProvider="qdrant",
        embeddingProvider="local",
    )
    documents, document_of, start = [], {}, 0
    for scifact_id, upload, result in zip(dataset.corpus, uploads, results, strict=True):
        document_id = uuid.uuid5(NAMESPACE, scifact_id)
        document_of[str(document_id)] = scifact_id
        vectors = chunk_vectors[start : start + len(result.chunks)].tolist()
        start += len(result.chunks)
        documents.append(
            chunk_records(
                collection_id=uuid.UUID(identity.collection_id),
                identity=identity,
                document_id=document_id,
                document_name=f"scifact-{scifact_id}.txt",
                document_sha256=hashlib.sha256(upload).hexdigest(),
                result=result,
                vectors=vectors,
            )
        )
    queries = {
        query_id: (text, np.asarray(vector).tolist())
        for (query_id, text), vector in zip(dataset.queries.items(), query_vectors, strict=True)
    }
    return Corpus(documents, document_of, queries, dataset.qrels, identity)


def _embed(embedder: Any, texts: Sequence[str], *, query: bool) -> Any:
    import numpy as np

    async def embed_all() -> Any:
        if query:
            return np.vstack([await embedder.embed_query(text) for text in texts])
        return np.vstack([await embedder.embed_documents(texts[i : i + 64]) for i in range(0, len(texts), 64)])

    return asyncio.run(embed_all())


def _cached_vectors(texts: Sequence[str], model: str, compute: Callable[[], Any]) -> Any:
    """The texts' vectors from :data:`CACHE_DIR` when model and texts are unchanged, else computed and stored."""
    import numpy as np

    key = hashlib.sha256(model.encode())
    for text in texts:
        key.update(hashlib.sha256(text.encode()).digest())
    path = CACHE_DIR / f"vectors-{len(texts)}-{key.hexdigest()[:16]}.npy"
    if path.exists():
        return np.load(path)
    vectors = np.asarray(compute(), dtype=np.float32)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.save(path, vectors)
    return vectors


def percentile(values: Sequence[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(share * (len(ordered) - 1))))]


def _rss_mib() -> float:
    """This process's resident memory now (``/proc/self/statm``), MiB."""
    with open("/proc/self/statm", encoding="ascii") as statm:
        pages = int(statm.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


# --- the engines ------------------------------------------------------------------------------------------------


async def open_store(engine: str, folder: Path) -> VectorStore:
    """The adapter over local mode or over Edge, on disk in ``folder`` (as ``open_vector_registry`` builds them)."""
    from qdrant_client import AsyncQdrantClient

    from common.vectors.qdrant import QdrantStore
    from common.vectors.qdrant_edge import open_edge_client

    await asyncio.to_thread(folder.mkdir, parents=True, exist_ok=True)
    if engine == "local":
        return QdrantStore(AsyncQdrantClient(path=str(folder)))
    return QdrantStore(await open_edge_client(folder))


async def ingest(store: VectorStore, corpus: Corpus) -> float:
    """Every document as the embedding worker writes it (``delete_document`` then ``upsert`` in its batches);
    returns the seconds taken."""
    from chonkit.ingest.pipeline import WRITE_BATCH

    dimension = len(corpus.documents[0][0].vector)
    await store.create_collection(corpus.identity, dimension)
    started = time.perf_counter()
    for document_id, records in zip(corpus.document_of, corpus.documents, strict=True):
        await store.delete_document(COLLECTION, document_id)
        for start in range(0, len(records), WRITE_BATCH):
            await store.upsert(COLLECTION, records[start : start + WRITE_BATCH])
    return time.perf_counter() - started


def memory_of(engine: str, corpus: Corpus) -> dict[str, float]:
    """Resident memory grown by opening the engine, ingesting the corpus and answering a few queries, in a child
    process of its own (forked: the corpus is already in memory, so only the engine's share grows)."""
    import multiprocessing

    context = multiprocessing.get_context("fork")
    parent, child = context.Pipe()
    process = context.Process(target=_memory_child, args=(engine, corpus, child))
    process.start()
    figures: dict[str, float] = parent.recv()
    process.join()
    return figures


def _memory_child(engine: str, corpus: Corpus, pipe: Any) -> None:
    async def measure() -> dict[str, float]:
        with tempfile.TemporaryDirectory(prefix=f"ragu-bench-{engine}-") as folder:
            before = _rss_mib()
            store = await open_store(engine, Path(folder))
            opened = _rss_mib()
            await ingest(store, corpus)
            for text, vector in list(corpus.queries.values())[:WARM_UP_QUERIES]:
                for mode in ("dense", "hybrid"):
                    await store.search(_search(text, vector, mode, K))
            after = _rss_mib()
            await store.aclose()
            return {"open_mib": opened - before, "ingested_mib": after - before}

    pipe.send(asyncio.run(measure()))


def _search(text: str, vector: list[float], mode: RetrievalMode, limit: int) -> Search:
    from common.vectors.base import Search

    properties = ("document_id", "content")
    return Search(name=COLLECTION, vector=vector, limit=limit, properties=properties, text=text, mode=mode)


SEARCHES: tuple[tuple[str, RetrievalMode, int], ...] = (
    ("dense", "dense", K),
    ("lexical", "lexical", K),
    ("hybrid", "hybrid", K),
    (f"hybrid_limit_{SMALL_LIMIT}", "hybrid", SMALL_LIMIT),
)


@dataclass
class Runs:
    """One engine's searches per label: milliseconds, hit ids per query, document rankings."""

    ms: dict[str, list[float]]
    hits: dict[str, dict[str, list[str]]]
    ranking: dict[str, Ranking]


async def search_all(stores: dict[str, VectorStore], corpus: Corpus) -> dict[str, Runs]:
    """Every query in every mode, the engines and modes interleaved query by query (after a warm-up)."""
    runs = {
        engine: Runs(
            ms={s[0]: [] for s in SEARCHES}, hits={s[0]: {} for s in SEARCHES}, ranking={s[0]: {} for s in SEARCHES}
        )
        for engine in stores
    }
    for text, vector in list(corpus.queries.values())[:WARM_UP_QUERIES]:
        for store in stores.values():
            for _, mode, limit in SEARCHES:
                await store.search(_search(text, vector, mode, limit))
    for query_id, (text, vector) in corpus.queries.items():
        for label, mode, limit in SEARCHES:
            for engine, store in stores.items():
                started = time.perf_counter()
                hits = await store.search(_search(text, vector, mode, limit))
                runs[engine].ms[label].append((time.perf_counter() - started) * 1000)
                runs[engine].hits[label][query_id] = [hit.id for hit in hits]
                pooled = ((corpus.document_of[hit.payload["document_id"]], hit.score) for hit in hits)
                runs[engine].ranking[label][query_id] = max_pooled(pooled)
    return runs


def fidelity(a: Runs, b: Runs) -> dict[str, dict[str, float]]:
    """Per search label: the share of queries whose hits (ids, in order) are the same in both engines, and the
    mean share of the first 10 hits both return."""
    figures = {}
    for label in a.hits:
        pairs = [(a.hits[label][q], b.hits[label][q]) for q in a.hits[label]]
        same = sum(x == y for x, y in pairs) / len(pairs)
        overlap = statistics.fmean(len(set(x[:10]) & set(y[:10])) / max(1, len(x[:10])) for x, y in pairs)
        figures[label] = {"identical_share": round(same, 4), "top10_overlap": round(overlap, 4)}
    return figures


# --- the run ----------------------------------------------------------------------------------------------------


def measure(*, quick: bool, data: Path = DEFAULT_DATA) -> dict[str, Any]:
    pin_one_core()
    corpus = build_corpus(data, quick=quick)
    memory = {engine: memory_of(engine, corpus) for engine in ENGINES}
    with tempfile.TemporaryDirectory(prefix="ragu-bench-qdrant-edge-") as folder:
        result = asyncio.run(_measure(corpus, Path(folder)))
    result["memory_mib"] = memory
    result["mode"] = "quick" if quick else "full"
    result["summary"] = summary(result)
    return result


async def _measure(corpus: Corpus, folder: Path) -> dict[str, Any]:
    stores = {engine: await open_store(engine, folder / engine) for engine in ENGINES}
    try:
        ingest_s = {engine: await ingest(store, corpus) for engine, store in stores.items()}
        runs = await search_all(stores, corpus)
    finally:
        for store in stores.values():
            await store.aclose()
    reopened = time.perf_counter()
    edge = await open_store("edge", folder / "edge")
    hits = await edge.search(_search(*next(iter(corpus.queries.values())), "hybrid", K))
    reopen_s = time.perf_counter() - reopened
    await edge.aclose()
    chunks = sum(len(records) for records in corpus.documents)
    return {
        "corpus": {"documents": len(corpus.documents), "chunks": chunks, "queries": len(corpus.queries)},
        "ingest_seconds": {engine: round(s, 3) for engine, s in ingest_s.items()},
        "ingest_chunks_per_s": {engine: round(chunks / s, 1) for engine, s in ingest_s.items()},
        "edge_reopen_and_first_search_s": round(reopen_s, 3),
        "edge_reopen_hits": len(hits),
        "latency_ms": {
            engine: {
                label: {"p50": round(percentile(ms, 0.5), 3), "p95": round(percentile(ms, 0.95), 3)}
                for label, ms in run.ms.items()
            }
            for engine, run in runs.items()
        },
        "ndcg_at_10": {
            engine: {label: round(ndcg_at_k(ranking, corpus.qrels), 4) for label, ranking in run.ranking.items()}
            for engine, run in runs.items()
        },
        "fidelity_edge_vs_local": fidelity(runs["edge"], runs["local"]),
        "machine": machine(),
        "versions": {package: version(package) for package in ("qdrant-client", "qdrant-edge-py")},
    }


def summary(result: dict[str, Any]) -> list[SummaryRow]:
    """The issue's bar (Edge's hybrid p50 within 1.5x its dense p50) and Edge against local mode, same run."""
    latency, ndcg = result["latency_ms"], result["ndcg_at_10"]
    rows: list[SummaryRow] = []
    for engine in ENGINES:
        hybrid, dense = latency[engine]["hybrid"]["p50"], latency[engine]["dense"]["p50"]
        rows.append(
            SummaryRow(
                metric=f"{engine}: hybrid p50 / dense p50",
                ours=hybrid,
                peer=dense,
                value=round(hybrid / dense, 3),
                target=TARGET_HYBRID_VS_DENSE,
                higher_is_better=False,
            )
        )
    for label in ("dense", "lexical", "hybrid"):
        edge, local = latency["edge"][label]["p50"], latency["local"][label]["p50"]
        rows.append(
            SummaryRow(
                metric=f"{label} p50: edge / local mode",
                ours=edge,
                peer=local,
                value=round(edge / local, 3),
                target=None,
                higher_is_better=False,
            )
        )
        rows.append(
            SummaryRow(
                metric=f"{label} nDCG@10: edge / local mode",
                ours=ndcg["edge"][label],
                peer=ndcg["local"][label],
                value=round(ndcg["edge"][label] / ndcg["local"][label], 4),
                target=1.0,
                higher_is_better=True,
            )
        )
    return rows


def version(package: str) -> str:
    from importlib.metadata import version as installed

    return installed(package)


def run(quick: bool) -> dict[str, Any]:
    """The benchmark on the quick subset or the full corpus; the runner's entry point."""
    return measure(quick=quick)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="100 queries, their documents + 1,000 distractors")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="SciFact folder (BEIR layout)")
    parser.add_argument("--out", type=Path, help="write the JSON result here instead of stdout")
    args = parser.parse_args(argv)
    text = json.dumps(measure(quick=args.quick, data=args.data), indent=2)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
