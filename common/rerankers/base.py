"""The reranker port: a model that reorders passages by their relevance to a question.

Kappi reranks an answer's merged passages (after every collection's search, before the LLM) when the agent
names a reranker. A reranker only reorders what retrieval already found and the user may read: it never adds a
passage, so it cannot widen access. Vendor types never cross this port: indexes and scores are plain numbers.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

from common.errors import InvalidInput
from common.registry import Registry

Ranked = list[tuple[int, float]]
"""``(index into the documents, relevance score)`` pairs, the most relevant first."""


class Reranker(Protocol):
    """One reranking model of one provider."""

    async def rerank(self, query: str, documents: Sequence[str], top_n: int) -> Ranked:
        """The ``top_n`` most relevant of ``documents`` to ``query``, best first.

        Raises:
            Unavailable: ``reranker_unavailable`` (network, timeout, the provider's outage or refusal) or
                ``reranker_bad_response`` (an answer that does not fit the documents sent).
        """
        ...


class RerankerProvider(Protocol):
    """A provider's catalogue, looked up by the name an agent records (``"cohere"``)."""

    @property
    def name(self) -> str: ...

    def models(self) -> list[str]:
        """The models it offers; the first is the default."""
        ...

    def reranker(self, model: str) -> Reranker: ...

    async def aclose(self) -> None: ...


class RerankerRegistry:
    """Rerankers by provider name; owns the providers and closes them."""

    def __init__(self, providers: Iterable[RerankerProvider]) -> None:
        self._providers = Registry.of_named(providers, kind="reranker", code="unknown_reranker")

    def providers(self) -> list[str]:
        return self._providers.names()

    def resolve(self, provider: str, model: str | None) -> str:
        """The model an agent gets for ``provider``: ``model`` when the provider offers it, its default when
        ``None``.

        Raises:
            InvalidInput: ``unknown_reranker`` (listing the configured ones) or ``unknown_rerank_model``.
        """
        valid = self._providers.get(provider).models()
        if model is None:
            return valid[0]
        if model not in valid:
            raise InvalidInput(
                f"unknown model {model!r} for reranker {provider!r}; valid models: {', '.join(valid)}",
                code="unknown_rerank_model",
                extra={"provider": provider, "model": model, "valid_models": valid},
            )
        return model

    def get(self, provider: str, model: str) -> Reranker:
        """Raises ``InvalidInput`` ``unknown_reranker`` for a provider not configured here."""
        return self._providers.get(provider).reranker(model)

    async def aclose(self) -> None:
        for provider in self._providers:
            await provider.aclose()
