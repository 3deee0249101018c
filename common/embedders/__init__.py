"""Text embedders behind one port, looked up by the identity vector's ``embeddingProvider`` and ``model``.

Build the registry once at start-up with :func:`default_registry` and close it on shutdown::

    registry = default_registry(local_threads=1)
    embedder = registry.get("local", "all-MiniLM-L6-v2")
    vectors = await embedder.embed_documents(chunks)   # float32 (n, 384), unit rows
    await registry.aclose()
"""

from common.embedders.base import Embedder, EmbedderProvider, EmbedderRegistry, EmbedderSpec, Vectors
from common.embedders.registry import default_registry

__all__ = ["Embedder", "EmbedderProvider", "EmbedderRegistry", "EmbedderSpec", "Vectors", "default_registry"]
