"""Kappi as a LlamaIndex retriever (``pip install './ragu_client[llama-index]'``): an agent's passages for a query,
as the token's user may read them now, as ``NodeWithScore(TextNode)``\\ s.

``retrieve`` calls kappi with the sync :class:`~ragu_client.KappiClient`, ``aretrieve`` with the
:class:`~ragu_client.AsyncKappiClient` (or the sync one in a thread when it is the only one given). Each call is one
``POST /agents/{id}/retrieve``: both access checks run on it, no LLM is called and nothing is stored. A failure
raises the client's :class:`~ragu_client.RaguError` with the service's ``code``.

``node.text`` is the passage and ``node.ref_doc_id`` its document's id; ``node.metadata`` holds the same keys as
:mod:`ragu_client.langchain`'s documents. ``NodeWithScore.score`` is the cosine similarity to the query in every
search mode (see docs/clients.md); an LLM reading the node sees its collection,
document name and pages, not the ids and scores.
"""

from __future__ import annotations

import asyncio
from typing import Literal
from uuid import UUID

try:
    from llama_index.core.callbacks import CallbackManager
    from llama_index.core.retrievers import BaseRetriever
    from llama_index.core.schema import NodeRelationship, NodeWithScore, QueryBundle, RelatedNodeInfo, TextNode
except ImportError as missing:  # the extra is not installed
    raise ImportError(
        "ragu_client.llama_index needs llama-index-core: pip install 'ragu-client[llama-index]'"
    ) from missing

from ragu_client._async import AsyncKappiClient
from ragu_client._passages import metadata, similarity
from ragu_client._sync import KappiClient
from ragu_client.models import RetrievalFilters, Retrieved

__all__ = ["KappiLlamaIndexRetriever"]

_NOT_FOR_THE_LLM = ["vector_provider", "document_id", "rank", "score", "kappi_score", "rerank_score", "document_hits"]


class KappiLlamaIndexRetriever(BaseRetriever):
    """An agent's collections as a LlamaIndex retriever, as the clients' token.

    ``client`` serves ``retrieve``, ``async_client`` ``aretrieve``; give either or both. The clients stay the
    caller's to close. ``top_k`` (up to 200; the service's default when ``None``), ``filters`` (tags, labels: they
    narrow the agent's assignments, never widen them) and ``group_by`` are sent as ``retrieve`` takes them.
    """

    def __init__(
        self,
        agent_id: UUID | str,
        client: KappiClient | None = None,
        async_client: AsyncKappiClient | None = None,
        *,
        top_k: int | None = None,
        filters: RetrievalFilters | None = None,
        group_by: Literal["chunk", "document"] = "chunk",
        callback_manager: CallbackManager | None = None,
    ) -> None:
        if client is None and async_client is None:
            raise ValueError("give client=KappiClient(...), async_client=AsyncKappiClient(...) or both")
        super().__init__(callback_manager=callback_manager)
        self.agent_id = agent_id
        self.client = client
        self.async_client = async_client
        self.top_k = top_k
        self.filters = filters
        self.group_by: Literal["chunk", "document"] = group_by

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        if self.client is None:
            raise RuntimeError("this retriever has an AsyncKappiClient only: use aretrieve, or give client=KappiClient")
        query = query_bundle.query_str
        return _nodes(
            self.client.retrieve(self.agent_id, query, self.top_k, filters=self.filters, group_by=self.group_by)
        )

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        if self.async_client is None:
            return await asyncio.to_thread(self._retrieve, query_bundle)
        found = await self.async_client.retrieve(
            self.agent_id, query_bundle.query_str, self.top_k, filters=self.filters, group_by=self.group_by
        )
        return _nodes(found)


def _nodes(found: Retrieved) -> list[NodeWithScore]:
    nodes = []
    for c in found.citations:
        node = TextNode(
            text=c.text,
            metadata=metadata(c),
            relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id=c.document_id)},
            excluded_llm_metadata_keys=_NOT_FOR_THE_LLM,
            excluded_embed_metadata_keys=list(metadata(c)),
        )
        nodes.append(NodeWithScore(node=node, score=similarity(c)))
    return nodes
