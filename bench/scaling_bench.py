"""How cost grows with the corpus (issue #30 item 3): synthetic collections of 10^4, 10^5 (10^6) chunks, per engine.

Run from the repository root::

    nice python -m bench.scaling_bench [--sizes 10000 100000] [--queries 100] [--out result.json]

**Data.** Chunk texts are real sentences recombined: every SciFact abstract split into sentences, and each chunk
eight of them drawn at random (seeded), so the vocabulary and its Zipf tail are a real corpus's while the corpus
grows past SciFact's 5k documents; ten chunks make a document. **Vectors are synthetic**: the local embedder writes
~31 chunks/s on one core (docs/benchmarks.md), about an hour for 10^5. Each chunk's vector is one of 300 random unit
centroids plus Gaussian noise of the centroid's length (a cosine of ~0.5 between chunks of a cluster), normalised:
clustered like real embeddings, so HNSW's graph and its candidate lists behave as on real data, not as on uniform
noise (where every point is as far as every other). Query vectors are drawn the same way; query texts are SciFact's
real queries, so the lexical leg reads real terms' postings. So latency and size figures are realistic; the rankings
are not, and no quality is measured here (bench/scifact_bench.py measures it on real embeddings).

**Measured per size**, each engine through the product's own adapter (``VectorStore.upsert`` in the worker's
batches, ``VectorStore.search`` with a :class:`~common.vectors.base.Search`, 10 chunks as an agent asks):

- ``pgvector`` on an embedded PostgreSQL migrated like production: ingest chunks/s (the HNSW index and the lexical
  triggers maintained as rows arrive, as in production), then ``VACUUM ANALYZE``; the sizes of the collection's
  table (with its indexes and TOAST), its postings and statistics tables and its HNSW index; the HNSW index rebuilt
  from scratch (``REINDEX``, the session's ``maintenance_work_mem``); dense and hybrid p50/p95.
- ``kappi``: :class:`~common.vectors.resident.ResidentVectors` over that store, as kappi composes it: the time from
  the first search to the copy being searched (snapshot read + faiss HNSW and inverted index build), this
  process's resident memory grown by it (one copy: every kappi replica holds its own), dense and hybrid p50/p95.
- ``qdrant``: the embedded Qdrant (Qdrant Edge through :func:`~common.vectors.qdrant_edge.open_edge_client`):
  ingest chunks/s, resident memory grown by it, its folder on disk, dense and hybrid p50/p95. Edge segments are
  brute force (no HNSW), so its dense search scans every vector.

The engines are searched interleaved query by query, after a warm-up. Growth between two sizes is reported as the
log-log slope ``log(y2/y1) / log(n2/n1)`` (1 = linear, 0 = flat). One process, one core per engine call, on a
shared machine: the load average is recorded beside the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import itertools
import json
import math
import os
import random
import re
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.qdrant_edge_bench import _rss_mib, percentile
from bench.report import machine, pin_one_core
from bench.scifact_bench import DEFAULT_DATA, NAMESPACE, load_dataset

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from common.vectors.base import RetrievalMode, Search, VectorRecord, VectorStore
    from schemas.models import Identity

SIZES = (10_000, 100_000)
QUICK_SIZES = (10_000,)
DIMENSION = 384
"""all-MiniLM-L6-v2's, the default model's."""
CENTROIDS = 300
NOISE = 1.0
"""The noise vector's expected length relative to its unit centroid."""
SENTENCES_PER_CHUNK = 8
CHUNKS_PER_DOCUMENT = 10
LIMIT = 10
WARM_UP = 5
SEED = 30
MODES: tuple[RetrievalMode, ...] = ("dense", "hybrid")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9])")


@dataclass(frozen=True)
class Synthetic:
    """One collection's worth of chunks and the queries to ask it."""

    texts: list[str]
    vectors: npt.NDArray[np.float32]
    queries: list[tuple[str, list[float]]]


def sentences(data: Path) -> list[str]:
    """Every sentence of SciFact's titles and abstracts."""
    dataset = load_dataset(data)
    found: list[str] = []
    for title, abstract in dataset.corpus.values():
        found.append(title)
        found.extend(s for s in _SENTENCE_END.split(abstract) if len(s) > 20)
    return found


def synthesise(pool: Sequence[str], query_texts: Sequence[str], size: int, queries: int) -> Synthetic:
    """``size`` chunks of recombined sentences with clustered unit vectors, and ``queries`` real query texts with
    vectors drawn from the same clusters (module docstring)."""
    import numpy as np

    rng = random.Random(SEED)
    texts = [" ".join(rng.choices(pool, k=SENTENCES_PER_CHUNK)) for _ in range(size)]
    generator = np.random.default_rng(SEED)
    centroids = _unit(generator.standard_normal((CENTROIDS, DIMENSION), dtype=np.float32))
    vectors = _clustered(generator, centroids, size)
    picked = rng.sample(list(query_texts), k=min(queries + WARM_UP, len(query_texts)))
    query_vectors = _clustered(generator, centroids, len(picked))
    return Synthetic(texts, vectors, [(t, v.tolist()) for t, v in zip(picked, query_vectors, strict=True)])


def _clustered(generator: Any, centroids: npt.NDArray[np.float32], count: int) -> npt.NDArray[np.float32]:
    import numpy as np

    out = np.empty((count, DIMENSION), dtype=np.float32)
    scale = NOISE / math.sqrt(DIMENSION)
    for start in range(0, count, 50_000):
        n = min(50_000, count - start)
        picks = generator.integers(0, len(centroids), n)
        noise = generator.standard_normal((n, DIMENSION), dtype=np.float32) * scale
        out[start : start + n] = _unit(centroids[picks] + noise)
    return out


def _unit(matrix: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    import numpy as np

    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    unit: npt.NDArray[np.float32] = (matrix / norms).astype(np.float32)
    return unit


def identity_for(name: str, provider: str) -> Identity:
    from schemas.models import Identity

    return Identity(
        collection_id=str(uuid.uuid5(NAMESPACE, name)),
        name=name,
        model="all-MiniLM-L6-v2",
        vectorProvider=provider,
        embeddingProvider="local",
    )


def records(identity: Identity, data: Synthetic, start: int, stop: int) -> list[VectorRecord]:
    """The worker's records (:class:`~common.vectors.base.ChunkPayload`) for chunks ``start..stop``."""
    import hashlib

    from common.vectors.base import ChunkPayload, VectorRecord

    out = []
    for n in range(start, stop):
        document = n // CHUNKS_PER_DOCUMENT
        text = data.texts[n]
        payload = ChunkPayload(
            collection_id=identity.collection_id,
            name=identity.name,
            model=identity.model,
            vectorProvider=identity.vectorProvider,
            embeddingProvider=identity.embeddingProvider,
            content=text,
            document_id=str(uuid.uuid5(NAMESPACE, f"document-{document}")),
            document_name=f"synthetic-{document}.txt",
            document_sha256=hashlib.sha256(str(document).encode()).hexdigest(),
            chunk_index=n % CHUNKS_PER_DOCUMENT,
            token_count=len(text.split()),
            content_hash=hashlib.sha256(text.encode()).hexdigest(),
        )
        out.append(VectorRecord(id=str(uuid.uuid5(NAMESPACE, f"chunk-{n}")), vector=data.vectors[n], payload=payload))
    return out


async def ingest(store: VectorStore, identity: Identity, data: Synthetic) -> float:
    """Every chunk through ``upsert`` in the worker's batches; returns chunks/s."""
    from chonkit.ingest.pipeline import WRITE_BATCH

    await store.create_collection(identity, DIMENSION)
    started = time.perf_counter()
    for start in range(0, len(data.texts), WRITE_BATCH):
        await store.upsert(identity.name, records(identity, data, start, min(start + WRITE_BATCH, len(data.texts))))
    return len(data.texts) / (time.perf_counter() - started)


def _search(name: str, text: str, vector: list[float], mode: RetrievalMode) -> Search:
    from common.vectors.base import Search

    return Search(name=name, vector=vector, limit=LIMIT, properties=("document_id", "content"), text=text, mode=mode)


async def search_all(stores: Mapping[str, tuple[VectorStore, str]], data: Synthetic) -> dict[str, dict[str, Any]]:
    """Every query in each mode through each engine, interleaved query by query: p50/p95 ms."""
    for text, vector in data.queries[:WARM_UP]:
        for store, name in stores.values():
            for mode in MODES:
                await store.search(_search(name, text, vector, mode))
    ms: dict[str, dict[str, list[float]]] = {engine: {mode: [] for mode in MODES} for engine in stores}
    for text, vector in data.queries[WARM_UP:]:
        for mode in MODES:
            for engine, (store, name) in stores.items():
                started = time.perf_counter()
                await store.search(_search(name, text, vector, mode))
                ms[engine][mode].append((time.perf_counter() - started) * 1000)
    return {
        engine: {
            mode: {"p50_ms": round(statistics.median(v), 3), "p95_ms": round(percentile(v, 0.95), 3)}
            for mode, v in modes.items()
        }
        for engine, modes in ms.items()
    }


async def postgres_sizes(pool: Any, name: str) -> dict[str, Any]:
    """Relation sizes (MiB) and the HNSW index rebuilt from scratch (seconds)."""
    from common.vectors.pgvector import postings_of, stats_of, table_of

    async with pool.acquire() as conn:
        await conn.execute(f"VACUUM ANALYZE {table_of(name)}")
        await conn.execute(f"VACUUM ANALYZE {postings_of(name)}")
        hnsw = await conn.fetchval(
            "SELECT i.indexrelid::regclass::text FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
            "JOIN pg_am a ON a.oid = c.relam WHERE i.indrelid = $1::regclass AND a.amname = 'hnsw'",
            table_of(name),
        )
        mib = "pg_total_relation_size($1::regclass)::float8 / 1048576"
        sizes = {
            "table_total_mib": await conn.fetchval(f"SELECT {mib}", table_of(name)),
            "postings_total_mib": await conn.fetchval(f"SELECT {mib}", postings_of(name)),
            "stats_total_mib": await conn.fetchval(f"SELECT {mib}", stats_of(name)),
            "hnsw_index_mib": await conn.fetchval("SELECT pg_relation_size($1::regclass)::float8 / 1048576", hnsw),
            "postings_rows": await conn.fetchval(
                "SELECT reltuples::int8 FROM pg_class WHERE oid = $1::regclass", postings_of(name)
            ),
            "maintenance_work_mem": await conn.fetchval("SHOW maintenance_work_mem"),
            "shared_buffers": await conn.fetchval("SHOW shared_buffers"),
        }
        started = time.perf_counter()
        await conn.execute(f"REINDEX INDEX {hnsw}")
        sizes["hnsw_rebuild_s"] = time.perf_counter() - started
    return {k: round(float(v), 2) if isinstance(v, float) else v for k, v in sizes.items()}


async def resident_copy(store: Any, url: str, name: str, size: int) -> tuple[Any, dict[str, float]]:
    """kappi's in-memory copy of the collection: seconds from the first search until it is searched in memory, and
    the resident memory it grew this process by."""
    from common.vectors.resident import ResidentVectors

    gc.collect()
    before = _rss_mib()
    resident = ResidentVectors(store, url, max_chunks=size + 10, settle_seconds=0.0)
    resident.start()
    await asyncio.wait_for(resident.status.listening.wait(), 60)
    started = time.perf_counter()
    probe = [0.0] * DIMENSION
    probe[0] = 1.0
    await resident.search(_search(name, "", probe, "dense"))
    while name not in resident.status.in_memory():
        await asyncio.sleep(0.05)
        if time.perf_counter() - started > 3600:
            raise RuntimeError("the in-memory copy was never made")
    seconds = time.perf_counter() - started
    gc.collect()
    return resident, {"copy_build_s": round(seconds, 2), "rss_grown_mib": round(_rss_mib() - before, 1)}


def _folder_mib(folder: Path) -> float:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file()) / 2**20


async def measure_size(url: str, folder: Path, data: Synthetic) -> dict[str, Any]:
    """One size: every engine ingested, sized and searched."""
    from common.vectors.pgvector import PgVectorStore, open_pool
    from common.vectors.qdrant import QdrantStore
    from common.vectors.qdrant_edge import open_edge_client

    size = len(data.texts)
    result: dict[str, Any] = {"chunks": size, "load_average_before": list(os.getloadavg())}
    name = f"Scaling_{size}"
    pool = await open_pool(url, max_size=2)
    store = PgVectorStore(pool)
    result["pgvector"] = {"ingest_chunks_per_s": round(await ingest(store, identity_for(name, "pgvector"), data), 1)}
    result["pgvector"].update(await postgres_sizes(pool, name))
    gc.collect()
    rss = _rss_mib()
    qdrant_folder = folder / f"qdrant-{size}"
    qdrant_folder.mkdir()
    edge = QdrantStore(await open_edge_client(qdrant_folder))
    result["qdrant"] = {"ingest_chunks_per_s": round(await ingest(edge, identity_for(name, "qdrant"), data), 1)}
    gc.collect()
    result["qdrant"].update(rss_grown_mib=round(_rss_mib() - rss, 1), disk_mib=round(_folder_mib(qdrant_folder), 1))
    resident, result["kappi"] = await resident_copy(store, url, name, size)
    try:
        stores = {"pgvector": (store, name), "kappi": (resident, name), "qdrant": (edge, name)}
        latencies = await search_all(stores, data)
        if name not in resident.status.in_memory():
            raise RuntimeError("kappi's copy was dropped during the searches: its figures would be PostgreSQL's")
    finally:
        await resident.aclose()
        await edge.aclose()
        await pool.close()
    for engine, figures in latencies.items():
        result[engine].update(figures)
    result["load_average_after"] = list(os.getloadavg())
    return result


def growth(sizes: Sequence[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Log-log slope of every numeric figure between consecutive sizes (1 = linear in the corpus, 0 = flat)."""
    slopes: dict[str, dict[str, float]] = {}
    for a, b in itertools.pairwise(sizes):
        span = math.log(b["chunks"] / a["chunks"])
        key = f"{a['chunks']}->{b['chunks']}"
        for engine in ("pgvector", "kappi", "qdrant"):
            for figure, value in _flat(a[engine]).items():
                other = _flat(b[engine]).get(figure)
                if other is not None and value > 0 and other > 0:
                    slopes.setdefault(key, {})[f"{engine}.{figure}"] = round(math.log(other / value) / span, 2)
    return slopes


def _flat(node: Mapping[str, Any], prefix: str = "") -> dict[str, float]:
    out: dict[str, float] = {}
    for key, value in node.items():
        if isinstance(value, Mapping):
            out.update(_flat(value, f"{prefix}{key}."))
        elif isinstance(value, int | float) and not isinstance(value, bool):
            out[f"{prefix}{key}"] = float(value)
    return out


def measure(sizes: Sequence[int] = SIZES, *, queries: int = 100, data: Path = DEFAULT_DATA) -> dict[str, Any]:
    pin_one_core()
    from common.db import migrate
    from common.db.embedded import EmbeddedPostgres, ensure_database, with_database

    pool = sentences(data)
    query_texts = list(load_dataset(data).queries.values())
    measured = []
    with tempfile.TemporaryDirectory(prefix="ragu-bench-scaling-") as folder:
        server = EmbeddedPostgres(Path(folder) / "pg")
        try:
            admin_url = server.start()
            asyncio.run(ensure_database(admin_url, "ragu_bench"))
            url = with_database(admin_url, "ragu_bench")
            migrate.upgrade(url)  # alembic runs its own event loop: before ours starts
            for size in sizes:
                synthetic = synthesise(pool, query_texts, size, queries)
                measured.append(asyncio.run(measure_size(url, Path(folder), synthetic)))
                print(json.dumps(measured[-1]), file=sys.stderr, flush=True)
                del synthetic
        finally:
            server.stop()
    return {
        "machine": machine(),
        "data": {
            "sentences": len(pool),
            "vectors": f"synthetic: {CENTROIDS} centroids, noise {NOISE}, {DIMENSION}-d",
            "limit": LIMIT,
            "queries": queries,
        },
        "sizes": measured,
        "growth": growth(measured),
    }


def run(quick: bool) -> dict[str, Any]:
    """The runner's entry point: 10^4 chunks quick, 10^4 and 10^5 in full."""
    return measure(QUICK_SIZES if quick else SIZES)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES), help="corpus sizes in chunks")
    parser.add_argument("--queries", type=int, default=100, help="queries per mode and engine")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="SciFact folder (BEIR layout)")
    parser.add_argument("--out", type=Path, help="write the JSON result here instead of stdout")
    args = parser.parse_args(argv)
    result = measure(args.sizes, queries=args.queries, data=args.data)
    text = json.dumps(result, indent=2)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
