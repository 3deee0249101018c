"""What the client reads and sends, as msgspec Structs.

Between the ``BEGIN GENERATED`` and ``END GENERATED`` lines: one Struct per component of kappi's and chonkit's
OpenAPI documents, named as the component, with every one of its properties (type, required or not, default),
written by ``tests/ragu_client/generate.py``; ``tests/ragu_client/test_openapi_models.py`` checks each field
against the documents, so a changed API fails CI instead of a caller. A property the server's document does not
require is, when absent, its documented default, ``None`` where it may be null, or else ``msgspec.UNSET`` (in a
request: left out, so the server's default applies). Fields a service adds later are ignored when decoding.

After it: what neither document describes: the events of a streamed answer and the upload's answer.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal
from uuid import UUID

import msgspec

# BEGIN GENERATED from both services' OpenAPI components by tests/ragu_client/generate.py: do not edit


class AccessExplanation(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    groups: list[str]
    subject: str | None
    agent_visible: bool
    searches_nothing: bool
    collections: list[Verdict]


class AccessQuery(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    groups: list[str] | msgspec.UnsetType | None = msgspec.UNSET
    token: str | msgspec.UnsetType | None = msgspec.UNSET


class Agent(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    id: UUID
    name: str
    description: str
    groups: list[str]
    active: bool
    current_version: int
    config: AgentVersion
    collections: list[Assignment]
    created_at: datetime
    updated_at: datetime


class AgentCreate(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    name: str
    description: str = ""
    groups: list[str] | msgspec.UnsetType = msgspec.UNSET
    llm_provider: str | msgspec.UnsetType = msgspec.UNSET
    llm_model: str | msgspec.UnsetType = msgspec.UNSET
    system_prompt: str = (
        "You are a helpful assistant. Answer only from the sources provided in the context. Cite "
        "sources with their numbers in square brackets, like [1]. If the sources do not contain the "
        "answer, say so plainly."
    )
    context_template: str | msgspec.UnsetType | None = msgspec.UNSET
    temperature: float = 0.0
    max_tokens: int = 800
    reranker: str | msgspec.UnsetType | None = msgspec.UNSET
    rerank_model: str | msgspec.UnsetType | None = msgspec.UNSET


class AgentUpdate(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    name: str | msgspec.UnsetType = msgspec.UNSET
    description: str | msgspec.UnsetType = msgspec.UNSET
    groups: list[str] | msgspec.UnsetType = msgspec.UNSET
    llm_provider: str | msgspec.UnsetType = msgspec.UNSET
    llm_model: str | msgspec.UnsetType = msgspec.UNSET
    system_prompt: str | msgspec.UnsetType = msgspec.UNSET
    context_template: str | msgspec.UnsetType | None = msgspec.UNSET
    temperature: float | msgspec.UnsetType = msgspec.UNSET
    max_tokens: int | msgspec.UnsetType = msgspec.UNSET
    reranker: str | msgspec.UnsetType | None = msgspec.UNSET
    rerank_model: str | msgspec.UnsetType | None = msgspec.UNSET


class AgentVersion(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    version: int
    llm_provider: str
    llm_model: str
    system_prompt: str
    context_template: str | None
    temperature: float
    max_tokens: int
    created_by: str
    created_at: datetime
    reranker: str | None = None
    rerank_model: str | None = None


class Answer(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    question: Message
    answer: Message


class Assignment(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    vector_provider: str
    name: str
    collection_id: str
    top_k: int
    max_distance: float | None
    instruction: str
    created_at: datetime
    mode: Literal["dense", "lexical", "hybrid"] = "dense"
    dense_weight: float = 0.4
    tags: list[str] | None = None
    labels: list[str] | None = None


class AssignmentChanges(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    add: list[AssignmentSpec] | msgspec.UnsetType = msgspec.UNSET
    remove: list[CollectionRef] | msgspec.UnsetType = msgspec.UNSET


class AssignmentReport(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    results: list[AssignmentResult]
    collections: list[Assignment]


class AssignmentResult(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    vector_provider: str
    name: str
    action: str
    ok: bool
    code: str | None = None
    detail: str | None = None


class AssignmentSpec(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    vector_provider: str
    name: str
    top_k: int = 5
    max_distance: float | msgspec.UnsetType | None = msgspec.UNSET
    instruction: str = ""
    mode: Literal["dense", "lexical", "hybrid"] | msgspec.UnsetType = msgspec.UNSET
    dense_weight: float | msgspec.UnsetType = msgspec.UNSET
    tags: list[str] | msgspec.UnsetType | None = msgspec.UNSET
    labels: list[str] | msgspec.UnsetType | None = msgspec.UNSET


class Chat(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    id: UUID
    agent_id: UUID
    agent_name: str | None
    agent_available: bool
    title: str
    created_at: datetime
    updated_at: datetime


class ChatCreate(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    agent_id: UUID
    title: str | msgspec.UnsetType | None = msgspec.UNSET


class ChatDetail(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    chat: Chat
    messages: list[Message]


class ChatRename(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    title: str


class ChunkPreview(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    embedding_provider: str
    model: str
    max_tokens: int
    chunk_count: int
    parent_count: int
    oversized: list[int]
    chunks: list[PreviewChunk]
    parents: list[PreviewChunk]
    truncated: bool


class ChunkPreviewRequest(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    parse: ParseConfig | msgspec.UnsetType | None = msgspec.UNSET
    chunk: FixedChunking | StructureChunking | ParentChildChunking | msgspec.UnsetType | None = msgspec.UNSET
    embedding_provider: str | msgspec.UnsetType | None = msgspec.UNSET
    model: str | msgspec.UnsetType | None = msgspec.UNSET


class Citation(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
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
    ocr: bool = False
    distance: float | None = None
    chunk_index: int | None = None
    citation: int
    document_hits: int | None = None


class Collection(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
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
    model: str | msgspec.UnsetType | None = msgspec.UNSET
    groups: list[str] | msgspec.UnsetType = msgspec.UNSET


class CollectionDetail(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    collection: Collection
    identity: IdentityCheck
    vector_count: int
    documents: list[CollectionDocument]


class CollectionDocument(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    document_id: UUID
    name: str
    document_sha256: str
    current: bool
    chunk_count: int
    embedded_at: datetime


class CollectionModel(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    embedding_provider: str
    model: str
    dimension: int
    migration: Migration | None
    job: Job | None


class CollectionRef(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    vector_provider: str
    name: str


class Document(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    id: UUID
    name: str
    label: str | None
    tags: list[str]
    doc_type: str
    media_type: str
    sha256: str
    size_bytes: int
    page_count: int | None
    ocr_pages: list[int] = msgspec.field(default_factory=list)
    created_at: datetime
    updated_at: datetime


class DocumentConfig(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    parse: ParseConfig | msgspec.UnsetType = msgspec.UNSET
    chunk: FixedChunking | StructureChunking | ParentChildChunking | msgspec.UnsetType | None = msgspec.UNSET


class DocumentIds(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    document_ids: list[UUID]


class DocumentPage(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    items: list[Document]
    total: int
    limit: int
    offset: int


class DocumentPatch(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    name: str | msgspec.UnsetType = msgspec.UNSET
    label: str | msgspec.UnsetType | None = msgspec.UNSET
    tags: list[str] | msgspec.UnsetType = msgspec.UNSET


class EmbeddingChange(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    embedding_provider: str
    model: str | msgspec.UnsetType | None = msgspec.UNSET


class EmbeddingModel(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    provider: str
    model: str
    dimension: int
    max_tokens: int


class EmbeddingReport(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    document_id: UUID
    job_id: UUID | None
    model: str
    tokens: int
    vectors: int
    duration_ms: float
    created_at: datetime


class FixedChunking(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, tag_field="strategy", tag="fixed"):
    unit: Literal["tokens", "characters"] = "tokens"
    size: int = 250
    overlap: int = 25
    snap_to_sentences: bool = True
    repeat_headings: bool = True
    snap_to_headings: bool = True


class FolderSpec(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, tag_field="kind", tag="folder"):
    path: str
    include: list[str] | msgspec.UnsetType = msgspec.UNSET
    exclude: list[str] | msgspec.UnsetType = msgspec.UNSET


class Grounding(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    declined: bool
    dropped_sentences: int
    unsupported: list[Literal["no_source", "repeats_prompt"]] = msgspec.field(default_factory=list)


class GroupsUpdate(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    groups: list[str]


class Health(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    status: str
    service: str


class HitLegs(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    dense_rank: int | None
    """1-based rank among the dense (embedding) leg's candidates; null when that leg did not find the chunk or did not
    run (lexical mode)."""
    lexical_rank: int | None
    """1-based rank among the lexical (keyword, BM25) leg's candidates; null when that leg did not find the chunk or did
    not run (dense mode)."""
    lexical_score: float | None
    """The chunk's BM25 score; null when the lexical leg did not find it."""
    fused_score: float | None
    """Hybrid only: the weighted reciprocal-rank fusion score the hits are ordered by."""


class IdentityCheck(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    identity: dict[str, Any] | None
    valid: bool
    violations: list[str]
    matches_database: bool


class ItemProblem(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    key: str
    action: Literal["failed", "skipped"]
    code: str
    reason: str


class Job(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    id: UUID
    collection_id: UUID
    kind: Literal["embed", "remove", "reembed"]
    status: Literal["queued", "running", "done", "failed", "cancelled"]
    cancel_requested: bool
    created_at: datetime
    progress: dict[str, int]
    total: int
    items: list[JobItem]

    @property
    def finished(self) -> bool:
        """Done, failed or cancelled: nothing more will change."""
        return self.status in ("done", "failed", "cancelled")


class JobCreated(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    job: Job | None
    already_queued: list[UUID]
    superseded: list[Superseded] = msgspec.field(default_factory=list)


class JobItem(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    document_id: UUID
    document_name: str | None
    stage: Literal["queued", "parsing", "chunking", "embedding", "writing", "done", "skipped", "failed", "cancelled"]
    error_code: str | None
    error: str | None
    reason: str | None
    attempts: int
    chunks: int | None
    tokens: int | None
    timings: dict[str, float]
    started_at: datetime | None
    finished_at: datetime | None


class Legs(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    dense_rank: int | None
    lexical_rank: int | None
    lexical_score: float | None
    fused_score: float | None


class LlmCatalog(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    default_provider: str
    default_model: str
    providers: list[LlmOffer]


class LlmFallback(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    provider: str
    reason: str
    detail: str


class LlmOffer(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    provider: str
    models: list[str]
    status: str


class MatchedChunk(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    score: float
    """What the hits are ordered by: cosine similarity (dense), BM25 score (lexical) or fused score (hybrid)."""
    distance: float
    """Cosine distance between the chunk and the query, in every mode."""
    legs: HitLegs
    document_id: str
    document_name: str | None
    tags: list[str]
    """The document's tags, as its chunks carry them."""
    label: str | None
    """The document's label, as its chunks carry it."""
    chunk_index: int | None
    content: str
    page_start: int | None
    page_end: int | None
    heading_path: list[str]
    char_start: int | None
    char_end: int | None
    parent_content: str | None
    ocr: bool = False
    """Some of its text was recognised by OCR (a scanned page)."""
    chunk_count: int | None = None
    """With group_by document: how many of the document's chunks were among the chunks searched (this hit is the best of
    them); null otherwise."""


class Message(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
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


class Migration(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    job_id: UUID
    collection_id: UUID
    version: str
    from_provider: str
    from_model: str
    embedding_provider: str
    model: str
    dimension: int
    state: Literal["building", "done", "failed", "cancelled"]
    error_code: str | None
    error: str | None
    created_at: datetime
    finished_at: datetime | None


class MigrationStatus(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    migration: Migration
    job: Job


class PageRange(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    start: int
    end: int


class ParentChildChunking(
    msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, tag_field="strategy", tag="parent_child"
):
    unit: Literal["tokens", "characters"] = "tokens"
    parent_size: int = 1000
    child_size: int = 250
    child_overlap: int = 25


class ParseConfig(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    page_range: PageRange | msgspec.UnsetType | None = msgspec.UNSET
    line_filters: list[str] | msgspec.UnsetType = msgspec.UNSET
    sections: list[PageRange] | msgspec.UnsetType | None = msgspec.UNSET
    ocr: Literal["off", "auto", "force"] = "auto"


class ParsePreview(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    page_count: int | None
    ocr_pages: list[int] = msgspec.field(default_factory=list)
    characters: int
    block_count: int
    sections: list[PreviewSection]
    truncated: bool


class ParsePreviewRequest(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    parse: ParseConfig | msgspec.UnsetType | None = msgspec.UNSET


class PreviewBlock(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    kind: str
    text: str
    char_start: int
    char_end: int
    page: int | None
    heading_path: list[str]
    ocr: bool = False


class PreviewChunk(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    index: int
    text: str
    token_count: int
    char_start: int
    char_end: int
    page_start: int | None
    page_end: int | None
    heading_path: list[str]
    parent_index: int | None
    oversized: bool
    ocr: bool = False


class PreviewSection(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    title: str | None
    page_start: int | None
    page_end: int | None
    blocks: list[PreviewBlock]


class Providers(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    vector_providers: list[str]
    embedding_models: list[EmbeddingModel]


class QueryAnswer(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    answer: str
    citations: list[Citation]
    usage: Usage
    timings: Timings
    also_retrieved: list[Citation] = msgspec.field(default_factory=list)
    llm_fallback: LlmFallback | None = None
    grounding: Grounding | None = None


class QueryRequest(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    content: str
    filters: RetrievalFilters | msgspec.UnsetType | None = msgspec.UNSET


class Question(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    content: str


class RetrievalFilters(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    tags: list[str] | msgspec.UnsetType | None = msgspec.UNSET
    labels: list[str] | msgspec.UnsetType | None = msgspec.UNSET


class RetrievalTimings(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    embed_ms: float
    search_ms: float
    rerank_ms: float = 0.0


class RetrieveRequest(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    content: str
    top_k: int | msgspec.UnsetType | None = msgspec.UNSET
    filters: RetrievalFilters | msgspec.UnsetType | None = msgspec.UNSET
    group_by: Literal["chunk", "document"] = "chunk"


class Retrieved(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    citations: list[Citation]
    timings: RetrievalTimings
    reranked: bool | None = None


class Run(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    id: UUID
    source_id: UUID
    trigger: Literal["manual", "schedule", "retry"]
    status: Literal["queued", "listing", "embedding", "done", "failed", "cancelled"]
    cancel_requested: bool
    job_id: UUID | None
    job_progress: dict[str, int] | None
    error_code: str | None
    error: str | None
    report: SyncReport
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None


class SearchRequest(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    query: str
    limit: int = 5
    """How many chunks to return: the search depth. With group_by, these chunks are grouped, so fewer hits (one per
    document) come back."""
    max_distance: float | msgspec.UnsetType | None = msgspec.UNSET
    """Keep only chunks within this cosine distance of the query, in every mode."""
    mode: Literal["dense", "lexical", "hybrid"] = "hybrid"
    """dense: by meaning (the embedding's cosine similarity); lexical: by the query's words (BM25); hybrid: both legs
    merged by weighted reciprocal-rank fusion."""
    dense_weight: float = 0.4
    """Hybrid only: the dense leg's share of the fusion (1 = the dense order, 0 = the lexical order)."""
    document_ids: list[UUID] | msgspec.UnsetType | None = msgspec.UNSET
    """Keep only chunks of these documents (empty = every document)."""
    tags: list[str] | msgspec.UnsetType | None = msgspec.UNSET
    """Keep only chunks of documents carrying at least one of these tags."""
    labels: list[str] | msgspec.UnsetType | None = msgspec.UNSET
    """Keep only chunks of documents whose label is one of these."""
    group_by: Literal["document"] | msgspec.UnsetType | None = msgspec.UNSET
    """document: one hit per document, its best chunk with chunk_count, in the order of those best chunks."""


class SearchResponse(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    hits: list[MatchedChunk]
    mode: Literal["dense", "lexical", "hybrid"]
    """The mode the search ran in."""
    embed_ms: float
    search_ms: float


class Source(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    id: UUID
    collection_id: UUID
    name: str
    kind: Literal["folder", "web"]
    spec: FolderSpec | WebSourceSpec
    schedule_minutes: int | None
    tag: str
    item_count: int
    last_run: Run | None
    created_at: datetime
    updated_at: datetime


class SourceCreate(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    name: str
    spec: FolderSpec | WebSourceSpec
    schedule_minutes: int | msgspec.UnsetType | None = msgspec.UNSET


class SourceUpdate(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    name: str | msgspec.UnsetType = msgspec.UNSET
    spec: FolderSpec | WebSourceSpec | msgspec.UnsetType = msgspec.UNSET
    schedule_minutes: int | msgspec.UnsetType | None = msgspec.UNSET


class StructureChunking(
    msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, tag_field="strategy", tag="structure"
):
    unit: Literal["tokens", "characters"] = "tokens"
    size: int = 250
    overlap: int = 25


class Superseded(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    job_id: UUID
    document_id: UUID
    stage: Literal["queued", "parsing", "chunking", "embedding", "writing", "done", "skipped", "failed", "cancelled"]


class SyncReport(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    added: int
    changed: int
    removed: int
    unchanged: int
    failed: int
    skipped: int
    problems: list[ItemProblem]


class Timings(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    embed_ms: float
    search_ms: float
    llm_ms: float
    total_ms: float


class Usage(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    input_tokens: int | None = None
    output_tokens: int | None = None


class UserAgent(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    id: UUID
    name: str
    description: str
    llm_model: str


class Verdict(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    vector_provider: str
    collection: str
    searchable: bool
    reason: Literal[
        "public",
        "member",
        "not_a_member",
        "identity_missing",
        "identity_invalid",
        "provider_unavailable",
        "provider_mismatch",
        "collection_replaced",
    ]
    detail: str
    matched_groups: list[str] = msgspec.field(default_factory=list)
    collection_groups: list[str] | None = None


class WebSourceSpec(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, tag_field="kind", tag="web"):
    url: str
    mode: Literal["page", "sitemap", "crawl"] = "page"
    depth: int = 1
    max_pages: int = 100
    max_bytes: int = 5242880


# END GENERATED

# kappi: the events of a streamed answer (SSE; named by their ``event:`` field)


class Sources(msgspec.Struct, frozen=True, kw_only=True):
    """First: the passages the answer is given (those above the relevance floor), numbered as it may cite them."""

    citations: list[Citation]


class Preliminary(msgspec.Struct, frozen=True, kw_only=True):
    """While a model (not ``extractive``) reads its prompt, at most once: extractive's quote of the same passages,
    so a reader has words at once. Not the answer (the tokens are) and not stored; ``citations`` are the numbers
    of the ``Sources`` passages it quotes."""

    text: str
    citations: list[int]
    provider: str


class AnswerToken(msgspec.Struct, frozen=True, kw_only=True):
    """Answer text, in order."""

    text: str


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
    llm_fallback: LlmFallback | None = None
    """Set when another LLM than the agent's answered, and why."""


AnswerEvent = Sources | Preliminary | AnswerToken | Done

# chonkit: the upload's answer (a response built by hand: 201, 200 or a problem)


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
