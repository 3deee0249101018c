"""What users touch: the agents they may use and their own chats, with answers streamed as SSE."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated
from uuid import UUID

import msgspec
from litestar import Controller, delete, get, patch, post
from litestar.background_tasks import BackgroundTask
from litestar.di import NamedDependency
from litestar.params import FromPath, FromQuery, JSONBody, QueryParameter
from litestar.response import ServerSentEvent, ServerSentEventMessage
from litestar.status_codes import HTTP_200_OK, HTTP_201_CREATED

from common.auth import Principal
from common.http.pagination import Offset
from kappi.agent.models import Agent, UserAgent
from kappi.chat.answering import Event
from kappi.chat.models import (
    Answer,
    Chat,
    ChatCreate,
    ChatDetail,
    ChatRename,
    QueryAnswer,
    QueryRequest,
    Question,
    Retrieved,
    RetrieveRequest,
)
from kappi.chat.service import ChatService


class AgentController(Controller):
    path = "/agents"
    tags = ["chat"]

    @get("/", summary="Agents you may use")
    async def list_agents(
        self, chats: NamedDependency[ChatService], principal: NamedDependency[Principal]
    ) -> list[UserAgent]:
        return [_user_view(a) for a in await chats.usable_agents(principal)]

    @get("/{agent_id:uuid}", summary="An agent you may use")
    async def get_agent(
        self, chats: NamedDependency[ChatService], principal: NamedDependency[Principal], agent_id: FromPath[UUID]
    ) -> UserAgent:
        """404 for agents outside your groups, exactly as for agents that do not exist."""
        return _user_view(await chats.visible_agent(agent_id, principal))

    @post("/{agent_id:uuid}/query", status_code=HTTP_200_OK, summary="Ask once, without a chat")
    async def query(
        self,
        chats: NamedDependency[ChatService],
        principal: NamedDependency[Principal],
        agent_id: FromPath[UUID],
        data: JSONBody[QueryRequest],
    ) -> QueryAnswer:
        """A stateless question for integrations: the same access checks, retrieval and LLM as a chat, with
        citations, usage and timings; nothing is stored. ``filters`` (tags, labels) narrow what the agent's
        collections are searched for; they never widen what its assignments allow."""
        return await chats.ask_once(agent_id, data.content, principal, data.filters)

    @post("/{agent_id:uuid}/retrieve", status_code=HTTP_200_OK, summary="Find passages, without an answer")
    async def retrieve(
        self,
        chats: NamedDependency[ChatService],
        principal: NamedDependency[Principal],
        agent_id: FromPath[UUID],
        data: JSONBody[RetrieveRequest],
    ) -> Retrieved:
        """Retrieval only, for callers with their own LLM: the query API's access checks and citations (with the
        legs that found each passage in lexical and hybrid searches), embed, search and rerank timings; no LLM is
        called and nothing is stored. ``top_k`` (up to 200) is also the depth each collection is searched to;
        ``filters`` narrow the agent's own; ``group_by: document`` gives each document's best passage with its
        count."""
        return await chats.retrieve_once(agent_id, data, principal)


class ChatController(Controller):
    path = "/chats"
    tags = ["chat"]

    @post("/", status_code=HTTP_201_CREATED, summary="Start a chat")
    async def create(
        self, chats: NamedDependency[ChatService], principal: NamedDependency[Principal], data: JSONBody[ChatCreate]
    ) -> Chat:
        return await chats.create(data.agent_id, data.title, principal)

    @get("/", summary="Your chats")
    async def mine(
        self,
        chats: NamedDependency[ChatService],
        principal: NamedDependency[Principal],
        limit: FromQuery[Annotated[int, QueryParameter(ge=1, le=200)]] = 50,
        offset: FromQuery[Offset] = 0,
    ) -> list[Chat]:
        return await chats.mine(principal, limit, offset)

    @get("/{chat_id:uuid}", summary="A chat with its messages")
    async def detail(
        self, chats: NamedDependency[ChatService], principal: NamedDependency[Principal], chat_id: FromPath[UUID]
    ) -> ChatDetail:
        return await chats.detail(chat_id, principal)

    @patch("/{chat_id:uuid}", summary="Rename a chat")
    async def rename(
        self,
        chats: NamedDependency[ChatService],
        principal: NamedDependency[Principal],
        chat_id: FromPath[UUID],
        data: JSONBody[ChatRename],
    ) -> Chat:
        return await chats.rename(chat_id, data.title, principal)

    @delete("/{chat_id:uuid}", summary="Delete a chat")
    async def delete_chat(
        self, chats: NamedDependency[ChatService], principal: NamedDependency[Principal], chat_id: FromPath[UUID]
    ) -> None:
        await chats.delete(chat_id, principal)

    @post("/{chat_id:uuid}/messages", status_code=HTTP_200_OK, summary="Ask (answer as JSON)")
    async def ask(
        self,
        chats: NamedDependency[ChatService],
        principal: NamedDependency[Principal],
        chat_id: FromPath[UUID],
        data: JSONBody[Question],
    ) -> Answer:
        """The whole answer at once, with citations, usage and per-stage timings."""
        return await chats.ask(chat_id, data.content, principal)

    @post("/{chat_id:uuid}/messages/stream", status_code=HTTP_200_OK, summary="Ask (answer streamed as SSE)")
    async def ask_streaming(
        self,
        chats: NamedDependency[ChatService],
        principal: NamedDependency[Principal],
        chat_id: FromPath[UUID],
        data: JSONBody[Question],
    ) -> ServerSentEvent:
        """Events: ``sources`` (the citations), then, when a model answers and a passage does, one
        ``preliminary`` (``text``, ``citations``, ``provider``: extractive's quote of the same passages, shown while
        the model reads), ``token`` (answer text, in order: the model's sentences, each once grounding has checked
        it, then that quote under "From the sources:"), then ``done`` (message id, usage, timings: embed, search,
        llm, total) — or ``error`` with a code. Closing the connection stops the LLM call; the answer is saved as
        ``cancelled`` then, even if the stream had not begun."""
        answer = await chats.ask_streaming(chat_id, data.content, principal)
        return ServerSentEvent(_sse(answer.events()), background=BackgroundTask(answer.settle))


async def _sse(events: AsyncIterator[Event]) -> AsyncIterator[ServerSentEventMessage]:
    async for event in events:
        yield ServerSentEventMessage(event=event.event, data=msgspec.json.encode(event.data).decode())


def _user_view(agent: Agent) -> UserAgent:
    return UserAgent(id=agent.id, name=agent.name, description=agent.description, llm_model=agent.config.llm_model)
