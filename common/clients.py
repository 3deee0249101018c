"""Embedders and vector stores: opened once per process and shared by every service it hosts.

The embedded Qdrant allows one client per folder, and the local embedding model is worth loading
once, so when ``ragu serve`` hosts chonkit and kappi together they share one :class:`SharedClients`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from common.config import Settings, reveal
from common.embedders.base import EmbedderRegistry
from common.embedders.local import LocalProvider
from common.embedders.registry import default_registry
from common.vectors.registry import VectorRegistry, open_vector_registry


class SharedClients:
    """Pass ``vectors`` to use stores you manage yourself (tests); otherwise they open on first use."""

    def __init__(
        self, settings: Settings, *, embedders: EmbedderRegistry | None = None, vectors: VectorRegistry | None = None
    ) -> None:
        self.settings = settings
        self.embedders = embedders or default_registry(
            local_threads=settings.local_embedder.threads,
            local_cache_dir=settings.local_embedder.cache_path,
            cohere_api_key=reveal(settings.cohere.api_key),
            cohere_base_url=settings.cohere.base_url,
        )
        self._owns_embedders = embedders is None
        self._vectors = vectors
        self._owns_vectors = vectors is None
        self._users = 0

    @property
    def owns_vectors(self) -> bool:
        """Whether these clients open the vector stores from the settings (a service's process), rather than
        use stores the caller manages (tests)."""
        return self._owns_vectors

    @property
    def vectors(self) -> VectorRegistry:
        if self._vectors is None:
            raise RuntimeError("vector stores are opened by a service's lifespan (SharedClients.opened)")
        return self._vectors

    @asynccontextmanager
    async def opened(self) -> AsyncIterator[SharedClients]:
        """Open on the first user, close after the last. The local embedder's graph is cached first if it is not yet
        (:meth:`LocalProvider.prepare`): before the process serves, not in the middle of its first embedding."""
        if self._owns_embedders and self._users == 0:
            local = LocalProvider(cache_dir=self.settings.local_embedder.cache_path)
            await asyncio.to_thread(local.prepare)
        if self._vectors is None:
            self._vectors = await open_vector_registry(self.settings)
        self._users += 1
        try:
            yield self
        finally:
            self._users -= 1
            if self._users == 0 and self._owns_vectors and self._vectors is not None:
                await self._vectors.aclose()
                self._vectors = None
