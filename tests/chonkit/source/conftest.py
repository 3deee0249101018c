"""Sources end to end: chonkit's app with folder roots under the test's own folder, the source syncer and the
embedding worker driven by the test, and the real local embedder with a count of its calls (a sync that finds
nothing changed must not call it)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest

from chonkit.app import create_app
from chonkit.document.storage import BlobStore
from chonkit.embedding.worker import EmbeddingWorker
from chonkit.source.sync import SourceSyncer, source_limits
from common.clients import SharedClients
from common.config import Settings, load_settings
from common.db import SingleConnectionDatabase
from common.embedders.base import Embedder, EmbedderRegistry, EmbedderSpec, Vectors
from common.vectors.registry import VectorRegistry
from tests.chonkit.conftest import bearer
from tests.conftest import TEST_SECRET, AppClient


class CountingEmbedder:
    """The real embedder, with a count of the documents it was asked to embed (composition: every call goes to it)."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.calls = 0
        self.texts = 0

    @property
    def provider(self) -> str:
        return self.inner.provider

    @property
    def model(self) -> str:
        return self.inner.model

    @property
    def dimension(self) -> int:
        return self.inner.dimension

    @property
    def max_tokens(self) -> int:
        return self.inner.max_tokens

    async def embed_documents(self, texts: Sequence[str]) -> Vectors:
        self.calls += 1
        self.texts += len(texts)
        return await self.inner.embed_documents(texts)

    async def embed_query(self, text: str) -> Vectors:
        return await self.inner.embed_query(text)

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        return self.inner.count_tokens(texts)

    def count(self, texts: Sequence[str]) -> list[int]:
        return self.inner.count(texts)

    async def aclose(self) -> None:
        """The session's registry owns the real embedder."""


@dataclass
class CountingProvider:
    """``local``'s models, each embedder the session's real one behind a :class:`CountingEmbedder`."""

    real: EmbedderRegistry
    name: str = "local"
    made: dict[str, CountingEmbedder] = field(default_factory=dict)

    @property
    def specs(self) -> Sequence[EmbedderSpec]:
        return self.real.models(self.name)

    def create(self, spec: EmbedderSpec) -> Embedder:
        return self.made.setdefault(spec.model, CountingEmbedder(self.real.get(self.name, spec.model)))

    @property
    def calls(self) -> int:
        return sum(e.calls for e in self.made.values())


@dataclass
class Roots:
    allowed: Path
    """The one folder RAGU_SOURCE_ROOTS names."""
    outside: Path
    """A folder beside it, which no source may read."""


@pytest.fixture
def roots(tmp_path: Path) -> Roots:
    allowed, outside = tmp_path / "allowed", tmp_path / "outside"
    allowed.mkdir()
    outside.mkdir()
    return Roots(allowed=allowed, outside=outside)


@pytest.fixture
def source_settings(tmp_path: Path, database_url: str, roots: Roots) -> Settings:
    return load_settings(
        {},
        data_dir=str(tmp_path / "data"),
        database_url=database_url,
        auth_hs256_secret=TEST_SECRET,
        source_roots=str(roots.allowed),
    )


@pytest.fixture
def counting(embedders: EmbedderRegistry) -> CountingProvider:
    return CountingProvider(embedders)


@pytest.fixture
def counted_clients(source_settings: Settings, counting: CountingProvider, vectors: VectorRegistry) -> SharedClients:
    return SharedClients(source_settings, embedders=EmbedderRegistry([counting]), vectors=vectors)


@pytest.fixture
async def admin(
    source_settings: Settings, db: SingleConnectionDatabase, counted_clients: SharedClients, app_client: AppClient
) -> AsyncIterator[httpx.AsyncClient]:
    """Chonkit as an admin sees it, with folder roots; the test drives the syncer and the worker itself."""
    app = create_app(source_settings, database=db, clients=counted_clients, worker=False)
    async with app_client(app) as client:
        client.headers.update(bearer(source_settings))
        yield client


@pytest.fixture
def source_worker(
    source_settings: Settings, db: SingleConnectionDatabase, counted_clients: SharedClients
) -> EmbeddingWorker:
    blobs = BlobStore(source_settings.server.data_path / "documents")
    return EmbeddingWorker(db, blobs, counted_clients.embedders, counted_clients.vectors, heartbeat_seconds=0.2)


@pytest.fixture
def syncer(source_settings: Settings, db: SingleConnectionDatabase, counted_clients: SharedClients) -> SourceSyncer:
    return SourceSyncer(
        db,
        BlobStore(source_settings.server.data_path / "documents"),
        counted_clients.vectors,
        source_limits(source_settings),
        heartbeat_seconds=0.2,
    )


async def settle(syncer: SourceSyncer, worker: EmbeddingWorker) -> None:
    """Run the syncer and the worker until neither has anything left to do."""
    while True:
        synced = await syncer.run_once()
        worked = False
        while await worker.run_once():
            worked = True
        if not (synced or worked):
            return


async def new_collection(admin: httpx.AsyncClient, name: str, vector_provider: str = "pgvector") -> dict[str, Any]:
    response = await admin.post("/collections", json={"name": name, "vector_provider": vector_provider})
    assert response.status_code == 201, response.text
    collection: dict[str, Any] = response.json()
    return collection


async def new_source(admin: httpx.AsyncClient, collection_id: str, **body: Any) -> httpx.Response:
    return await admin.post(f"/collections/{collection_id}/sources", json=body)


async def sync(admin: httpx.AsyncClient, collection_id: str, source_id: str) -> dict[str, Any]:
    response = await admin.post(f"/collections/{collection_id}/sources/{source_id}/sync")
    assert response.status_code == 202, response.text
    run: dict[str, Any] = response.json()
    return run


async def run_of(admin: httpx.AsyncClient, collection_id: str, source_id: str, run_id: str) -> dict[str, Any]:
    response = await admin.get(f"/collections/{collection_id}/sources/{source_id}/runs/{run_id}")
    assert response.status_code == 200, response.text
    run: dict[str, Any] = response.json()
    return run


def counts(run: dict[str, Any]) -> dict[str, int]:
    """A run's report without its problem list."""
    return {k: v for k, v in run["report"].items() if k != "problems"}


def problems(run: dict[str, Any]) -> dict[str, str]:
    """Each failed or skipped item's code, by key."""
    return {p["key"]: p["code"] for p in run["report"]["problems"]}


def decoded(data: bytes) -> Any:
    return msgspec.json.decode(data)
