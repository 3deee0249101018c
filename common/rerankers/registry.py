"""The one place that lists the reranking providers a process offers."""

from __future__ import annotations

from common.rerankers.base import RerankerProvider, RerankerRegistry


def default_rerankers(
    *, cohere_api_key: str | None = None, cohere_base_url: str | None = None, timeout_seconds: float = 10.0
) -> RerankerRegistry:
    """``cohere`` when its key is configured; none otherwise (reranking is then off). Opens nothing.

    Args:
        cohere_base_url: Another address for Cohere's API (a proxy, a stand-in).
        timeout_seconds: Longest wait for one rerank; past it the answer goes on unreranked.
    """
    providers: list[RerankerProvider] = []
    if cohere_api_key:
        from common.rerankers.cohere import CohereRerankProvider

        providers.append(CohereRerankProvider(cohere_api_key, base_url=cohere_base_url, timeout=timeout_seconds))
    return RerankerRegistry(providers)
