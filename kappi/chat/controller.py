"""What users touch: the agents they may use and their own chats, with answers streamed as SSE."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated
from uuid import UUID

import msgspec
from litestar import Controller, delete, get, patch, post
from litestar.background_tasks import BackgroundTask
from litestar.datastructures import State
from litestar.di import NamedDependency, Provide
from litestar.params import FromPath, FromQuery, JSONBody, QueryParameter
from litestar.response import ServerSentEvent, ServerSentEventMessage
from litestar.status_codes import HTTP_200_OK, HTTP_201_CREATED

from common.auth import Principal
from common.db import Database
from common.db.database import Connection
from kappi.agent.models import Agent, UserAgent
from kappi.agent.repository import AgentRepository
from kappi.chat.models import Answer, Chat, ChatCreate, ChatDetail, ChatRename, QueryAnswer, Question
from kappi.chat.repository import ChatRepository
from kappi.chat.service import Answerer, ChatService, Prepared, visible


async def provide_chat_service(state: State, conn: NamedDependency[Connection]) -> ChatService:
    return ChatService(ChatRepository(conn), AgentRepository(conn), state.retriever, state.llms)


class AgentController(Controller):
    path = "/agents"
    tags = ["chat"]
    dependencies = {"chats": Provide(provide_chat_service)}

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
        self, state: State, principal: NamedDependency[Principal], agent_id: FromPath[UUID], data: JSONBody[Question]
    ) -> QueryAnswer:
        """A stateless question for integrations: the same access checks, retrieval and LLM as a chat, with
        citations, usage and timings; nothing is stored. The agent comes from :class:`AgentCache`."""
        agent = visible(await state.agents.get(agent_id), agent_id, principal)
        prepared = Prepared(agent=agent, config=agent.config, text=data.content, history=[], groups=principal.groups)
        return await _answerer(state).query(prepared)


class ChatController(Controller):
    path = "/chats"
    tags = ["chat"]
    dependencies = {"chats": Provide(provide_chat_service)}

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
        offset: FromQuery[Annotated[int, QueryParameter(ge=0)]] = 0,
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
        self, state: State, principal: NamedDependency[Principal], chat_id: FromPath[UUID], data: JSONBody[Question]
    ) -> Answer:
        """The whole answer at once, with citations, usage and per-stage timings."""
        prepared = await _prepare(state, chat_id, data.content, principal)
        return await _answerer(state).answer(prepared)

    @post("/{chat_id:uuid}/messages/stream", status_code=HTTP_200_OK, summary="Ask (answer streamed as SSE)")
    async def ask_streaming(
        self, state: State, principal: NamedDependency[Principal], chat_id: FromPath[UUID], data: JSONBody[Question]
    ) -> ServerSentEvent:
        """Events: ``sources`` (the citations), ``token`` (answer text, in order), then ``done`` (message id,
        usage, timings: embed, search, llm, total) — or ``error`` with a code. Closing the connection stops
        the LLM call; the answer is saved as ``cancelled`` then, even if the stream had not begun."""
        prepared = await _prepare(state, chat_id, data.content, principal)
        answer = _AnswerStream(_answerer(state), prepared)
        return ServerSentEvent(answer.events(), background=BackgroundTask(answer.settle))


async def _prepare(state: State, chat_id: UUID, content: str, principal: Principal) -> Prepared:
    """Questions get their own short transaction, committed before the answer starts: an answer can take
    a minute of LLM time, and must not hold a database connection (or a request's transaction) for it."""
    db: Database = state.db
    async with db.transaction() as conn:
        service = ChatService(ChatRepository(conn), AgentRepository(conn), state.retriever, state.llms)
        return await service.prepare(chat_id, content, principal)


def _answerer(state: State) -> Answerer:
    return Answerer(state.db, state.retriever, state.llms)


class _AnswerStream:
    """One streamed answer. A client that leaves before streaming begins cancels the response before
    :meth:`events` ever runs, so nothing would save the answer; :meth:`settle` runs after the response and
    saves it as cancelled then (found by the soak, ``bench/soak.py``)."""

    def __init__(self, answerer: Answerer, prepared: Prepared) -> None:
        self.answerer = answerer
        self.prepared = prepared
        self.started = False

    async def events(self) -> AsyncIterator[ServerSentEventMessage]:
        self.started = True
        async for event in self.answerer.events(self.prepared):
            yield ServerSentEventMessage(event=event.event, data=msgspec.json.encode(event.data).decode())

    async def settle(self) -> None:
        if not self.started:
            await self.answerer.save_unstarted(self.prepared)


def _user_view(agent: Agent) -> UserAgent:
    return UserAgent(id=agent.id, name=agent.name, description=agent.description, llm_model=agent.config.llm_model)
