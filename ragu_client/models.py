"""What the client reads and sends: kappi's user API and chonkit's admin API, as msgspec Structs.

Each Struct is named as the component of the service's OpenAPI document it mirrors, and
``tests/ragu_client/test_openapi_models.py`` checks every field against it, so a changed API fails CI
instead of a caller. Fields the services add later are ignored when decoding (no ``forbid_unknown_fields``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal
from uuid import UUID

import msgspec

# kappi: the user API


class UserAgent(msgspec.Struct, frozen=True, kw_only=True):
    id: UUID
    name: str
    description: str
    llm_model: str


class Legs(msgspec.Struct, frozen=True, kw_only=True):
    """Which leg of a lexical or hybrid search found a passage (``None``: that leg did not)."""

    dense_rank: int | None
    lexical_rank: int | None
    lexical_score: float | None
    fused_score: float | None


class Citation(msgspec.Struct, frozen=True, kw_only=True):
    """One passage, numbered as the ``[n]`` markers of an answer."""

    citation: int
    collection: str
    vector_provider: str
    document_id: str
    document_name: str | None
    page_start: int | None
    page_end: int | None
    text: str
    score: float
    legs: Legs | None = None
    rerank_score: float | None = None
    document_hits: int | None = None
    """With ``group_by="document"``: how many of the passages found came from this document."""


class Usage(msgspec.Struct, frozen=True, kw_only=True):
    input_tokens: int | None = None
    output_tokens: int | None = None


class Timings(msgspec.Struct, frozen=True, kw_only=True):
    embed_ms: float
    search_ms: float
    llm_ms: float
    total_ms: float


class RetrievalTimings(msgspec.Struct, frozen=True, kw_only=True):
    embed_ms: float
    search_ms: float
    rerank_ms: float = 0.0


class QueryAnswer(msgspec.Struct, frozen=True, kw_only=True):
    answer: str
    citations: list[Citation]
    """The passages the answer cites."""
    usage: Usage
    timings: Timings
    also_retrieved: list[Citation] = msgspec.field(default_factory=list)
    """Passages the answer was given but does not cite."""
    grounding: Grounding | None = None


class Retrieved(msgspec.Struct, frozen=True, kw_only=True):
    citations: list[Citation]
    timings: RetrievalTimings
    reranked: bool | None = None


class Chat(msgspec.Struct, frozen=True, kw_only=True):
    id: UUID
    agent_id: UUID
    agent_name: str | None
    agent_available: bool
    title: str
    created_at: datetime
    updated_at: datetime


class Message(msgspec.Struct, frozen=True, kw_only=True):
    id: UUID
    role: Literal["user", "assistant"]
    content: str
    status: Literal["pending", "complete", "error", "cancelled"]
    agent_version: int | None
    citations: list[Citation]
    usage: Usage | None
    timings: Timings | None
    error_code: str | None
    created_at: datetime
    also_retrieved: list[Citation] = msgspec.field(default_factory=list)
    withheld: bool = False


class ChatDetail(msgspec.Struct, frozen=True, kw_only=True):
    chat: Chat
    messages: list[Message]


class Answer(msgspec.Struct, frozen=True, kw_only=True):
    question: Message
    answer: Message


class Question(msgspec.Struct, frozen=True, kw_only=True):
    content: str


class RetrievalFilters(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """Narrow a question to documents by tag or label; the agent's own filters still hold."""

    tags: list[str] | None = None
    labels: list[str] | None = None


class QueryRequest(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    content: str
    filters: RetrievalFilters | None = None


class RetrieveRequest(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    content: str
    top_k: int | None = None
    filters: RetrievalFilters | None = None
    group_by: Literal["chunk", "document"] = "chunk"


class ChatCreate(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    agent_id: UUID
    title: str | None = None


class ChatRename(msgspec.Struct, frozen=True, kw_only=True):
    title: str


# kappi: the events of a streamed answer (SSE; named by their ``event:`` field)


class Sources(msgspec.Struct, frozen=True, kw_only=True):
    """First: the passages the answer is given (those above the relevance floor), numbered as it may cite them."""

    citations: list[Citation]


class AnswerToken(msgspec.Struct, frozen=True, kw_only=True):
    """Answer text, in order."""

    text: str


class Grounding(msgspec.Struct, frozen=True, kw_only=True):
    """``declined``: no passage passed the relevance floor, so the answer says so and no model was called;
    ``dropped_sentences``: sentences of the model's answer left out; ``unsupported``: why each was, in order
    (``no_source``: it rests on no passage the answer was given, the agent's instructions among them;
    ``repeats_prompt``: it repeats the answering rules or the question), never its words."""

    declined: bool
    dropped_sentences: int
    unsupported: list[Literal["no_source", "repeats_prompt"]] = msgspec.field(default_factory=list)


class Done(msgspec.Struct, frozen=True, kw_only=True):
    """Last, when the answer is complete."""

    message_id: UUID | None
    usage: Usage
    timings: Timings
    sources_used: int
    """How many passages the answer cites."""
    citations: list[Citation] = msgspec.field(default_factory=list)
    """The passages the answer cites."""
    also_retrieved: list[Citation] = msgspec.field(default_factory=list)
    """The passages it was given and does not cite."""
    grounding: Grounding | None = None
    """What grounding did to the answer."""


AnswerEvent = Sources | AnswerToken | Done

# chonkit: the admin API


class Document(msgspec.Struct, frozen=True, kw_only=True):
    id: UUID
    name: str
    label: str | None
    tags: list[str]
    doc_type: str
    media_type: str
    sha256: str
    size_bytes: int
    page_count: int | None
    created_at: datetime
    updated_at: datetime


class FileProblem(msgspec.Struct, frozen=True, kw_only=True):
    """Why one uploaded file was rejected."""

    status: int
    code: str
    detail: str


class UploadResult(msgspec.Struct, frozen=True, kw_only=True):
    filename: str
    status: Literal["created", "duplicate", "rejected"]
    document: Document | None = None
    error: FileProblem | None = None


class UploadResponse(msgspec.Struct, frozen=True, kw_only=True):
    results: list[UploadResult]


class Collection(msgspec.Struct, frozen=True, kw_only=True):
    id: UUID
    name: str
    vector_provider: str
    embedding_provider: str
    model: str
    dimension: int
    groups: list[str]
    document_count: int
    created_at: datetime
    updated_at: datetime


class CollectionCreate(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    name: str
    vector_provider: str = "pgvector"
    embedding_provider: str = "local"
    model: str | None = None
    groups: list[str] = msgspec.field(default_factory=list)


class GroupsUpdate(msgspec.Struct, frozen=True, kw_only=True):
    groups: list[str]


class DocumentIds(msgspec.Struct, frozen=True, kw_only=True):
    document_ids: list[UUID]


Stage = Literal["queued", "parsing", "chunking", "embedding", "writing", "done", "skipped", "failed", "cancelled"]
JobStatus = Literal["queued", "running", "done", "failed", "cancelled"]


class JobItem(msgspec.Struct, frozen=True, kw_only=True):
    document_id: UUID
    document_name: str | None
    stage: Stage
    error_code: str | None
    error: str | None
    reason: str | None
    attempts: int
    chunks: int | None
    tokens: int | None


class Job(msgspec.Struct, frozen=True, kw_only=True):
    """A job as ``GET /jobs/{id}`` shows it, and each ``job`` event of its stream (``items``: those changed)."""

    id: UUID
    collection_id: UUID
    kind: Literal["embed", "remove", "reembed"]
    """``reembed``: a collection's move to another embedding model."""
    status: JobStatus
    cancel_requested: bool
    created_at: datetime
    progress: dict[str, int]
    total: int
    items: list[JobItem]

    @property
    def finished(self) -> bool:
        return self.status in ("done", "failed", "cancelled")


class Superseded(msgspec.Struct, frozen=True, kw_only=True):
    """An embedding a removal cancelled (its item ends ``cancelled``, ``error_code`` ``document_removed``)."""

    job_id: UUID
    document_id: UUID
    stage: Stage
    """The stage the embedding was in when the removal took it."""


class JobCreated(msgspec.Struct, frozen=True, kw_only=True):
    job: Job | None
    """``None`` when every document was already queued or running in another job."""
    already_queued: list[UUID]
    superseded: list[Superseded] = msgspec.field(default_factory=list)
    """For a removal: the embeddings of the same documents it cancelled, so none writes them back."""


class SearchRequest(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    query: str
    limit: int = 5
    max_distance: float | None = None


class MatchedChunk(msgspec.Struct, frozen=True, kw_only=True):
    score: float
    distance: float
    document_id: str
    document_name: str | None
    chunk_index: int | None
    content: str
    page_start: int | None
    page_end: int | None
    heading_path: list[str]


class SearchResponse(msgspec.Struct, frozen=True, kw_only=True):
    hits: list[MatchedChunk]
    embed_ms: float
    search_ms: float
