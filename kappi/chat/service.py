"""Chat: a user's chats and questions → retrieval over what their groups allow → the agent's LLM → a cited answer.

Access is decided on every question, never once per chat: the agent must still be visible to the
user, and :class:`~kappi.retrieval.service.Retriever` re-reads the collections' identities. Nothing
about collections the user cannot read reaches them — not in sources, citations, errors or timings.

Every method opens its own short transaction, so a streamed answer (which outlives its request) never holds
one: the question is committed before the answer starts, and the answer is saved on a transaction of its own.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Protocol, TypeVar
from uuid import UUID

import msgspec

from common.auth import Principal
from common.db import Database
from common.errors import NotFound
from kappi.access.identities import IdentityReader
from kappi.access.policy import agent_visible, readable, searches_nothing
from kappi.agent.cache import AgentCache
from kappi.agent.models import Agent
from kappi.agent.repository import AgentRepository
from kappi.chat.answering import Answerer, AnswerStream, Prepared, citations_of
from kappi.chat.models import (
    Answer,
    Chat,
    ChatDetail,
    ChatRow,
    Citation,
    Message,
    QueryAnswer,
    RetrievalFilters,
    RetrievalTimings,
    Retrieved,
    RetrieveRequest,
)
from kappi.chat.repository import ChatRepository
from kappi.llm.base import ChatMessage
from kappi.llm.registry import LlmRegistry
from kappi.retrieval.service import Retrieval, Retriever, by_document, narrowed, rerank_choice

HISTORY_MESSAGES = 6
"""Recent messages (three turns) sent with a follow-up question."""
UNTITLED = "New chat"
TITLE_CHARS = 80
"""Longest title taken from a first question; longer ones are cut at a word and end in an ellipsis."""
ANSWER_DEADLINE_SECONDS = 600.0
"""A ``pending`` answer older than this is shown as interrupted: its process died or could not save it. An
answer still streaming past it (an LLM may stream for as long as it keeps sending) is completed as usual."""


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
    back without their text and citations; an answer that was only *given* such passages, citing none, stays
    (those passages are hidden). History shows what the user may read today, and a revocation applies
    to past answers as it does to the next question. Identities are read live: no chunk filter stands behind
    this decision, so a cached identity could show a revoked answer."""
    cited = sorted({(c.vector_provider, c.collection) for m in messages for c in (*m.citations, *m.also_retrieved)})
    if not cited:
        return messages
    statuses = await identities.read_live(cited)
    readable_now = {
        key for key, status in zip(cited, statuses, strict=True)
        if status.identity is not None and readable(status.identity, groups)
    }  # fmt: skip
    return [
        _readable_part(m, readable_now)
        if all((c.vector_provider, c.collection) in readable_now for c in m.citations)
        else msgspec.structs.replace(m, content="", citations=[], also_retrieved=[], withheld=True)
        for m in messages
    ]


def _readable_part(message: Message, readable_now: set[tuple[str, str]]) -> Message:
    """An answer the user may still read: only an answer's *cited* passages decide that (its stored sources
    are what it drew on); passages it was given without citing them are hidden when unreadable now."""
    shown = [c for c in message.also_retrieved if (c.vector_provider, c.collection) in readable_now]
    return (
        message if len(shown) == len(message.also_retrieved) else msgspec.structs.replace(message, also_retrieved=shown)
    )


class ChatService:
    def __init__(self, db: Database, retriever: Retriever, llms: LlmRegistry, agents: AgentCache) -> None:
        self.db = db
        self.retriever = retriever
        self.identities = retriever.identities
        self.answerer = Answerer(db, retriever, llms)
        self.agents = agents
        """The stateless API's agents, read from memory (:class:`AgentCache`)."""

    async def usable_agents(self, principal: Principal) -> list[Agent]:
        """The agents this user may use, without those that can search nothing for them (every collection restricted
        to other groups, as the admin's access check says: :func:`~kappi.access.policy.searches_nothing`); their
        collections' groups are read as they are now."""
        async with self.db.transaction() as conn:
            agents = AgentRepository(conn)
            rows = await agents.rows(active_only=True)
            visible = [await agents.assemble(r) for r in rows if agent_visible(r.groups, principal.groups)]
        return [agent for agent in visible if not await self._searches_nothing(agent, principal.groups)]

    async def _searches_nothing(self, agent: Agent, groups: frozenset[str]) -> bool:
        if not agent.collections:
            return False  # a plain assistant: no identity to read
        verdicts = await self.retriever.verdicts(agent.collections, groups)
        return searches_nothing([verdict.reason for verdict, _ in verdicts])

    async def visible_agent(self, agent_id: UUID, principal: Principal) -> Agent:
        """The agent if this user may use it now; otherwise "not found" (its existence is not revealed)."""
        async with self.db.transaction() as conn:
            return await _visible_agent(AgentRepository(conn), agent_id, principal)

    async def create(self, agent_id: UUID, title: str | None, principal: Principal) -> Chat:
        async with self.db.transaction() as conn:
            agent = await _visible_agent(AgentRepository(conn), agent_id, principal)
            chat_id = uuid.uuid4()
            chats = ChatRepository(conn)
            await chats.create(chat_id, agent.id, principal.subject, title)
            return await _chat(chats, chat_id, principal)

    async def get(self, chat_id: UUID, principal: Principal) -> Chat:
        async with self.db.transaction() as conn:
            return await _chat(ChatRepository(conn), chat_id, principal)

    async def detail(self, chat_id: UUID, principal: Principal) -> ChatDetail:
        async with self.db.transaction() as conn:
            chats = ChatRepository(conn)
            chat = await _chat(chats, chat_id, principal)
            messages = _settled(await chats.messages(chat.id))
        return ChatDetail(chat=chat, messages=await withhold(messages, principal.groups, self.identities))

    async def mine(self, principal: Principal, limit: int, offset: int) -> list[Chat]:
        async with self.db.transaction() as conn:
            rows = await ChatRepository(conn).of_owner(principal.subject, limit, offset)
        return [_chat_view(row, principal) for row in rows]

    async def rename(self, chat_id: UUID, title: str, principal: Principal) -> Chat:
        async with self.db.transaction() as conn:
            chats = ChatRepository(conn)
            if not await chats.rename(chat_id, principal.subject, title):
                raise NotFound(f"No chat {chat_id}.", code="chat_not_found")
            return await _chat(chats, chat_id, principal)

    async def delete(self, chat_id: UUID, principal: Principal) -> None:
        async with self.db.transaction() as conn:
            if not await ChatRepository(conn).delete(chat_id, principal.subject):
                raise NotFound(f"No chat {chat_id}.", code="chat_not_found")

    async def ask(self, chat_id: UUID, content: str, principal: Principal) -> Answer:
        return await self.answerer.answer(await self.prepare(chat_id, content, principal))

    async def ask_streaming(self, chat_id: UUID, content: str, principal: Principal) -> AnswerStream:
        return AnswerStream(self.answerer, await self.prepare(chat_id, content, principal))

    async def ask_once(
        self, agent_id: UUID, content: str, principal: Principal, filters: RetrievalFilters | None = None
    ) -> QueryAnswer:
        """A stateless question: the agent from memory (no database round trip), nothing stored. ``filters``
        narrow what its assignments search (:func:`~kappi.retrieval.service.narrowed`)."""
        agent = visible(await self.agents.get(agent_id), agent_id, principal)
        if filters is not None:
            collections = narrowed(agent.collections, tags=filters.tags, labels=filters.labels)
            agent = msgspec.structs.replace(agent, collections=collections)
        prepared = Prepared(agent=agent, config=agent.config, text=content, history=[], groups=principal.groups)
        return await self.answerer.query(prepared)

    async def retrieve_once(self, agent_id: UUID, request: RetrieveRequest, principal: Principal) -> Retrieved:
        """A stateless question's retrieval without its LLM: the same agent check, both access checks in
        :meth:`Retriever.retrieve`, and the agent's reranker. ``top_k`` caps the merged passages (or documents)
        and searches each collection at least that deep; ``filters`` narrow the assignments' own."""
        agent = visible(await self.agents.get(agent_id), agent_id, principal)
        filters = request.filters or RetrievalFilters()
        assignments = narrowed(agent.collections, tags=filters.tags, labels=filters.labels, depth=request.top_k)
        retrieval = await self.answerer.retriever.retrieve(
            assignments, principal.groups, request.content, rerank=rerank_choice(agent.config)
        )
        citations = _grouped_citations(retrieval) if request.group_by == "document" else citations_of(retrieval)
        return Retrieved(
            citations=citations[: request.top_k],
            timings=RetrievalTimings(
                embed_ms=retrieval.embed_ms, search_ms=retrieval.search_ms, rerank_ms=retrieval.rerank_ms
            ),
            reranked=retrieval.reranked,
        )

    async def prepare(self, chat_id: UUID, content: str, principal: Principal) -> Prepared:
        """Check access and store the question with its ``pending`` answer, committed before answering starts:
        an answer can take a minute of LLM time and must not hold a connection for it."""
        async with self.db.transaction() as conn:
            chats = ChatRepository(conn)
            chat = await _chat(chats, chat_id, principal)
            agent = await _visible_agent(AgentRepository(conn), chat.agent_id, principal)
            recent = await withhold(await chats.messages(chat.id, limit=HISTORY_MESSAGES), principal.groups,
                                    self.identities)  # fmt: skip
            history = [
                ChatMessage(role=m.role, content=m.content) for m in recent if m.status == "complete" and not m.withheld
            ]
            question = await chats.add_message(uuid.uuid4(), chat.id, "user", content)
            await chats.title_if_untitled(chat.id, title_from(content))
            # Stored with the question, so no question is ever left without an answer, whatever happens next.
            answer = await chats.add_message(
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


def _grouped_citations(retrieval: Retrieval) -> list[Citation]:
    """One citation per document, its best passage, numbered in order, with its count of passages."""
    grouped = by_document(retrieval.chunks)
    citations = citations_of(msgspec.structs.replace(retrieval, chunks=[chunk for chunk, _ in grouped]))
    return [msgspec.structs.replace(c, document_hits=n) for c, (_, n) in zip(citations, grouped, strict=True)]


async def _visible_agent(agents: AgentRepository, agent_id: UUID, principal: Principal) -> Agent:
    return await agents.assemble(visible(await agents.row(agent_id), agent_id, principal))


async def _chat(chats: ChatRepository, chat_id: UUID, principal: Principal) -> Chat:
    row = await chats.get(chat_id, principal.subject)
    if row is None:
        raise NotFound(f"No chat {chat_id}.", code="chat_not_found")
    return _chat_view(row, principal)


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
