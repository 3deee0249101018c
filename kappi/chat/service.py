"""Chat: a user's question → retrieval over what their groups allow → the agent's LLM → a cited answer.

Access is decided on every question, never once per chat: the agent must still be visible to the
user, and :class:`~kappi.retrieval.service.Retriever` re-reads the collections' identities. Nothing
about collections the user cannot read reaches them — not in sources, citations, errors or timings.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol, TypeVar
from uuid import UUID

import msgspec

from common.auth import Principal
from common.db import Database
from common.errors import AppError, NotFound
from kappi.access.identities import IdentityReader
from kappi.access.policy import agent_visible, readable
from kappi.agent.models import Agent, AgentVersion
from kappi.agent.repository import AgentRepository
from kappi.chat.models import Answer, Chat, ChatDetail, ChatRow, Citation, Message, QueryAnswer, Timings, Usage
from kappi.chat.repository import ChatRepository
from kappi.llm.base import ChatMessage, LlmEvent, LlmRequest, Passage, Token
from kappi.llm.base import Usage as LlmUsage
from kappi.llm.prompt import system_prompt_with_context
from kappi.llm.registry import LlmRegistry
from kappi.retrieval.service import Retrieval, Retriever

HISTORY_MESSAGES = 6
"""Recent messages (three turns) sent with a follow-up question."""
UNTITLED = "New chat"
TITLE_CHARS = 80
"""Longest title taken from a first question; longer ones are cut at a word and end in an ellipsis."""
ANSWER_DEADLINE_SECONDS = 600.0
"""A ``pending`` answer older than this is shown as interrupted: its process died or could not save it. An
answer still streaming past it (an LLM may stream for as long as it keeps sending) is completed as usual."""


class Prepared(msgspec.Struct, frozen=True, kw_only=True):
    """Everything an answer needs, gathered inside a short transaction. Without a ``chat`` (the
    stateless query API) nothing is saved."""

    agent: Agent
    config: AgentVersion
    text: str
    history: list[ChatMessage]
    groups: frozenset[str]
    chat: Chat | None = None
    question: Message | None = None
    answer_id: UUID | None = None
    """The ``pending`` answer stored with the question, completed when the answer ends."""


class Event(msgspec.Struct, frozen=True, kw_only=True):
    """One stream event: ``sources``, ``token``, ``done`` or ``error``; its data holds our Structs as they
    are (the SSE encoder takes them; :meth:`Answerer.query` reads them back without a round trip)."""

    event: str
    data: dict[str, Any]


class _Shared(Protocol):
    """What decides who may use an agent (an agent's row or the whole agent)."""

    @property
    def active(self) -> bool: ...

    @property
    def groups(self) -> list[str]: ...


AgentT = TypeVar("AgentT", bound=_Shared)


def visible(agent: AgentT | None, agent_id: UUID, principal: Principal) -> AgentT:
    """The agent if this user may use it now; otherwise "not found" (its existence is not revealed)."""
    if agent is None or not agent.active or not agent_visible(agent.groups, principal.groups):
        raise NotFound(f"No agent {agent_id}.", code="agent_not_found")
    return agent


async def withhold(messages: list[Message], groups: frozenset[str], identities: IdentityReader) -> list[Message]:
    """Answers that cite a collection these groups may not read now — its groups changed, or it is gone — come
    back without their text and citations. History shows what the user may read today, and a revocation applies
    to past answers as it does to the next question. Identities are read live: no chunk filter stands behind
    this decision, so a cached identity could show a revoked answer."""
    cited = sorted({(c.vector_provider, c.collection) for m in messages for c in m.citations})
    if not cited:
        return messages
    statuses = await identities.read_live(cited)
    readable_now = {
        key for key, status in zip(cited, statuses, strict=True)
        if status.identity is not None and readable(status.identity, groups)
    }  # fmt: skip
    return [
        m
        if all((c.vector_provider, c.collection) in readable_now for c in m.citations)
        else msgspec.structs.replace(m, content="", citations=[], withheld=True)
        for m in messages
    ]


class ChatService:
    def __init__(self, chats: ChatRepository, agents: AgentRepository, retriever: Retriever, llms: LlmRegistry) -> None:
        self.chats = chats
        self.agents = agents
        self.retriever = retriever
        self.llms = llms

    async def visible_agent(self, agent_id: UUID, principal: Principal) -> Agent:
        """The agent if this user may use it now; otherwise "not found" (its existence is not revealed)."""
        return await self.agents.assemble(visible(await self.agents.row(agent_id), agent_id, principal))

    async def usable_agents(self, principal: Principal) -> list[Agent]:
        rows = await self.agents.rows(active_only=True)
        return [await self.agents.assemble(r) for r in rows if agent_visible(r.groups, principal.groups)]

    async def create(self, agent_id: UUID, title: str | None, principal: Principal) -> Chat:
        agent = await self.visible_agent(agent_id, principal)
        chat_id = uuid.uuid4()
        await self.chats.create(chat_id, agent.id, principal.subject, title)
        return await self.get(chat_id, principal)

    async def get(self, chat_id: UUID, principal: Principal) -> Chat:
        row = await self.chats.get(chat_id, principal.subject)
        if row is None:
            raise NotFound(f"No chat {chat_id}.", code="chat_not_found")
        return _chat_view(row, principal)

    async def detail(self, chat_id: UUID, principal: Principal) -> ChatDetail:
        chat = await self.get(chat_id, principal)
        messages = _settled(await self.chats.messages(chat.id))
        return ChatDetail(chat=chat, messages=await withhold(messages, principal.groups, self.retriever.identities))

    async def mine(self, principal: Principal, limit: int, offset: int) -> list[Chat]:
        return [_chat_view(row, principal) for row in await self.chats.of_owner(principal.subject, limit, offset)]

    async def rename(self, chat_id: UUID, title: str, principal: Principal) -> Chat:
        if not await self.chats.rename(chat_id, principal.subject, title):
            raise NotFound(f"No chat {chat_id}.", code="chat_not_found")
        return await self.get(chat_id, principal)

    async def delete(self, chat_id: UUID, principal: Principal) -> None:
        if not await self.chats.delete(chat_id, principal.subject):
            raise NotFound(f"No chat {chat_id}.", code="chat_not_found")

    async def prepare(self, chat_id: UUID, content: str, principal: Principal) -> Prepared:
        """Check access and store the question (committed before any streaming starts)."""
        chat = await self.get(chat_id, principal)
        agent = await self.visible_agent(chat.agent_id, principal)
        recent = await withhold(
            await self.chats.messages(chat.id, limit=HISTORY_MESSAGES), principal.groups, self.retriever.identities
        )
        history = [
            ChatMessage(role=m.role, content=m.content) for m in recent if m.status == "complete" and not m.withheld
        ]
        question = await self.chats.add_message(uuid.uuid4(), chat.id, "user", content)
        await self.chats.title_if_untitled(chat.id, title_from(content))
        # Stored with the question, so no question is ever left without an answer, whatever happens next.
        answer = await self.chats.add_message(
            uuid.uuid4(), chat.id, "assistant", "", status="pending", agent_version=agent.config.version
        )
        return Prepared(
            chat=chat,
            agent=agent,
            config=agent.config,
            question=question,
            text=content,
            history=history,
            groups=principal.groups,
            answer_id=answer.id,
        )


class Answerer:
    """Runs retrieval and the LLM for a prepared question; saves the answer on its own connection (a
    streaming response outlives the request's transaction)."""

    def __init__(self, db: Database, retriever: Retriever, llms: LlmRegistry) -> None:
        self.db = db
        self.retriever = retriever
        self.llms = llms

    async def events(self, prepared: Prepared, *, reraise: bool = False) -> AsyncIterator[Event]:
        """``sources``, then ``token``s, then ``done`` — or an ``error`` event (``reraise``: the error itself).
        The answer is saved whatever happens, with its status, so the history shows failed answers too."""
        started = time.perf_counter()
        parts: list[str] = []
        citations: list[Citation] = []
        usage = Usage()
        retrieval: Retrieval | None = None
        status, error_code = "complete", None
        llm_started = started
        try:
            retrieval = await self.retriever.retrieve(prepared.agent.collections, prepared.groups, prepared.text)
            citations = _citations(retrieval)
            yield Event(event="sources", data={"citations": citations})
            llm_started = time.perf_counter()
            # aclosing: a client that goes away stops the upstream LLM call now, not at garbage collection.
            async with contextlib.aclosing(self._llm_stream(prepared, retrieval)) as stream:
                async for item in stream:
                    if isinstance(item, Token):
                        parts.append(item.text)
                        yield Event(event="token", data={"text": item.text})
                    elif isinstance(item, LlmUsage):
                        usage = _usage(item)
        except AppError as exc:
            status, error_code = "error", exc.code
            if reraise:
                raise
            yield Event(event="error", data={"code": exc.code, "detail": exc.detail})
        except (asyncio.CancelledError, GeneratorExit):
            status, error_code = "cancelled", "client_disconnected"
            raise
        finally:
            timings = _timings(retrieval, started, llm_started, answered=bool(parts) or status == "complete")
            saved: Message | None = None
            unsaved: AppError | None = None
            try:
                if prepared.chat is not None:
                    saved = await asyncio.shield(
                        self._save(
                            prepared,
                            content="".join(parts),
                            status=status,
                            citations=citations,
                            usage=usage,
                            timings=timings,
                            error_code=error_code,
                        )
                    )
            except AppError as exc:  # the database went away while we answered; an error already in flight wins
                unsaved = exc
        if unsaved is not None and status == "complete":
            # The stream still ends with an event that has a code, never with a reset connection.
            if reraise:
                raise unsaved
            yield Event(event="error", data={"code": unsaved.code, "detail": unsaved.detail})
            return
        if status == "complete":
            yield Event(
                event="done",
                data={
                    "message_id": None if saved is None else str(saved.id),
                    "usage": usage,
                    "timings": timings,
                    "sources_used": len(citations),
                },
            )

    async def answer(self, prepared: Prepared) -> Answer:
        """The non-streaming variant: the same pipeline, collected; errors are raised as they are."""
        async for _ in self.events(prepared, reraise=True):
            pass
        if prepared.question is None or prepared.answer_id is None:
            raise ValueError("answer() needs a chat; use query() for stateless questions")
        async with self.db.transaction() as conn:
            answer = await ChatRepository(conn).message(prepared.answer_id)
        if answer is None:  # the chat was deleted while it was being answered
            raise NotFound("No such chat any more.", code="chat_not_found")
        return Answer(question=prepared.question, answer=answer)

    async def query(self, prepared: Prepared) -> QueryAnswer:
        """A stateless answer (nothing stored): the same retrieval, access checks and LLM as a chat, collected
        without :meth:`events`' stream of events (~3 % of a question's CPU at c=16, ``bench/kappi_bench.py``);
        errors are raised as they are."""
        started = time.perf_counter()
        retrieval = await self.retriever.retrieve(prepared.agent.collections, prepared.groups, prepared.text)
        text: list[str] = []
        usage = Usage()
        llm_started = time.perf_counter()
        async with contextlib.aclosing(self._llm_stream(prepared, retrieval)) as stream:
            async for item in stream:
                if isinstance(item, Token):
                    text.append(item.text)
                elif isinstance(item, LlmUsage):
                    usage = _usage(item)
        timings = _timings(retrieval, started, llm_started, answered=True)
        return QueryAnswer(answer="".join(text), citations=_citations(retrieval), usage=usage, timings=timings)

    def _llm_stream(self, prepared: Prepared, retrieval: Retrieval) -> AsyncGenerator[LlmEvent, None]:
        """The agent's LLM answering the question from the retrieved passages."""
        provider = self.llms.get(prepared.config.llm_provider)
        return provider.stream(_llm_request(prepared, retrieval, with_system=provider.reads_system_prompt))

    async def save_unstarted(self, prepared: Prepared) -> None:
        """Save the answer to a question whose stream never began (its client left first) as ``cancelled``:
        :meth:`events` saves every answer it starts, and no question is left in the history without one."""
        timings = Timings(embed_ms=0.0, search_ms=0.0, llm_ms=0.0, total_ms=0.0)
        await self._save(
            prepared,
            content="",
            status="cancelled",
            citations=[],
            usage=Usage(),
            timings=timings,
            error_code="client_disconnected",
        )

    async def _save(
        self,
        prepared: Prepared,
        *,
        content: str,
        status: str,
        citations: list[Citation],
        usage: Usage,
        timings: Timings,
        error_code: str | None,
    ) -> Message | None:
        """Complete the question's ``pending`` answer; ``None`` if its chat was deleted meanwhile."""
        if prepared.answer_id is None:
            raise ValueError("nothing to save a stateless answer to")
        async with self.db.transaction() as conn:
            return await ChatRepository(conn).finish_message(
                prepared.answer_id,
                content,
                status=status,
                citations=citations,
                usage=usage,
                timings=timings,
                error_code=error_code,
            )


def _chat_view(row: ChatRow, principal: Principal) -> Chat:
    """A chat as its owner may see it now: nothing about an agent they may no longer use, not even its name."""
    available = row.agent_active and agent_visible(row.agent_groups, principal.groups)
    return Chat(
        id=row.id,
        agent_id=row.agent_id,
        agent_name=row.agent_name if available else None,
        agent_available=available,
        title=row.title or UNTITLED,
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


def title_from(question: str) -> str:
    """A chat's title from its first question: its first line, whitespace collapsed, cut at a word."""
    line = " ".join(question.strip().splitlines()[0].split()) if question.strip() else UNTITLED
    if len(line) <= TITLE_CHARS:
        return line
    cut = line[: TITLE_CHARS - 1].rsplit(" ", 1)[0] if " " in line[: TITLE_CHARS - 1] else line[: TITLE_CHARS - 1]
    return cut.rstrip(" ,.;:") + "…"


def _settled(messages: list[Message]) -> list[Message]:
    """Answers pending past :data:`ANSWER_DEADLINE_SECONDS` as what they are: interrupted."""
    deadline = datetime.now(UTC) - timedelta(seconds=ANSWER_DEADLINE_SECONDS)
    return [
        msgspec.structs.replace(m, status="error", error_code="answer_interrupted")
        if m.status == "pending" and m.created_at < deadline
        else m
        for m in messages
    ]


def _usage(reported: LlmUsage) -> Usage:
    return Usage(input_tokens=reported.input_tokens, output_tokens=reported.output_tokens)


def _timings(retrieval: Retrieval | None, started: float, llm_started: float, *, answered: bool) -> Timings:
    """Per-stage milliseconds; the LLM's time only if it answered (or began to)."""
    finished = time.perf_counter()
    return Timings(
        embed_ms=retrieval.embed_ms if retrieval else 0.0,
        search_ms=retrieval.search_ms if retrieval else 0.0,
        llm_ms=round((finished - llm_started) * 1000, 3) if answered else 0.0,
        total_ms=round((finished - started) * 1000, 3),
    )


def _citations(retrieval: Retrieval) -> list[Citation]:
    return [
        Citation(
            citation=n,
            collection=c.collection,
            vector_provider=c.vector_provider,
            document_id=c.document_id,
            document_name=c.document_name,
            page_start=c.page_start,
            page_end=c.page_end,
            text=c.text,
            score=round(c.score, 6),
        )
        for n, c in enumerate(retrieval.chunks, start=1)
    ]


def _llm_request(prepared: Prepared, retrieval: Retrieval, *, with_system: bool) -> LlmRequest:
    passages = [
        Passage(
            collection=c.collection,
            instruction=c.instruction or None,
            document_id=c.document_id,
            document_name=c.document_name,
            page_start=c.page_start,
            page_end=c.page_end,
            text=c.context,
            score=c.score,
            citation=n,
        )
        for n, c in enumerate(retrieval.chunks, start=1)
    ]
    config = prepared.config
    return LlmRequest(
        model=config.llm_model,
        system=system_prompt_with_context(config.system_prompt, passages, config.context_template)
        if with_system
        else "",
        messages=[*prepared.history, ChatMessage(role="user", content=prepared.text)],
        passages=passages,
        temperature=config.temperature,
        max_tokens=config.max_tokens,
    )
