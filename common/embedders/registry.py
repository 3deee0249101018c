"""The registry every Ragu process builds at start-up: one place that lists the embedding providers."""

from __future__ import annotations

from common.embedders.base import EmbedderProvider, EmbedderRegistry
from common.embedders.local import LocalProvider


def default_registry(*, local_threads: int = 1, local_batch_size: int = 16) -> EmbedderRegistry:
    """Build the registry from settings-like values; nothing is loaded until an embedder is first used.

    Args:
        local_threads: onnxruntime intra-op threads for the ``local`` provider.
        local_batch_size: Texts per inference call for the ``local`` provider.
    """
    providers: list[EmbedderProvider] = [LocalProvider(threads=local_threads, batch_size=local_batch_size)]
    # Remote providers join here, each only when configured, e.g.
    # ``if cohere_api_key: providers.append(CohereProvider(api_key=cohere_api_key))``.
    return EmbedderRegistry(providers)
