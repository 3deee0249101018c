"""The vector stores a process can use, keyed by the identity's ``vectorProvider`` string."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path

from common.config import Settings, reveal
from common.registry import Registry
from common.vectors.base import VectorStore


class VectorRegistry:
    def __init__(
        self, stores: Mapping[str, VectorStore], *, closers: Sequence[Callable[[], Awaitable[None]]] = ()
    ) -> None:
        self._stores = Registry(stores, kind="vector provider", code="unknown_vector_provider")
        self._closers = list(closers)

    def providers(self) -> list[str]:
        return self._stores.names()

    def replacing(self, provider: str, store: VectorStore) -> VectorRegistry:
        """The same stores with ``provider``'s served by ``store`` (a wrapper around it, say); closing stays
        with this registry."""
        return VectorRegistry({**{name: self._stores.get(name) for name in self.providers()}, provider: store})

    def get(self, provider: str) -> VectorStore:
        return self._stores.get(provider)

    async def aclose(self) -> None:
        for store in self._stores:
            await store.aclose()
        for close in self._closers:
            await close()


async def open_vector_registry(settings: Settings) -> VectorRegistry:
    """pgvector on the Ragu database (its own small pool), Qdrant (a server, or the embedded Qdrant: Qdrant Edge in
    this process, which takes over what local mode left in its folder), and Weaviate when a URL is configured: the
    plain adapters (kappi alone wraps pgvector in its in-memory copies, ``kappi.app``).
    Requires ``settings.database.url`` to be resolved."""
    from qdrant_client import AsyncQdrantClient

    from common.vectors.pgvector import PgVectorStore, open_pool
    from common.vectors.qdrant import QdrantStore
    from common.vectors.qdrant_edge import EdgeClient, open_edge_client

    if not settings.database.url:
        raise RuntimeError("database_url must be resolved before opening vector stores")
    pool = await open_pool(settings.database.url)
    stores: dict[str, VectorStore] = {"pgvector": PgVectorStore(pool)}
    qdrant: AsyncQdrantClient | EdgeClient
    if settings.qdrant.url:
        qdrant = AsyncQdrantClient(url=settings.qdrant.url, api_key=reveal(settings.qdrant.api_key))
    else:
        path = Path(settings.qdrant.path or settings.server.data_path / "qdrant")
        await asyncio.to_thread(path.mkdir, parents=True, exist_ok=True)
        qdrant = await open_edge_client(path)
    stores["qdrant"] = QdrantStore(qdrant)
    if settings.weaviate.url:
        stores["weaviate"] = await _weaviate(settings)
    return VectorRegistry(stores, closers=[pool.close])


async def _weaviate(settings: Settings) -> VectorStore:
    from urllib.parse import urlsplit

    import weaviate
    from weaviate.classes.init import Auth

    from common.vectors.weaviate import WeaviateStore

    url = urlsplit(settings.weaviate.url or "")
    client = weaviate.use_async_with_custom(
        http_host=url.hostname or "localhost",
        http_port=url.port or (443 if url.scheme == "https" else 80),
        http_secure=url.scheme == "https",
        grpc_host=url.hostname or "localhost",
        grpc_port=settings.weaviate.grpc_port,
        grpc_secure=url.scheme == "https",
        auth_credentials=Auth.api_key(settings.weaviate.api_key.reveal()) if settings.weaviate.api_key else None,
    )
    await client.connect()
    return WeaviateStore(client)
