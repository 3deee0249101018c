"""The registry every Ragu process builds at start-up: one place that lists the embedding providers."""

from __future__ import annotations

from pathlib import Path

from common.embedders.base import EmbedderProvider, EmbedderRegistry
from common.embedders.local import LocalProvider


def default_registry(
    *,
    local_threads: int = 1,
    local_batch_size: int = 1,
    local_cache_dir: Path | None = None,
    cohere_api_key: str | None = None,
    cohere_base_url: str | None = None,
) -> EmbedderRegistry:
    """Build the registry from settings-like values; nothing is loaded until an embedder is first used.

    Args:
        local_threads: onnxruntime intra-op threads for the ``local`` provider.
        local_batch_size: Texts per inference call for the ``local`` provider.
        local_cache_dir: Where the ``local`` provider keeps its rewritten graph; ``None``: it rewrites at each load.
    """
    providers: list[EmbedderProvider] = [
        LocalProvider(threads=local_threads, batch_size=local_batch_size, cache_dir=local_cache_dir)
    ]
    if cohere_api_key:
        from common.embedders.cohere import CohereProvider

        providers.append(CohereProvider(cohere_api_key, base_url=cohere_base_url))
    return EmbedderRegistry(providers)
