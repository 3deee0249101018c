"""Kappi as a LangChain retriever (``pip install './ragu_client[langchain]'``): an agent's passages for a query, as
the token's user may read them now, as ``langchain_core`` ``Document``\\ s.

``invoke`` calls kappi with the sync :class:`~ragu_client.KappiClient`, ``ainvoke`` with the
:class:`~ragu_client.AsyncKappiClient` (or the sync one in a thread when it is the only one given). Each call is one
``POST /agents/{id}/retrieve``: both access checks run on it, no LLM is called and nothing is stored. A failure
raises the client's :class:`~ragu_client.RaguError` with the service's ``code``.

``Document.page_content`` is the passage; ``Document.metadata`` holds ``collection``, ``vector_provider``,
``document_id``, ``document_name``, ``page_start``, ``page_end``, ``rank`` (1-based, kappi's order), ``score`` (the
cosine similarity to the query, in every search mode: see docs/clients.md), ``kappi_score`` (kappi's own score for
the collection's mode), ``rerank_score``, ``document_hits``, ``ocr`` and ``chunk_index``.
"""

from __future__ import annotations

import asyncio
from typing import Literal, Self
from uuid import UUID

try:
    from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever
    from pydantic import ConfigDict, model_validator
except ImportError as missing:  # the extra is not installed
    raise ImportError("ragu_client.langchain needs langchain-core: pip install 'ragu-client[langchain]'") from missing

from ragu_client._async import AsyncKappiClient
from ragu_client._passages import metadata
from ragu_client._sync import KappiClient
from ragu_client.models import RetrievalFilters, Retrieved

__all__ = ["KappiLangChainRetriever"]


class KappiLangChainRetriever(BaseRetriever):
    """An agent's collections as a LangChain retriever, as the clients' token.

    ``client`` serves ``invoke``, ``async_client`` ``ainvoke``; give either or both. The clients stay the caller's
    to close. ``top_k`` (up to 200; the service's default when ``None``), ``filters`` (tags, labels: they narrow the
    agent's assignments, never widen them) and ``group_by`` are sent as ``retrieve`` takes them.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    agent_id: UUID | str
    client: KappiClient | None = None
    async_client: AsyncKappiClient | None = None
    top_k: int | None = None
    filters: RetrievalFilters | None = None
    group_by: Literal["chunk", "document"] = "chunk"

    @model_validator(mode="after")
    def _has_a_client(self) -> Self:
        if self.client is None and self.async_client is None:
            raise ValueError("give client=KappiClient(...), async_client=AsyncKappiClient(...) or both")
        return self

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        if self.client is None:
            raise RuntimeError("this retriever has an AsyncKappiClient only: use ainvoke, or give client=KappiClient")
        return _documents(
            self.client.retrieve(self.agent_id, query, self.top_k, filters=self.filters, group_by=self.group_by)
        )

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
    ) -> list[Document]:
        if self.async_client is None:
            return await asyncio.to_thread(self._get_relevant_documents, query, run_manager=run_manager.get_sync())
        found = await self.async_client.retrieve(
            self.agent_id, query, self.top_k, filters=self.filters, group_by=self.group_by
        )
        return _documents(found)


def _documents(found: Retrieved) -> list[Document]:
    return [Document(page_content=c.text, metadata=metadata(c)) for c in found.citations]
