"""A collection's move to another embedding model while kappi keeps asking it, against plain embedding of the same
documents, in one run.

Run from the repository root::

    python -m bench.reembed_bench [--quick] [--documents 134] [--target local|words] [--out result.json]

A collection of ``--documents`` generated text documents (about 75 chunks each: 10k chunks by default) is embedded
with a hashed-words model (``tests/support/words_embedder.py``: instant, so the source costs nothing), in an embedded
PostgreSQL with pgvector. Then, each with kappi's retriever asking the collection one question after another all the
time (its :class:`~kappi.retrieval.service.Retriever`, identity cache and model check, in the same process):

- **plain** (the peer): an embedding job puts the same documents into a new collection made with the target model
  (MiniLM, or ``--target words`` for a run that measures the pipeline alone);
- **migration** (ours): ``PUT /collections/{id}/embedding`` moves the source collection to the target model; timed
  from the request to the swap.

Both run chonkit's embedding worker in this process (parse and chunk in its parse processes, the model in its thread,
writes to PostgreSQL), so the ratio is what the migration costs beyond embedding: its version, the per-document
record, the swap. The questions report how many were answered (at least one passage), failed (an error or nothing),
and mixed versions (a hit of another model than the question's query); the target is none failed and none mixed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.report import machine

WORDS = [
    "leave", "vacation", "policy", "employee", "expenses", "travel", "receipt", "manager", "contract", "salary",
    "holiday", "parking", "badge", "security", "laptop", "training", "insurance", "pension", "office", "remote",
]  # fmt: skip
QUESTIONS = [
    "How many vacation days does an employee get?",
    "When are travel expenses reimbursed?",
    "Where do visitors park?",
    "Who approves remote work?",
]


def generated(count: int, chunks_each: int = 100) -> list[tuple[str, bytes]]:
    """Deterministic text documents of ``chunks_each`` paragraphs of about 40 words (75 chunks of 48 tokens)."""
    out = []
    for d in range(count):
        paragraphs = []
        for p in range(chunks_each):
            words = [WORDS[(d * 7 + p * 3 + i) % len(WORDS)] for i in range(8)]
            paragraphs.append(
                f"Rule {d}.{p}: the {words[0]} {words[1]} applies to every {words[2]} after {p + 1} days. "
                f"Ask your {words[3]} about {words[4]} and {words[5]} before the {words[6]} {words[7]} review. "
                f"Document {d} keeps paragraph {p} for the {words[0]} records."
            )
        out.append((f"bench-{d}.txt", "\n\n".join(paragraphs).encode()))
    return out


def run(quick: bool) -> dict[str, Any]:
    """For ``python -m bench``: the 10k-chunk collection moved to MiniLM (``--quick``: 750 chunks)."""
    return measure(10 if quick else 134, "local")


def measure(documents_count: int, target: str, *, migrate_first: bool = False) -> dict[str, Any]:
    from common.db import migrate
    from common.db.embedded import EmbeddedPostgres, ensure_database, with_database

    with tempfile.TemporaryDirectory(prefix="ragu-reembed-bench-") as folder:
        server = EmbeddedPostgres(Path(folder) / "pg")
        try:
            admin_url = server.start()
            asyncio.run(ensure_database(admin_url, "ragu_bench"))
            url = with_database(admin_url, "ragu_bench")
            migrate.upgrade(url)
            return asyncio.run(_measure(url, Path(folder), documents_count, target, migrate_first))
        finally:
            server.stop()


async def _measure(url: str, folder: Path, documents_count: int, target: str, migrate_first: bool) -> dict[str, Any]:
    import httpx

    from chonkit.app import create_app
    from chonkit.document.storage import BlobStore
    from chonkit.embedding.worker import EmbeddingWorker
    from common.auth import mint_dev_token
    from common.clients import SharedClients
    from common.config import load_settings
    from common.db import PoolDatabase
    from common.embedders.base import EmbedderRegistry
    from common.embedders.local import LocalProvider
    from common.vectors.pgvector import PgVectorStore, open_pool
    from common.vectors.registry import VectorRegistry
    from tests.support.words_embedder import WordsProvider

    target_model = {"embedding_provider": "local", "model": "all-MiniLM-L6-v2"}
    if target == "words":
        target_model = {"embedding_provider": "words", "model": "hashed-words-96"}
    source_model = {"embedding_provider": "words", "model": "hashed-words-64a"}
    settings = load_settings({}, data_dir=str(folder / "data"), database_url=url, auth_hs256_secret="b" * 32)
    embedders = EmbedderRegistry([LocalProvider(), WordsProvider()])
    pool = await open_pool(url, max_size=4)
    vectors = VectorRegistry({"pgvector": PgVectorStore(pool)})
    database = await PoolDatabase.connect(url, min_size=1, max_size=4)
    clients = SharedClients(settings, embedders=embedders, vectors=vectors)
    app = create_app(settings, database=database, clients=clients, worker=False)
    worker = EmbeddingWorker(database, BlobStore(settings.server.data_path / "documents"), embedders, vectors)
    token = mint_dev_token(settings, subject="bench", roles=[settings.auth.admin_role], groups=())
    await embedders.get(target_model["embedding_provider"], target_model["model"]).embed_documents(["warm up"])
    headers = {"Authorization": f"Bearer {token}"}
    transport = httpx.ASGITransport(app=app)
    try:
        async with app.lifespan(), httpx.AsyncClient(transport=transport, base_url="http://b", headers=headers) as api:
            return await _phases(
                api,
                worker,
                vectors,
                embedders,
                documents=documents_count,
                source=source_model,
                target=target_model,
                migrate_first=migrate_first,
            )
    finally:
        await database.aclose()
        await pool.close()
        await embedders.aclose()


async def _phases(
    chonkit: Any,
    worker: Any,
    vectors: Any,
    embedders: Any,
    *,
    documents: int,
    source: dict[str, str],
    target: dict[str, str],
    migrate_first: bool,
) -> dict[str, Any]:
    """Source, then plain and migration under questions: the result."""
    documents_count, source_model, target_model = documents, source, target
    ids = await _upload(chonkit, generated(documents_count))
    config = {"chunk": {"strategy": "fixed", "size": 48, "overlap": 0}}
    for doc_id in ids:
        (await chonkit.put(f"/documents/{doc_id}/config", json=config)).raise_for_status()
    source = await _collection(chonkit, "Bench_source", source_model)
    await _embed(chonkit, worker, source["id"], ids)
    chunks = (await chonkit.get(f"/collections/{source['id']}")).json()["vector_count"]

    plain_collection = await _collection(chonkit, "Bench_plain", target_model)

    async def plain() -> tuple[float, dict[str, Any]]:
        asker = _Asker(vectors, embedders, source)
        async with asker.asking():
            started = time.perf_counter()
            await _embed(chonkit, worker, plain_collection["id"], ids)
            seconds = time.perf_counter() - started
        return seconds, asker.report()

    async def migration() -> tuple[float, dict[str, Any]]:
        asker = _Asker(vectors, embedders, source)
        async with asker.asking():
            started = time.perf_counter()
            change = await chonkit.put(f"/collections/{source['id']}/embedding", json=target_model)
            change.raise_for_status()
            await _until_swapped(chonkit, worker, source["id"])
            seconds = time.perf_counter() - started
        report = asker.report()
        return seconds, {**report, "first_question_after_swap": await asker.ask_once()}

    if migrate_first:
        migration_seconds, during = await migration()
        plain_seconds, during_plain = await plain()
    else:
        plain_seconds, during_plain = await plain()
        migration_seconds, during = await migration()
    after = during.pop("first_question_after_swap")
    plain_chunks = (await chonkit.get(f"/collections/{plain_collection['id']}")).json()["vector_count"]
    migrated_chunks = (await chonkit.get(f"/collections/{source['id']}")).json()["vector_count"]
    plain_rate = plain_chunks / plain_seconds
    migration_rate = migrated_chunks / migration_seconds
    ratio = migration_rate / plain_rate
    return {
        "benchmark": "reembed",
        "machine": machine(),
        "documents": documents_count,
        "source_chunks": chunks,
        "target_model": target_model,
        "plain": {"chunks": plain_chunks, "seconds": round(plain_seconds, 2), "chunks_per_s": round(plain_rate, 1)},
        "migration": {
            "chunks": migrated_chunks,
            "seconds": round(migration_seconds, 2),
            "chunks_per_s": round(migration_rate, 1),
        },
        "order": "migration first" if migrate_first else "plain first",
        "questions_during_plain": during_plain,
        "questions_during_migration": during,
        "first_question_after_swap": after,
        "summary": [
            {
                "metric": "migration chunks/s vs plain embedding (same chunks, same load)",
                "ours": round(migration_rate, 1),
                "peer": round(plain_rate, 1),
                "value": round(ratio, 3),
                "target": 0.9,
            },
            {"metric": "questions failed during the migration", "value": during["failed"], "target": 0},
            {"metric": "questions that mixed versions", "value": during["mixed"], "target": 0},
        ],
    }


class _Asker:
    """Kappi's retriever asking the collection again and again, checking every answer's versions."""

    def __init__(self, vectors: Any, embedders: Any, collection: dict[str, Any]) -> None:
        from datetime import UTC, datetime

        from kappi.access.identities import IdentityReader
        from kappi.agent.models import Assignment
        from kappi.retrieval.service import Retriever

        self.store = _Recorded(vectors.get("pgvector"))
        registry = type(vectors)({"pgvector": self.store})
        self.queries = _Queries(embedders)
        self.retriever = Retriever(IdentityReader(registry), registry, self.queries)
        self.assignment = Assignment(
            vector_provider="pgvector",
            name=collection["name"],
            collection_id=collection["id"],
            top_k=5,
            max_distance=None,
            instruction="bench",
            created_at=datetime.now(UTC),
        )
        self.answered = self.failed = self.mixed = 0
        self.latencies: list[float] = []
        self._stop = asyncio.Event()

    async def ask_once(self, n: int = 0) -> dict[str, Any]:
        self.store.models.clear()
        self.queries.models.clear()
        started = time.perf_counter()
        retrieval = await self.retriever.retrieve([self.assignment], frozenset(), QUESTIONS[n % len(QUESTIONS)])
        self.latencies.append(time.perf_counter() - started)
        hits = self.store.models[-1] if self.store.models else set()
        return {"passages": len(retrieval.chunks), "query_model": self.queries.models[-1], "hit_models": sorted(hits)}

    async def _loop(self) -> None:
        n = 0
        while not self._stop.is_set():
            try:
                answer = await self.ask_once(n)
            except Exception:  # noqa: BLE001 -- a failed question is what this counts
                self.failed += 1
            else:
                if answer["passages"] == 0:
                    self.failed += 1
                else:
                    self.answered += 1
                if set(answer["hit_models"]) - {answer["query_model"]}:
                    self.mixed += 1
            n += 1
            await asyncio.sleep(0.01)

    def asking(self) -> Any:
        asker = self

        class _Running:
            async def __aenter__(self) -> None:
                self.task = asyncio.create_task(asker._loop())

            async def __aexit__(self, *_: object) -> None:
                asker._stop.set()
                await self.task

        return _Running()

    def report(self) -> dict[str, Any]:
        ordered = sorted(self.latencies)
        return {
            "answered": self.answered,
            "failed": self.failed,
            "mixed": self.mixed,
            "p50_ms": round(ordered[len(ordered) // 2] * 1000, 2) if ordered else None,
            "p95_ms": round(ordered[int(len(ordered) * 0.95)] * 1000, 2) if ordered else None,
        }


class _Recorded:
    def __init__(self, store: Any) -> None:
        self._store = store
        self.models: list[set[str]] = []

    async def read_identity(self, name: str) -> Any:
        return await self._store.read_identity(name)

    async def search_many(self, searches: Sequence[Any]) -> Any:
        results = await self._store.search_many(searches)
        for result in results:
            self.models.append(set() if isinstance(result, Exception) else {h.payload.get("model") for h in result})
        return results


class _Queries:
    def __init__(self, embedders: Any) -> None:
        from kappi.retrieval.service import QueryVectors

        self._inner = QueryVectors(embedders)
        self.models: list[str] = []

    async def get(self, provider: str, model: str, text: str) -> Any:
        self.models.append(model)
        return await self._inner.get(provider, model, text)


async def _upload(chonkit: Any, files: list[tuple[str, bytes]]) -> list[str]:
    ids = []
    for start in range(0, len(files), 20):
        parts = [("files", (name, data, "text/plain")) for name, data in files[start : start + 20]]
        response = await chonkit.post("/documents", files=parts)
        response.raise_for_status()
        ids += [r["document"]["id"] for r in response.json()["results"]]
    return ids


async def _collection(chonkit: Any, name: str, model: dict[str, str]) -> dict[str, Any]:
    response = await chonkit.post("/collections", json={"name": name, **model})
    response.raise_for_status()
    created: dict[str, Any] = response.json()
    return created


async def _embed(chonkit: Any, worker: Any, collection_id: str, ids: list[str]) -> None:
    response = await chonkit.post(f"/collections/{collection_id}/documents", json={"document_ids": ids})
    response.raise_for_status()
    while await worker.run_once():
        pass


async def _until_swapped(chonkit: Any, worker: Any, collection_id: str) -> None:
    while True:
        worked = await worker.run_once()
        state = (await chonkit.get(f"/collections/{collection_id}/embedding")).json()["migration"]["state"]
        if state != "building":
            if state != "done":
                raise RuntimeError(f"the migration ended {state}")
            return
        if not worked:
            await asyncio.sleep(0.05)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="10 documents (750 chunks)")
    parser.add_argument("--documents", type=int, default=134, help="documents of about 75 chunks each")
    parser.add_argument("--target", choices=["local", "words"], default="local", help="the model moved to")
    parser.add_argument("--migrate-first", action="store_true", help="the migration before the peer (order check)")
    parser.add_argument("--out", type=Path, help="write the JSON result here instead of stdout")
    args = parser.parse_args(argv)
    result = measure(10 if args.quick else args.documents, args.target, migrate_first=args.migrate_first)
    text = json.dumps(result, indent=2)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
