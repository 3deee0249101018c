"""The ``cohere`` reranker: Cohere's hosted Rerank models through the official SDK (``AsyncClientV2.rerank``).

A rerank sits on the path of every answer of an agent that uses it, so it is never retried: any failure —
network, timeout, a refused key, Cohere's outage, an answer that does not fit — is ``Unavailable``
(``reranker_unavailable`` or ``reranker_bad_response``) at once, and kappi answers unreranked.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import TYPE_CHECKING, Any

import httpx

from common.errors import Unavailable
from common.rerankers.base import Ranked

if TYPE_CHECKING:
    from cohere import AsyncClientV2, V2RerankResponse

PROVIDER = "cohere"
MODELS = ("rerank-v3.5", "rerank-v4.0-pro", "rerank-v5.0-pro", "rerank-english-v3.0", "rerank-multilingual-v3.0")
"""The first is the default: the model Cohere documents as its general one, multilingual."""
MAX_TOKENS_PER_DOCUMENT = 4096
"""Cohere's own default, sent so a change of it cannot change our answers."""


class CohereReranker:
    """One model over one shared SDK client (:class:`CohereRerankProvider` owns it)."""

    def __init__(self, provider: CohereRerankProvider, model: str) -> None:
        self._provider = provider
        self.model = model

    async def rerank(self, query: str, documents: Sequence[str], top_n: int) -> Ranked:
        if not documents or top_n < 1:
            return []
        from cohere.core import ApiError, ParsingError

        top_n = min(top_n, len(documents))
        try:
            async with asyncio.timeout(self._provider.timeout):
                response = await self._provider.client().rerank(
                    model=self.model,
                    query=query,
                    documents=list(documents),
                    top_n=top_n,
                    max_tokens_per_doc=MAX_TOKENS_PER_DOCUMENT,
                )
        except (ApiError, ParsingError) as error:
            raise self._unavailable(f"Cohere answered {error.status_code}", status=error.status_code) from error
        except (httpx.TransportError, TimeoutError) as error:
            raise self._unavailable(f"could not reach Cohere ({type(error).__name__})") from error
        return self._ranked(response, len(documents), top_n)

    def _ranked(self, response: V2RerankResponse, documents: int, top_n: int) -> Ranked:
        # The SDK does not validate bodies: a 200 lacking ``results`` arrives as a model without the field.
        pairs: Ranked = []
        for result in getattr(response, "results", None) or []:
            index, score = getattr(result, "index", None), getattr(result, "relevance_score", None)
            if not isinstance(index, int) or not 0 <= index < documents or not isinstance(score, int | float):
                break
            pairs.append((index, float(score)))
        else:
            if pairs and len(pairs) <= top_n and len({i for i, _ in pairs}) == len(pairs):
                return sorted(pairs, key=lambda pair: (-pair[1], pair[0]))
        raise Unavailable(
            f"Cohere's rerank answer does not fit the {documents} passage(s) sent",
            code="reranker_bad_response",
            extra={"provider": PROVIDER, "model": self.model},
        )

    def _unavailable(self, reason: str, *, status: int | None = None) -> Unavailable:
        extra: dict[str, Any] = {"provider": PROVIDER, "model": self.model}
        if status is not None:
            extra["status"] = status
        return Unavailable(f"the reranker is unavailable: {reason}", code="reranker_unavailable", extra=extra)


@dataclass(slots=True)
class CohereRerankProvider:
    """The ``cohere`` reranker's catalogue; registered only when an API key is configured. The SDK (slow to
    import) and its connection pool are made on first use, shared by every model."""

    api_key: str = field(repr=False)
    _: KW_ONLY
    base_url: str | None = None
    timeout: float = 10.0
    models_offered: tuple[str, ...] = MODELS
    name: str = PROVIDER
    _http: httpx.AsyncClient | None = field(default=None, init=False, repr=False)
    _sdk: AsyncClientV2 | None = field(default=None, init=False, repr=False)

    def models(self) -> list[str]:
        return list(self.models_offered)

    def reranker(self, model: str) -> CohereReranker:
        return CohereReranker(self, model)

    def client(self) -> AsyncClientV2:
        if self._sdk is None:
            from cohere import AsyncClientV2

            self._http = httpx.AsyncClient(timeout=self.timeout)
            self._sdk = AsyncClientV2(
                api_key=self.api_key,
                base_url=self.base_url,
                client_name="ragu",
                max_retries=0,
                timeout=self.timeout,
                httpx_client=self._http,
                log_warning_experimental_features=False,
            )
        return self._sdk

    async def aclose(self) -> None:
        http, self._http, self._sdk = self._http, None, None
        if http is not None:
            await http.aclose()
