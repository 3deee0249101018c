"""Kappi's user API: the agents you may use, questions (stateless, retrieval only, or in a chat, streamed)
and your chats. Everything answers as the token's user: access is the server's decision, made per call."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator
from typing import Literal
from uuid import UUID

import msgspec

from ragu_client.http import Service
from ragu_client.models import (
    Answer,
    AnswerEvent,
    AnswerToken,
    Chat,
    ChatCreate,
    ChatDetail,
    ChatRename,
    Done,
    QueryAnswer,
    QueryRequest,
    Question,
    RetrievalFilters,
    Retrieved,
    RetrieveRequest,
    Sources,
    UserAgent,
)

_EVENTS: dict[str, type[AnswerEvent]] = {"sources": Sources, "token": AnswerToken, "done": Done}


class KappiClient(Service):
    async def agents(self) -> list[UserAgent]:
        return await self._call("GET", "/agents", list[UserAgent])

    async def agent(self, agent_id: UUID | str) -> UserAgent:
        return await self._call("GET", f"/agents/{agent_id}", UserAgent)

    async def query(self, agent_id: UUID | str, content: str, filters: RetrievalFilters | None = None) -> QueryAnswer:
        """Ask once, without a chat: the answer with its citations; nothing is stored. ``filters`` narrow the
        documents searched by tag or label."""
        body = QueryRequest(content=content, filters=filters)
        return await self._call("POST", f"/agents/{agent_id}/query", QueryAnswer, body=body)

    async def retrieve(
        self,
        agent_id: UUID | str,
        content: str,
        top_k: int | None = None,
        *,
        filters: RetrievalFilters | None = None,
        group_by: Literal["chunk", "document"] = "chunk",
    ) -> Retrieved:
        """The passages a question finds, best first, without an answer (no LLM is called); ``top_k`` up to 200,
        ``group_by="document"`` for each document's best passage with its count."""
        body = RetrieveRequest(content=content, top_k=top_k, filters=filters, group_by=group_by)
        return await self._call("POST", f"/agents/{agent_id}/retrieve", Retrieved, body=body)

    async def create_chat(self, agent_id: UUID | str, title: str | None = None) -> Chat:
        return await self._call("POST", "/chats", Chat, body=ChatCreate(agent_id=UUID(str(agent_id)), title=title))

    async def chats(self, limit: int = 50, offset: int = 0) -> list[Chat]:
        return await self._call("GET", "/chats", list[Chat], params={"limit": limit, "offset": offset})

    async def chat(self, chat_id: UUID | str) -> ChatDetail:
        return await self._call("GET", f"/chats/{chat_id}", ChatDetail)

    async def rename_chat(self, chat_id: UUID | str, title: str) -> Chat:
        return await self._call("PATCH", f"/chats/{chat_id}", Chat, body=ChatRename(title=title))

    async def delete_chat(self, chat_id: UUID | str) -> None:
        await self._send("DELETE", f"/chats/{chat_id}")

    async def ask(self, chat_id: UUID | str, content: str) -> Answer:
        """A question in a chat, answered as a whole (the chat's recent turns go with it)."""
        return await self._call("POST", f"/chats/{chat_id}/messages", Answer, body=Question(content=content))

    async def ask_streamed(self, chat_id: UUID | str, content: str) -> AsyncGenerator[AnswerEvent, None]:
        """:class:`Sources`, then :class:`AnswerToken`\\ s, then :class:`Done`; a failed answer raises
        :class:`~ragu_client.http.RaguError` with its code. Closing the iterator (``contextlib.aclosing``)
        closes the connection at once, which stops an answer still being written."""
        events = self._events("POST", f"/chats/{chat_id}/messages/stream", body=Question(content=content))
        async with contextlib.aclosing(events):
            async for name, data in events:
                kind = _EVENTS.get(name)
                if kind is not None:  # an event kind added later is skipped, not an error
                    yield msgspec.json.decode(data, type=kind)
