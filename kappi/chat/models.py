"""What the chat API speaks: a user's chats, messages, citations and stream events."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal
from uuid import UUID

import msgspec

from kappi.agent.models import FilterValues
from kappi.llm.base import Usage
from kappi.llm.registry import LlmFallback
from kappi.retrieval.models import FoundPassage

Title = Annotated[str, msgspec.Meta(min_length=1, max_length=200)]


class ChatCreate(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    agent_id: UUID
    title: Title | None = None


class ChatRename(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    title: Title


class Question(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    content: Annotated[str, msgspec.Meta(min_length=1, max_length=10_000)]


class RetrievalFilters(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Narrow a question to documents by their metadata. They narrow each assignment's own filters, never
    widen them: with both, a collection is searched for the tags (labels) both name — none in common, nothing."""

    tags: FilterValues | None = None
    """Only documents tagged with at least one of these."""
    labels: FilterValues | None = None
    """Only documents whose label is one of these."""


class QueryRequest(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    content: Annotated[str, msgspec.Meta(min_length=1, max_length=10_000)]
    filters: RetrievalFilters | None = None


class RetrieveRequest(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    content: Annotated[str, msgspec.Meta(min_length=1, max_length=10_000)]
    top_k: Annotated[int, msgspec.Meta(ge=1, le=200)] | None = None
    """At most this many passages (or documents), the best first, each collection searched at least this deep;
    default: what each assignment's own ``top_k`` gives."""
    filters: RetrievalFilters | None = None
    group_by: Literal["chunk", "document"] = "chunk"
    """``document``: the best passage of each document, with ``document_hits`` saying how many it had."""


class Chat(msgspec.Struct, frozen=True, kw_only=True):
    id: UUID
    agent_id: UUID
    agent_name: str | None
    """``None`` once the user may no longer use the agent: they learn nothing about it after that."""
    agent_available: bool
    title: str
    created_at: datetime
    updated_at: datetime


class ChatRow(msgspec.Struct, frozen=True, kw_only=True):
    """A chat as stored, with what decides whether its owner may still see its agent."""

    id: UUID
    agent_id: UUID
    agent_name: str
    agent_groups: list[str]
    agent_active: bool
    title: str | None
    """``None`` until the first question names the chat (unless its owner named it)."""
    created_at: datetime
    updated_at: datetime


class Citation(FoundPassage, frozen=True, kw_only=True):
    """Where a passage of an answer came from; numbered as the ``[n]`` markers in the answer. Its other fields are
    the passage's own (:class:`~kappi.retrieval.models.FoundPassage`), scores rounded to 6 places."""

    citation: int
    document_hits: int | None = None
    """Retrieve with ``group_by: document``: how many of the passages found came from this document."""


class Timings(msgspec.Struct, frozen=True, kw_only=True):
    embed_ms: float
    search_ms: float
    llm_ms: float
    total_ms: float


class Message(msgspec.Struct, frozen=True, kw_only=True):
    id: UUID
    role: Literal["user", "assistant"]
    content: str
    status: Literal["pending", "complete", "error", "cancelled"]
    """An answer is ``pending`` from its question until it ends; one that never ended (its process died, or
    the database was away when it did) reads as ``error`` ``answer_interrupted`` once it is older than
    :data:`kappi.chat.service.ANSWER_DEADLINE_SECONDS`."""
    agent_version: int | None
    citations: list[Citation]
    usage: Usage | None
    timings: Timings | None
    error_code: str | None
    created_at: datetime
    also_retrieved: list[Citation] = msgspec.field(default_factory=list)
    """Passages the answer was given but does not cite (``citations`` are the ones it cites)."""
    withheld: bool = False
    """An answer that quoted a collection its owner may no longer read: its text and citations are not shown
    (nor given to the LLM as history), since access is decided now, not when it was asked."""


class ChatDetail(msgspec.Struct, frozen=True, kw_only=True):
    chat: Chat
    messages: list[Message]


DropReason = Literal["no_source", "repeats_prompt"]
"""Why grounding left a sentence of the model's out: ``no_source``, it rests on no passage the answer was given
(a sentence repeating the agent's confidential instructions among them: they are no source its user may read,
and a reason of their own would tell a user probing with guesses that one matched); ``repeats_prompt``, it repeats
the answering rules or the question."""


class Grounding(msgspec.Struct, frozen=True, kw_only=True):
    """What grounding did to an answer."""

    declined: bool
    """No passage passed the relevance floor: the answer says so, and no model ran."""
    dropped_sentences: int
    """Sentences of the model's left out: resting on no passage, or repeating the prompt."""
    unsupported: list[DropReason] = msgspec.field(default_factory=list)
    """Why each of those was left out, in order: a reason, never the sentence's words. A dropped sentence rests
    on nothing the user may read, and may repeat what they must not (the agent's system prompt, #26), so its text
    is in no response, stored answer or log."""


class QueryAnswer(msgspec.Struct, frozen=True, kw_only=True):
    """A stateless answer: nothing is stored."""

    answer: str
    citations: list[Citation]
    """The passages the answer cites."""
    usage: Usage
    timings: Timings
    also_retrieved: list[Citation] = msgspec.field(default_factory=list)
    """Passages the answer was given but does not cite."""
    llm_fallback: LlmFallback | None = None
    """Set when ``extractive`` answered instead of the agent's local model (not installed, refused, loading or
    down): the provider that answered and why."""
    grounding: Grounding | None = None
    """As the stream's ``done`` event says it; ``null`` when the answer ended before grounding did."""


class RetrievalTimings(msgspec.Struct, frozen=True, kw_only=True):
    embed_ms: float
    search_ms: float
    rerank_ms: float = 0.0


class Retrieved(msgspec.Struct, frozen=True, kw_only=True):
    """The passages a question finds, without an answer: for callers that bring their own LLM."""

    citations: list[Citation]
    timings: RetrievalTimings
    reranked: bool | None = None
    """``null``: the agent has no reranker; ``true``: the passages are in its order; ``false``: it was unavailable,
    so they are in retrieval's order."""


class Answer(msgspec.Struct, frozen=True, kw_only=True):
    question: Message
    answer: Message


def to_builtins(value: Any) -> Any:
    return msgspec.to_builtins(value)
