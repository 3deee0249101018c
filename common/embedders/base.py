"""The embedder port: what chonkit and kappi need from any text-embedding provider.

A collection records ``embeddingProvider`` and ``model`` in its identity vector; both services turn that pair
into an :class:`Embedder` through :class:`EmbedderRegistry`, so documents and the queries searched against
them are always embedded by the same model. Vendor types never cross this port: vectors are numpy arrays.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

import msgspec
import numpy as np
import numpy.typing as npt

from common.errors import InvalidInput
from common.registry import Registry

Vectors = npt.NDArray[np.float32]
"""float32 array: ``(n, dimension)`` for a batch, ``(dimension,)`` for one query; rows are L2-normalised."""


class EmbedderSpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """What a provider offers, known before any weights are loaded (admin UIs list these)."""

    provider: str
    model: str
    dimension: int
    max_tokens: int
    """Longest text, in model tokens excluding special tokens, that is embedded whole; longer input is
    truncated. Chunkers size chunks against this with :meth:`Embedder.count_tokens`."""


class Embedder(Protocol):
    """A loaded model that turns text into unit-length vectors.

    Documents and queries are separate calls because some providers (Cohere) embed them differently;
    a symmetric model gives the same vector for the same text either way. Vectors come back as one float32
    numpy array rather than lists of floats: it is what vector stores and cosine maths want, and it costs one
    allocation instead of ``n * dimension`` Python floats. Because every row is L2-normalised, cosine
    similarity is a dot product. The ``embed_*`` coroutines do their CPU or network work off the event loop.
    """

    @property
    def provider(self) -> str: ...

    @property
    def model(self) -> str: ...

    @property
    def dimension(self) -> int: ...

    @property
    def max_tokens(self) -> int: ...

    async def embed_documents(self, texts: Sequence[str]) -> Vectors:
        """Embed passages for storage; returns ``(len(texts), dimension)`` float32, rows in input order."""
        ...

    async def embed_query(self, text: str) -> Vectors:
        """Embed a search query; returns ``(dimension,)`` float32."""
        ...

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """True length of each text in model tokens, excluding special tokens and ignoring truncation.

        Synchronous because chunkers call it in tight loops from their own worker threads.
        """
        ...

    def count(self, texts: Sequence[str]) -> list[int]:
        """Alias of :meth:`count_tokens`, so an embedder can serve as a chunker's ``TokenCounter``."""
        ...

    async def aclose(self) -> None:
        """Release worker threads, sessions and clients; the embedder is unusable afterwards."""
        ...


class SpecAttributes:
    """``provider``, ``model``, ``dimension`` and ``max_tokens`` read from ``self.spec``, for embedders to inherit."""

    @property
    def spec(self) -> EmbedderSpec:
        raise NotImplementedError

    @property
    def provider(self) -> str:
        return self.spec.provider

    @property
    def model(self) -> str:
        return self.spec.model

    @property
    def dimension(self) -> int:
        return self.spec.dimension

    @property
    def max_tokens(self) -> int:
        return self.spec.max_tokens


class EmbedderProvider(Protocol):
    """One provider's catalogue and how to build its embedders; building must not load anything yet."""

    @property
    def name(self) -> str:
        """The identity vector's ``embeddingProvider`` string, e.g. ``"local"``."""
        ...

    @property
    def specs(self) -> Sequence[EmbedderSpec]: ...

    def create(self, spec: EmbedderSpec) -> Embedder: ...


class EmbedderRegistry:
    """Maps ``embeddingProvider`` to its provider and hands out one cached embedder per (provider, model).

    Building the registry costs nothing: an embedder is created on first :meth:`get`, and the local one loads
    its weights only on first use. The registry owns what it created and closes it in :meth:`aclose`.
    """

    def __init__(self, providers: Iterable[EmbedderProvider]) -> None:
        self._providers = Registry.of_named(providers, kind="embedding provider", code="unknown_embedding_provider")
        self._instances: dict[tuple[str, str], Embedder] = {}

    def providers(self) -> list[str]:
        return self._providers.names()

    def models(self, provider: str) -> list[EmbedderSpec]:
        return list(self._provider(provider).specs)

    def spec(self, provider: str, model: str) -> EmbedderSpec:
        """The spec of one model, validating both names (use before creating a collection)."""
        specs = self.models(provider)
        for spec in specs:
            if spec.model == model:
                return spec
        valid = [s.model for s in specs]
        raise InvalidInput(
            f"unknown embedding model {model!r} for provider {provider!r}; valid models: {', '.join(valid)}",
            code="unknown_embedding_model",
            extra={"provider": provider, "model": model, "valid_models": valid},
        )

    def get(self, provider: str, model: str) -> Embedder:
        key = (provider, model)
        if (embedder := self._instances.get(key)) is None:
            embedder = self._provider(provider).create(self.spec(provider, model))
            self._instances[key] = embedder
        return embedder

    async def aclose(self) -> None:
        instances, self._instances = list(self._instances.values()), {}
        for embedder in instances:
            await embedder.aclose()

    def _provider(self, name: str) -> EmbedderProvider:
        return self._providers.get(name)
