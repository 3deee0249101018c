"""Retrieval quality and latency through the product's pipeline: SciFact, dense / lexical / hybrid, two engines.

Run from the repository root::

    nice python -m bench.scifact_bench [--quick] [--data ../shared/data/scifact] [--out result.json]

**Ingestion** is the embedding worker's path for every corpus document (title, blank line, abstract) as a text
upload: ``parse`` (``DocumentType.TEXT``), ``chunk`` with the default config (250 tokens, 25 overlap, counted
by the local tokenizer), ``embed_documents`` per document (all-MiniLM-L6-v2 on onnxruntime), and the worker's
own records (``chunk_records``) written with ``delete_document`` + ``upsert`` into two collections created by
chonkit's collection service: one in pgvector (an embedded PostgreSQL in a temporary folder, migrated like
production) and one in the embedded Qdrant (Qdrant Edge, on disk in the same folder). Each document is embedded
once and written to both, so both engines hold the same vectors.

**Search** goes through chonkit's search test bench, ``CollectionService.search`` — one transaction per
request as the HTTP handler does, the query embedded by the collection's model — in each mode (``dense``,
``lexical``, ``hybrid`` with the request's default ``dense_weight``), ``--k`` chunks per query; a document
scores its best chunk (max pooling). The three modes are interleaved query by query, so load on the machine
skews none of them more than another. A fourth search per query, hybrid for only 10 chunks, shows what an
agent's small limit gets (each leg ``leg_depth(10)`` deep rather than ``--k``).

**References**, on the same queries in the same run: BM25 by bm25s (k1 0.9, b 0.4, Lucene IDF, PyStemmer's
Snowball English stemmer, English stop words) over whole documents ("title abstract"), and exact cosine
between the same query vectors and whole-document embeddings (truncated to the model's 256-token window) from
the same model; plus, for orientation, reciprocal-rank fusion (k = 60) of those two references' top 100
(the issue's 0.719-0.725 figure). Targets (issue #16): hybrid >= 1.05x bm25s and >= 1.08x our own dense mode;
lexical >= 0.98x bm25s; dense >= 0.98x exact; a hybrid search's p50 <= 1.5x a dense search's p50 through the
search test bench (the call as the handler makes it, query embedding included; the store's own share, the
response's ``search_ms``, is reported beside it).

**Dev and test splits.** SciFact's BEIR release has no dev split, so the bench makes one by a rule fixed before
any figure was read (:func:`split_of`): a query is ``dev`` when the first byte of the SHA-256 of its id (UTF-8) is
even, ``test`` otherwise (167 dev and 133 test of the 300). Retrieval choices (fusion per chunk or per document, and
any parameter) are made on ``dev`` only; ``test`` is reported once, never chosen on. Every quality figure is given
on both splits (``splits``) beside the whole set (kept for comparison with earlier runs).

**Fusion** (``fusion_sweep``): hybrid searches straight through each engine's store (the query embedded once, the
search test bench's properties), fused per chunk and per document (:data:`common.vectors.base.FUSIONS`), for
``--k`` chunks and for an agent's 10, interleaved query by query, with the store's time per search.

nDCG@10 is computed here, as trec_eval's ``ndcg_cut_10`` (BEIR's figure): graded gains from the qrels, a
``log2(rank + 1)`` discount, the ideal DCG from the query's qrels; averaged over every test query with qrels.
Recall@100 is the share of a query's relevant documents among its first 100 documents (for the engines: the
documents of ``--k`` chunks, so usually fewer than 100). ``--quick`` keeps 100 test queries and a corpus of
their relevant documents plus 1,000 distractors (seeded); the full run embeds the whole corpus twice (chunks,
then whole documents). The data is evaluation-only (CC BY-NC) and never shipped.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import math
import random
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.report import SummaryRow, pin_one_core

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from chonkit.collection.models import Collection
    from common.db import Database
    from common.embedders.base import Embedder, EmbedderRegistry
    from common.vectors.base import RetrievalMode
    from common.vectors.registry import VectorRegistry

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "scifact"
ENGINES = ("pgvector", "qdrant")
MODES: tuple[RetrievalMode, ...] = ("dense", "lexical", "hybrid")
SMALL_LIMIT = 10
SMALL_HYBRID = f"hybrid_limit_{SMALL_LIMIT}"
"""A hybrid search for only ``SMALL_LIMIT`` chunks, as an agent asks: its legs are ``leg_depth(10)`` deep, not 100."""
DOCUMENT_FUSION = "document_fusion_of_legs"
"""Orientation, computed from the dense and lexical searches: plain RRF (k = 60) of their max-pooled *document*
rankings. The product fuses chunks, so a document whose best dense chunk is not its best keyword chunk gets
neither leg's credit twice; the gap between this and ``hybrid`` is what fusing per document would add."""
TARGET_HYBRID_VS_BM25 = 1.05
TARGET_HYBRID_VS_DENSE = 1.08
TARGET_LEXICAL_VS_BM25 = 0.98
TARGET_DENSE_VS_EXACT = 0.98
TARGET_HYBRID_LATENCY = 1.5
BM25_K1 = 0.9
BM25_B = 0.4
REFERENCE_RRF_K = 60
REFERENCE_DEPTH = 100
NAMESPACE = uuid.UUID("9d2f6f3e-71c4-4b8a-a0f3-3c1e5d8b7a24")
QUICK_QUERIES = 100
QUICK_DISTRACTORS = 1000
WARM_UP_QUERIES = 5
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


SPLIT_RULE = "dev: the first byte of sha256(query id, UTF-8) is even; test: it is odd"
SPLITS = ("dev", "test")


def split_of(query_id: str) -> str:
    """``dev`` or ``test``, by :data:`SPLIT_RULE`: fixed, so every run and every reader splits alike."""
    return "dev" if hashlib.sha256(query_id.encode()).digest()[0] % 2 == 0 else "test"


def split_qrels(qrels: Qrels, split: str) -> Qrels:
    """The qrels of one split's queries."""
    return {query_id: judged for query_id, judged in qrels.items() if split_of(query_id) == split}


def quick_subset(data: Dataset, queries: int = QUICK_QUERIES, distractors: int = QUICK_DISTRACTORS) -> Dataset:
    """The first ``queries`` test queries, their relevant documents and ``distractors`` seeded others."""
    kept = dict(list(data.queries.items())[:queries])
    qrels = {q: data.qrels[q] for q in kept}
    relevant = {doc for judged in qrels.values() for doc in judged if doc in data.corpus}
    others = sorted(set(data.corpus) - relevant)
    chosen = relevant | set(random.Random(SEED).sample(others, min(distractors, len(others))))
    return Dataset({d: text for d, text in data.corpus.items() if d in chosen}, kept, qrels)


# --- metrics and references: pure, unit-tested in tests/bench/test_scifact_metrics.py -------------------------


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


def max_pooled(hits: Iterable[tuple[str, float]]) -> list[str]:
    """Documents ranked by their best chunk's score (ties by document id): chunk hits -> document ranking."""
    best: dict[str, float] = {}
    for document, score in hits:
        if score > best.get(document, -math.inf):
            best[document] = score
    return sorted(best, key=lambda document: (-best[document], document))


def rrf(rankings: Sequence[Sequence[str]], *, k: int = REFERENCE_RRF_K, depth: int = REFERENCE_DEPTH) -> list[str]:
    """Plain reciprocal-rank fusion of each ranking's first ``depth`` documents (ties by document id)."""
    fused: dict[str, float] = {}
    for ranking in rankings:
        for rank, document in enumerate(ranking[:depth], start=1):
            fused[document] = fused.get(document, 0.0) + 1 / (k + rank)
    return sorted(fused, key=lambda document: (-fused[document], document))


def bm25_ranking(
    corpus: Mapping[str, str],
    queries: Mapping[str, str],
    *,
    k: int = REFERENCE_DEPTH,
    k1: float = BM25_K1,
    b: float = BM25_B,
) -> Ranking:
    """bm25s's BM25 (Lucene IDF) over ``corpus``, stemmed (Snowball English) and without English stop words;
    the top ``k`` documents with a positive score per query (a query with no indexed term finds nothing)."""
    import bm25s  # type: ignore[import-untyped]
    import Stemmer

    stemmer = Stemmer.Stemmer("english")
    doc_ids = list(corpus)
    retriever = bm25s.BM25(k1=k1, b=b)
    corpus_tokens = bm25s.tokenize(list(corpus.values()), stopwords="en", stemmer=stemmer, show_progress=False)
    retriever.index(corpus_tokens, show_progress=False)
    query_ids = list(queries)
    tokens = bm25s.tokenize([queries[q] for q in query_ids], stopwords="en", stemmer=stemmer, show_progress=False)
    found, scores = retriever.retrieve(tokens, k=min(k, len(doc_ids)), show_progress=False, n_threads=1)
    return {
        query_id: [doc_ids[int(j)] for j, score in zip(found[i], scores[i], strict=True) if score > 0]
        for i, query_id in enumerate(query_ids)
    }


def cosine_ranking(
    query_ids: Sequence[str],
    query_vectors: npt.NDArray[np.float32],
    doc_ids: Sequence[str],
    doc_vectors: npt.NDArray[np.float32],
    *,
    k: int = REFERENCE_DEPTH,
) -> Ranking:
    """Exact cosine (rows normalised here), the top ``k`` documents per query; ties by position in ``doc_ids``."""
    import numpy as np

    def unit(matrix: npt.NDArray[np.float32]) -> npt.NDArray[Any]:
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        return matrix / np.where(norms == 0, 1, norms)

    scores = unit(query_vectors) @ unit(doc_vectors).T
    top = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    return {query_id: [doc_ids[j] for j in top[i]] for i, query_id in enumerate(query_ids)}


def percentile(values: Sequence[float], share: float) -> float:
    """The ``share`` (0..1) quantile by linear interpolation between closest ranks (numpy's default)."""
    if not values:
        raise ValueError("no values")
    ordered = sorted(values)
    position = share * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def ratio(ours: float, peer: float) -> float:
    return round(ours / peer, 4) if peer else 0.0


# --- the run -------------------------------------------------------------------------------------------------


def run(quick: bool) -> dict[str, Any]:
    """The benchmark on the quick subset or the full corpus; the runner's entry point."""
    return measure(quick=quick)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="100 queries, their documents + 1,000 distractors")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="SciFact folder (BEIR layout)")
    parser.add_argument("--k", type=int, default=100, help="chunks retrieved per query before max pooling")
    parser.add_argument("--engines", nargs="+", choices=ENGINES, default=list(ENGINES), help="engines to measure")
    parser.add_argument(
        "--dense-weights",
        type=float,
        nargs="+",
        metavar="W",
        help="also measure hybrid quality at these dense weights (tuning; the default weight is always measured)",
    )
    parser.add_argument("--out", type=Path, help="write the JSON result here instead of stdout")
    args = parser.parse_args(argv)
    result = measure(
        quick=args.quick, data=args.data, k=args.k, engines=args.engines, extra_weights=args.dense_weights or ()
    )
    text = json.dumps(result, indent=2)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    else:
        print(text)
    return 0


def measure(
    *,
    quick: bool,
    data: Path = DEFAULT_DATA,
    k: int = 100,
    engines: Sequence[str] = ENGINES,
    extra_weights: Sequence[float] = (),
) -> dict[str, Any]:
    pin_one_core()
    from common.db import migrate
    from common.db.embedded import EmbeddedPostgres, ensure_database, with_database

    dataset = load_dataset(data)
    if quick:
        dataset = quick_subset(dataset)
    plan = Plan(k=k, engines=tuple(engines), extra_weights=tuple(extra_weights))
    with tempfile.TemporaryDirectory(prefix="ragu-bench-scifact-") as folder:
        server = EmbeddedPostgres(Path(folder) / "pg")
        try:
            admin_url = server.start()
            asyncio.run(ensure_database(admin_url, "ragu_bench"))
            url = with_database(admin_url, "ragu_bench")
            migrate.upgrade(url)  # alembic runs its own event loop: before ours starts
            result = asyncio.run(_measure(dataset, url, Path(folder) / "qdrant", plan))
        finally:
            server.stop()
    result["mode"] = "quick" if quick else "full"
    return result


@dataclass(frozen=True)
class Plan:
    k: int
    engines: tuple[str, ...]
    extra_weights: tuple[float, ...]


@dataclass
class Ingested:
    document_of: dict[str, str]
    """Chunk payload ``document_id`` -> SciFact id."""
    chunks: int = 0
    tokens: int = 0
    embed_seconds: float = 0.0
    write_seconds: dict[str, float] = field(default_factory=dict)
    wall_seconds: float = 0.0


@dataclass
class ModeRun:
    """One engine's searches in one mode: the document ranking, and each request's timings."""

    ranking: Ranking = field(default_factory=dict)
    request_ms: list[float] = field(default_factory=list)
    store_ms: list[float] = field(default_factory=list)


@dataclass(frozen=True)
class Product:
    """What chonkit's search test bench is built from, as the app composes it: the database, the stores and
    the embedders."""

    db: Database
    vectors: VectorRegistry
    embedders: EmbedderRegistry

    async def create_collection(self, engine: str) -> Collection:
        from chonkit.collection.models import CollectionCreate
        from chonkit.collection.service import CollectionService

        service = CollectionService(self.db, self.vectors, self.embedders)
        return await service.create(CollectionCreate(name=f"Scifact_{engine}", vector_provider=engine))

    async def search(
        self, collection: Collection, query: str, *, k: int, mode: RetrievalMode, dense_weight: float | None = None
    ) -> tuple[list[tuple[str, float]], float, float]:
        """One search test bench request as the HTTP handler makes it (the service's ``search``, which reads the row in
        a transaction of its own):
        (document id, score) per chunk hit, the request's wall milliseconds and the store's (``search_ms``)."""
        from chonkit.collection.models import SearchRequest
        from chonkit.collection.service import CollectionService

        if dense_weight is None:
            request = SearchRequest(query=query, limit=k, mode=mode)
        else:
            request = SearchRequest(query=query, limit=k, mode=mode, dense_weight=dense_weight)
        started = time.perf_counter()
        service = CollectionService(self.db, self.vectors, self.embedders)
        response = await service.search(collection.id, request)
        request_ms = (time.perf_counter() - started) * 1000
        return [(hit.document_id, hit.score) for hit in response.hits], request_ms, response.search_ms


async def _measure(data: Dataset, url: str, qdrant_path: Path, plan: Plan) -> dict[str, Any]:
    from common.db.database import PoolDatabase
    from common.embedders.registry import default_registry
    from common.vectors.base import VectorStore
    from common.vectors.pgvector import PgVectorStore, open_pool
    from common.vectors.qdrant import QdrantStore
    from common.vectors.qdrant_edge import open_edge_client
    from common.vectors.registry import VectorRegistry

    embedders = default_registry(local_threads=1)
    pool = await open_pool(url, max_size=2)
    db = await PoolDatabase.connect(url, min_size=1, max_size=2)
    await asyncio.to_thread(qdrant_path.mkdir, parents=True, exist_ok=True)
    stores: dict[str, VectorStore] = {
        "pgvector": PgVectorStore(pool),
        "qdrant": QdrantStore(await open_edge_client(qdrant_path)),
    }
    product = Product(db, VectorRegistry(stores, closers=[pool.close]), embedders)
    try:
        collections = {engine: await product.create_collection(engine) for engine in plan.engines}
        embedder = embedders.get("local", next(iter(collections.values())).model)
        ingest = await _ingest(data, product.vectors, embedder, collections)
        runs = await _search_all(data, product, collections, ingest.document_of, plan=plan)
        fusions = await _fusion_sweep(data, product, collections, ingest.document_of, embedder, plan=plan)
        references = await _references(data, embedder)
        weights = await _weight_sweep(data, product, collections, ingest.document_of, plan=plan)
    finally:
        await product.vectors.aclose()
        await db.aclose()
        await embedders.aclose()
    result = _result(data, ingest, runs, references, weights=weights, plan=plan)
    result["fusion_sweep"] = fusions
    return result


async def _ingest(
    data: Dataset, vectors: VectorRegistry, embedder: Embedder, collections: Mapping[str, Collection]
) -> Ingested:
    """Every document through the worker's stages, one at a time as the worker takes them, into every engine."""
    from chonkit.collection.service import identity_of
    from chonkit.document.chunking import chunk, default_chunk_config
    from chonkit.document.parsing import DocumentType, ParseConfig
    from chonkit.document.parsing.parser import parse
    from chonkit.embedding.worker import EMBED_BATCH, WRITE_BATCH, chunk_records

    parse_config, chunk_config = ParseConfig(), default_chunk_config()
    ingest = Ingested(document_of={}, write_seconds=dict.fromkeys(collections, 0.0))
    wall = time.perf_counter()
    for number, (scifact_id, (title, abstract)) in enumerate(data.corpus.items(), start=1):
        upload = f"{title}\n\n{abstract}".encode()
        document_id = uuid.uuid5(NAMESPACE, scifact_id)
        ingest.document_of[str(document_id)] = scifact_id
        parsed = await asyncio.to_thread(parse, upload, DocumentType.TEXT, parse_config)
        result = await asyncio.to_thread(chunk, parsed, chunk_config, embedder, max_tokens=embedder.max_tokens)
        if result.oversized:
            raise RuntimeError(f"document {scifact_id}: the default chunk config produced oversized chunks")
        started = time.perf_counter()
        embedded: list[list[float]] = []
        for start in range(0, len(result.chunks), EMBED_BATCH):
            batch = result.chunks[start : start + EMBED_BATCH]
            embedded.extend((await embedder.embed_documents([c.text for c in batch])).tolist())
        ingest.embed_seconds += time.perf_counter() - started
        for engine, collection in collections.items():
            started = time.perf_counter()
            records = chunk_records(
                collection_id=collection.id,
                identity=identity_of(collection),
                document_id=document_id,
                document_name=f"scifact-{scifact_id}.txt",
                document_sha256=hashlib.sha256(upload).hexdigest(),
                result=result,
                vectors=embedded,
            )
            store = vectors.get(engine)
            await store.delete_document(collection.name, str(document_id))
            for start in range(0, len(records), WRITE_BATCH):
                await store.upsert(collection.name, records[start : start + WRITE_BATCH])
            ingest.write_seconds[engine] += time.perf_counter() - started
        ingest.chunks += len(result.chunks)
        ingest.tokens += sum(c.token_count for c in result.chunks)
        if number % 500 == 0:
            print(f"scifact: {number}/{len(data.corpus)} documents ingested", file=sys.stderr, flush=True)
    ingest.wall_seconds = time.perf_counter() - wall
    return ingest


async def _search_all(
    data: Dataset,
    product: Product,
    collections: Mapping[str, Collection],
    document_of: Mapping[str, str],
    *,
    plan: Plan,
) -> dict[str, dict[str, ModeRun]]:
    """Every test query in every mode on every engine, the modes interleaved query by query (after a warm-up)."""
    searches: list[tuple[str, RetrievalMode, int]] = [(mode, mode, plan.k) for mode in MODES]
    searches.append((SMALL_HYBRID, "hybrid", SMALL_LIMIT))
    runs = {engine: {label: ModeRun() for label, _, _ in searches} for engine in collections}
    for engine, collection in collections.items():
        for query in list(data.queries.values())[:WARM_UP_QUERIES]:
            for _, mode, limit in searches:
                await product.search(collection, query, k=limit, mode=mode)
        for query_id, query in data.queries.items():
            for label, mode, limit in searches:
                hits, request_ms, store_ms = await product.search(collection, query, k=limit, mode=mode)
                run = runs[engine][label]
                run.ranking[query_id] = max_pooled((document_of[d], score) for d, score in hits)
                run.request_ms.append(request_ms)
                run.store_ms.append(store_ms)
        print(f"scifact: {engine} searched", file=sys.stderr, flush=True)
    return runs


async def _weight_sweep(
    data: Dataset,
    product: Product,
    collections: Mapping[str, Collection],
    document_of: Mapping[str, str],
    *,
    plan: Plan,
) -> dict[str, dict[str, dict[str, float]]]:
    """Hybrid quality at each of ``plan.extra_weights`` (tuning): engine -> weight -> nDCG@10, Recall@100."""
    sweep: dict[str, dict[str, dict[str, float]]] = {}
    for engine, collection in collections.items():
        sweep[engine] = {}
        for weight in plan.extra_weights:
            ranking: Ranking = {}
            for query_id, query in data.queries.items():
                hits, _, _ = await product.search(collection, query, k=plan.k, mode="hybrid", dense_weight=weight)
                ranking[query_id] = max_pooled((document_of[d], score) for d, score in hits)
            sweep[engine][str(weight)] = _quality(ranking, data.qrels)
    return sweep


async def _fusion_sweep(
    data: Dataset,
    product: Product,
    collections: Mapping[str, Collection],
    document_of: Mapping[str, str],
    embedder: Embedder,
    *,
    plan: Plan,
) -> dict[str, dict[str, Any]]:
    """Hybrid quality and store time fused per chunk and per document, for ``plan.k`` chunks and an agent's
    :data:`SMALL_LIMIT`, each straight through the engine's store: engine -> ``<fusion>@<limit>`` -> figures."""
    from chonkit.collection.service import SEARCH_PROPERTIES
    from common.vectors.base import FUSIONS, Search

    vectors = {q: (await embedder.embed_query(text)).tolist() for q, text in data.queries.items()}
    variants = [(fusion, limit) for fusion in FUSIONS for limit in (plan.k, SMALL_LIMIT)]
    sweep: dict[str, dict[str, Any]] = {}
    for engine, collection in collections.items():
        store = product.vectors.get(engine)
        runs = {variant: ModeRun() for variant in variants}
        for query_id, text in data.queries.items():
            for fusion, limit in variants:
                search = Search(
                    name=collection.name,
                    vector=vectors[query_id],
                    limit=limit,
                    properties=SEARCH_PROPERTIES,
                    text=text,
                    mode="hybrid",
                    fusion=fusion,
                )
                started = time.perf_counter()
                hits = await store.search(search)
                run = runs[(fusion, limit)]
                run.store_ms.append((time.perf_counter() - started) * 1000)
                run.ranking[query_id] = max_pooled((document_of[h.payload["document_id"]], h.score) for h in hits)
        sweep[engine] = {
            f"{fusion}@{limit}": {**_split_quality(run.ranking, data.qrels), "store_ms": _latency(run.store_ms)}
            for (fusion, limit), run in runs.items()
        }
        print(f"scifact: {engine} fusion sweep done", file=sys.stderr, flush=True)
    return sweep


@dataclass(frozen=True)
class References:
    bm25: Ranking
    exact: Ranking
    fused: Ranking
    bm25_seconds: float
    exact_embed_seconds: float


async def _references(data: Dataset, embedder: Embedder) -> References:
    """bm25s and exact whole-document cosine on the same queries, and their plain RRF."""
    import numpy as np

    texts = {doc: f"{title} {abstract}" for doc, (title, abstract) in data.corpus.items()}
    started = time.perf_counter()
    bm25 = await asyncio.to_thread(bm25_ranking, texts, data.queries)
    bm25_seconds = time.perf_counter() - started
    query_ids = list(data.queries)
    query_vectors = np.stack([await embedder.embed_query(data.queries[q]) for q in query_ids])
    started = time.perf_counter()
    documents = await embedder.embed_documents(list(texts.values()))
    exact_embed_seconds = time.perf_counter() - started
    exact = cosine_ranking(query_ids, query_vectors, list(texts), documents)
    fused = {q: rrf([bm25[q], exact[q]]) for q in query_ids}
    return References(bm25, exact, fused, bm25_seconds, exact_embed_seconds)


# --- the result ----------------------------------------------------------------------------------------------


def _quality(ranking: Ranking, qrels: Qrels) -> dict[str, float]:
    return {
        "ndcg_at_10": round(ndcg_at_k(ranking, qrels), 4),
        "recall_at_10": round(recall_at_k(ranking, qrels, 10), 4),
        "recall_at_100": round(recall_at_k(ranking, qrels, 100), 4),
    }


def _split_quality(ranking: Ranking, qrels: Qrels) -> dict[str, dict[str, float]]:
    """:func:`_quality` on each split (:func:`split_of`) and on every query."""
    return {split: _quality(ranking, split_qrels(qrels, split)) for split in SPLITS} | {"all": _quality(ranking, qrels)}


def _latency(values: Sequence[float]) -> dict[str, float]:
    return {"p50": round(percentile(values, 0.5), 3), "p95": round(percentile(values, 0.95), 3)}


def _engine_figures(runs: Mapping[str, ModeRun], qrels: Qrels) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    for mode, run in runs.items():
        figures[mode] = {
            **_quality(run.ranking, qrels),
            "splits": {split: _quality(run.ranking, split_qrels(qrels, split)) for split in SPLITS},
            "documents_per_query_mean": round(statistics.fmean(len(r) for r in run.ranking.values()), 1),
            "request_ms": _latency(run.request_ms),
            "store_ms": _latency(run.store_ms),
        }
    dense, lexical = runs["dense"].ranking, runs["lexical"].ranking
    figures[DOCUMENT_FUSION] = _quality({q: rrf([dense[q], lexical[q]]) for q in dense}, qrels)
    return figures


def _quality_rows(engine: str, figures: Mapping[str, Any], refs: Mapping[str, Any]) -> list[SummaryRow]:
    dense, lexical, hybrid = (figures[mode]["ndcg_at_10"] for mode in MODES)
    bm25, exact = refs["bm25s"]["ndcg_at_10"], refs["exact_cosine"]["ndcg_at_10"]
    rows = [
        SummaryRow(
            metric=f"{engine}: hybrid nDCG@10 vs bm25s",
            ours=hybrid,
            peer=bm25,
            value=ratio(hybrid, bm25),
            target=TARGET_HYBRID_VS_BM25,
        ),
        SummaryRow(
            metric=f"{engine}: hybrid nDCG@10 vs our dense",
            ours=hybrid,
            peer=dense,
            value=ratio(hybrid, dense),
            target=TARGET_HYBRID_VS_DENSE,
        ),
        SummaryRow(
            metric=f"{engine}: lexical nDCG@10 vs bm25s",
            ours=lexical,
            peer=bm25,
            value=ratio(lexical, bm25),
            target=TARGET_LEXICAL_VS_BM25,
        ),
        SummaryRow(
            metric=f"{engine}: dense nDCG@10 vs exact cosine (whole documents)",
            ours=dense,
            peer=exact,
            value=ratio(dense, exact),
            target=TARGET_DENSE_VS_EXACT,
        ),
    ]
    small = figures[SMALL_HYBRID]["ndcg_at_10"]
    rows.append(
        SummaryRow(
            metric=f"{engine}: hybrid nDCG@10 at limit {SMALL_LIMIT} (an agent's depth) vs bm25s",
            ours=small,
            peer=bm25,
            value=ratio(small, bm25),
            target=None,
        )
    )
    by_document = figures[DOCUMENT_FUSION]["ndcg_at_10"]
    rows.append(
        SummaryRow(
            metric=f"{engine}: RRF of our dense and lexical document rankings (fused per document) vs bm25s",
            ours=by_document,
            peer=bm25,
            value=ratio(by_document, bm25),
            target=None,
        )
    )
    peers = {"dense": "exact_cosine", "lexical": "bm25s", "hybrid": "rrf_bm25s_exact"}
    for mode, peer in peers.items():
        ours, theirs = figures[mode]["recall_at_100"], refs[peer]["recall_at_100"]
        rows.append(
            SummaryRow(
                metric=f"{engine}: {mode} Recall@100 vs {peer}",
                ours=ours,
                peer=theirs,
                value=ratio(ours, theirs),
                target=None,
            )
        )
    return rows


def _latency_rows(engine: str, figures: Mapping[str, Any]) -> list[SummaryRow]:
    dense, lexical, hybrid = (figures[mode]["request_ms"]["p50"] for mode in MODES)
    store_dense, store_hybrid = figures["dense"]["store_ms"]["p50"], figures["hybrid"]["store_ms"]["p50"]
    return [
        SummaryRow(
            metric=f"{engine}: hybrid p50 vs dense p50, ms per search test bench request",
            ours=hybrid,
            peer=dense,
            value=ratio(hybrid, dense),
            target=TARGET_HYBRID_LATENCY,
            higher_is_better=False,
        ),
        SummaryRow(
            metric=f"{engine}: lexical p50 vs dense p50, ms per request",
            ours=lexical,
            peer=dense,
            value=ratio(lexical, dense),
            target=None,
            higher_is_better=False,
        ),
        SummaryRow(
            metric=f"{engine}: hybrid p50 vs dense p50, ms in the store (search_ms)",
            ours=store_hybrid,
            peer=store_dense,
            value=ratio(store_hybrid, store_dense),
            target=None,
            higher_is_better=False,
        ),
    ]


def _settings() -> dict[str, Any]:
    """The retrieval parameters measured: the request's default weight, the fusion's and BM25's constants."""
    from chonkit.collection.models import SearchRequest
    from common.vectors import fusion, lexical

    leg_depth = getattr(fusion, "leg_depth", None)
    return {
        "default_dense_weight": SearchRequest(query="x").dense_weight,
        "rrf_k": getattr(fusion, "RRF_K", None),
        "leg_depth_at_k": leg_depth(100) if callable(leg_depth) else None,
        "bm25_k1": getattr(lexical, "K1", None),
        "bm25_b": getattr(lexical, "B", None),
    }


def _result(
    data: Dataset,
    ingest: Ingested,
    runs: Mapping[str, Mapping[str, ModeRun]],
    refs: References,
    *,
    weights: Mapping[str, Any],
    plan: Plan,
) -> dict[str, Any]:
    from importlib.metadata import version

    references = {
        "bm25s": {
            **_quality(refs.bm25, data.qrels),
            "k1": BM25_K1,
            "b": BM25_B,
            "seconds": round(refs.bm25_seconds, 1),
        },
        "exact_cosine": {**_quality(refs.exact, data.qrels), "embed_seconds": round(refs.exact_embed_seconds, 1)},
        "rrf_bm25s_exact": {**_quality(refs.fused, data.qrels), "k": REFERENCE_RRF_K, "depth": REFERENCE_DEPTH},
    }
    engines = {engine: _engine_figures(modes, data.qrels) for engine, modes in runs.items()}
    summary = [
        row
        for engine, figures in engines.items()
        for row in (*_quality_rows(engine, figures, references), *_latency_rows(engine, figures))
    ]
    return {
        "benchmark": "scifact_retrieval",
        "corpus_docs": len(data.corpus),
        "test_queries": len(data.queries),
        "k_chunks": plan.k,
        "metric": "nDCG@10 as trec_eval ndcg_cut_10 (graded gains, log2 discount, ideal from qrels), own code",
        "split_rule": SPLIT_RULE,
        "split_queries": {split: len(split_qrels(data.qrels, split)) for split in SPLITS},
        "settings": _settings(),
        "engines": engines,
        "references": references,
        "dense_weight_sweep": weights,
        "ingest": {
            "chunks": ingest.chunks,
            "chunks_per_document": round(ingest.chunks / len(data.corpus), 3),
            "tokens_embedded": ingest.tokens,
            "embed_seconds": round(ingest.embed_seconds, 1),
            "write_seconds": {engine: round(s, 1) for engine, s in ingest.write_seconds.items()},
            "wall_seconds": round(ingest.wall_seconds, 1),
        },
        "versions": {
            "python": sys.version.split()[0],
            **{
                p: version(p)
                for p in ("onnxruntime", "asyncpg", "qdrant-client", "qdrant-edge-py", "bm25s", "PyStemmer")
            },
        },
        "targets": {
            "hybrid_vs_bm25s": TARGET_HYBRID_VS_BM25,
            "hybrid_vs_dense": TARGET_HYBRID_VS_DENSE,
            "lexical_vs_bm25s": TARGET_LEXICAL_VS_BM25,
            "dense_vs_exact": TARGET_DENSE_VS_EXACT,
            "hybrid_p50_vs_dense_p50": TARGET_HYBRID_LATENCY,
        },
        "meets_targets": all(_met(row) for row in summary),
        "summary": summary,
    }


def _met(row: SummaryRow) -> bool:
    from bench.report import met

    return met(row) is not False


if __name__ == "__main__":
    sys.exit(main())
