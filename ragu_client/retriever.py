"""Kappi as the ``Retriever`` of an agent framework that brings its own LLM: passages from
``POST /agents/{id}/retrieve`` as ``Document``\\ s, and an input filter that puts them in the system prompt.

Access is the token's: kappi searches only the collections its user may read, decided on every call.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar
from uuid import UUID

from ragu_client._async import AsyncKappiClient

M = TypeVar("M")


@dataclass(frozen=True)
class Document:
    content: str
    metadata: dict[str, Any] = field(default_factory=dict)
    score: float | None = None


class Retriever(Protocol):
    async def retrieve(self, query: str, top_k: int = 5) -> list[Document]: ...


class KappiRetriever:
    """An agent's collections as a retriever: retrieval only, no LLM; nothing is stored."""

    def __init__(self, agent_id: UUID | str, kappi: AsyncKappiClient) -> None:
        self.agent_id = agent_id
        self.kappi = kappi

    async def retrieve(self, query: str, top_k: int = 5) -> list[Document]:
        found = await self.kappi.retrieve(self.agent_id, query, top_k=top_k)
        return [
            Document(
                content=c.text,
                metadata={
                    "collection": c.collection,
                    "vector_provider": c.vector_provider,
                    "document_id": c.document_id,
                    "document_name": c.document_name,
                    "page_start": c.page_start,
                    "page_end": c.page_end,
                    "score": c.score,
                },
                score=c.score,
            )
            for c in found.citations
        ]


def with_context(system_prompt: str, documents: list[Document]) -> str:
    """``<context>`` with the passages, then the original system prompt (unchanged when nothing was found)."""
    if not documents:
        return system_prompt
    passages = "\n\n".join(d.content for d in documents)
    return f"<context>\n{passages}\n</context>\n{system_prompt}"


class RagInputFilter:
    """Before each LLM call: the last user message is the query, its passages go into the system prompt.
    Messages are the framework's own, read as ``role``/``content`` attributes or mapping keys."""

    def __init__(self, retriever: Retriever, top_k: int = 5) -> None:
        self.retriever = retriever
        self.top_k = top_k

    async def filter(self, messages: list[M], system_prompt: str) -> tuple[list[M], str]:
        query = next((_read(m, "content") for m in reversed(messages) if _read(m, "role") == "user"), "")
        if not query.strip():
            return messages, system_prompt
        return messages, with_context(system_prompt, await self.retriever.retrieve(query, top_k=self.top_k))


def _read(message: object, name: str) -> str:
    value = message.get(name) if isinstance(message, Mapping) else getattr(message, name, None)
    return value if isinstance(value, str) else ""
