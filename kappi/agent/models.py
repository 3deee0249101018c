"""What the agents API speaks. Admins see everything; users see only :class:`UserAgent`."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated
from uuid import UUID

import msgspec

from common.groups import GroupName
from common.vectors.base import DEFAULT_DENSE_WEIGHT, RetrievalMode
from kappi.access.policy import Verdict

DEFAULT_SYSTEM_PROMPT = (
    "You are a helpful assistant. Answer only from the sources provided in the context. "
    "Cite sources with their numbers in square brackets, like [1]. If the sources do not contain the answer, "
    "say so plainly."
)

Name = Annotated[str, msgspec.Meta(min_length=1, max_length=120)]
Prompt = Annotated[str, msgspec.Meta(max_length=20_000)]
Temperature = Annotated[float, msgspec.Meta(ge=0, le=2)]
MaxTokens = Annotated[int, msgspec.Meta(ge=1, le=32_000)]
TopK = Annotated[int, msgspec.Meta(ge=1, le=50)]
Distance = Annotated[float, msgspec.Meta(ge=0, le=2)]
DenseWeight = Annotated[float, msgspec.Meta(ge=0, le=1)]
FilterValue = Annotated[str, msgspec.Meta(min_length=1, max_length=200)]
FilterValues = Annotated[list[FilterValue], msgspec.Meta(min_length=1, max_length=100)]
"""Tags or labels to filter on: at least one (``null`` is "no condition"; an empty list would match nothing)."""
RerankerName = Annotated[str, msgspec.Meta(min_length=1, max_length=100)]


class AgentCreate(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    name: Name
    description: Annotated[str, msgspec.Meta(max_length=2_000)] = ""
    groups: Annotated[list[GroupName], msgspec.Meta(max_length=100)] = msgspec.field(default_factory=list)
    """Who may see and use the agent (any one group suffices); empty = everyone."""
    llm_provider: str | msgspec.UnsetType = msgspec.UNSET
    """Unsent: this server's default (``LlmRegistry.default_choice``: the embedded model when one runs, else
    ``extractive``)."""
    llm_model: str | msgspec.UnsetType = msgspec.UNSET
    """Unsent: the default provider's default model, or the named provider's first model."""
    system_prompt: Prompt = DEFAULT_SYSTEM_PROMPT
    context_template: Prompt | None = None
    """Wraps the retrieved sources; ``{context}`` marks where they go. Default: the sources alone."""
    temperature: Temperature = 0.0
    """0: the same question over the same passages gets the same answer (at 0.2 the embedded model's correctness
    moved by up to 9 points between runs of ``bench/answer_bench.py``); raise it for drafting, not for facts."""
    max_tokens: MaxTokens = 800
    reranker: RerankerName | None = None
    """Reorders the passages of every collection together before the LLM reads them (``cohere`` when
    configured); ``null``: retrieval's order."""
    rerank_model: RerankerName | None = None
    """Unsent with a reranker: its default model."""


class AgentUpdate(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Only the fields sent change; a change to the LLM or instructions makes a new version."""

    name: Name | msgspec.UnsetType = msgspec.UNSET
    description: Annotated[str, msgspec.Meta(max_length=2_000)] | msgspec.UnsetType = msgspec.UNSET
    groups: Annotated[list[GroupName], msgspec.Meta(max_length=100)] | msgspec.UnsetType = msgspec.UNSET
    llm_provider: str | msgspec.UnsetType = msgspec.UNSET
    llm_model: str | msgspec.UnsetType = msgspec.UNSET
    system_prompt: Prompt | msgspec.UnsetType = msgspec.UNSET
    context_template: Prompt | msgspec.UnsetType | None = msgspec.UNSET
    temperature: Temperature | msgspec.UnsetType = msgspec.UNSET
    max_tokens: MaxTokens | msgspec.UnsetType = msgspec.UNSET
    reranker: RerankerName | msgspec.UnsetType | None = msgspec.UNSET
    rerank_model: RerankerName | msgspec.UnsetType | None = msgspec.UNSET


VERSIONED_FIELDS = (
    "llm_provider",
    "llm_model",
    "system_prompt",
    "context_template",
    "temperature",
    "max_tokens",
    "reranker",
    "rerank_model",
)
"""What answers depend on: a change makes a new version. The reranker is here because it reorders what the LLM
reads; an assignment's retrieval settings live with the assignment (they are per collection)."""


class AgentVersion(msgspec.Struct, frozen=True, kw_only=True):
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


class Assignment(msgspec.Struct, frozen=True, kw_only=True):
    vector_provider: str
    name: str
    collection_id: str
    top_k: int
    max_distance: float | None
    instruction: str
    created_at: datetime
    mode: RetrievalMode = "dense"
    """How the collection is searched: ``dense`` (embeddings), ``lexical`` (BM25 over the words) or ``hybrid``
    (both, fused by weighted reciprocal rank)."""
    dense_weight: float = DEFAULT_DENSE_WEIGHT
    """Hybrid only: the dense leg's share of the fusion, 0..1 (1 = the dense order, 0 = the lexical order)."""
    tags: list[str] | None = None
    """Only chunks of documents carrying at least one of these tags; ``None``: no condition."""
    labels: list[str] | None = None
    """Only chunks of documents whose label is one of these; ``None``: no condition."""


class Agent(msgspec.Struct, frozen=True, kw_only=True):
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


class UserAgent(msgspec.Struct, frozen=True, kw_only=True):
    """An agent as a user sees it: nothing about its collections or groups."""

    id: UUID
    name: str
    description: str
    llm_model: str


class CollectionRef(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    vector_provider: str
    name: Annotated[str, msgspec.Meta(min_length=1, max_length=255)]


class AssignmentSpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    vector_provider: str
    name: Annotated[str, msgspec.Meta(min_length=1, max_length=255)]
    top_k: TopK = 5
    max_distance: Distance | None = None
    instruction: Annotated[str, msgspec.Meta(max_length=1_000)] = ""
    """One line telling the LLM what the collection holds, e.g. "HR policies for all staff"."""
    mode: RetrievalMode | msgspec.UnsetType = msgspec.UNSET
    """``dense``, ``lexical`` or ``hybrid``. Unsent: ``hybrid`` for a new assignment, and an assignment being
    updated keeps its own (so no one's answers change unasked) — as do the three fields below."""
    dense_weight: DenseWeight | msgspec.UnsetType = msgspec.UNSET
    """Hybrid only: the dense leg's share, 0..1; new assignments get 0.5."""
    tags: FilterValues | msgspec.UnsetType | None = msgspec.UNSET
    """Search only documents tagged with at least one of these ("only documents tagged policy"); ``null``: all."""
    labels: FilterValues | msgspec.UnsetType | None = msgspec.UNSET
    """Search only documents whose label is one of these; ``null``: all."""


class AssignmentChanges(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    add: Annotated[list[AssignmentSpec], msgspec.Meta(max_length=100)] = msgspec.field(default_factory=list)
    """Added, or updated when already assigned."""
    remove: Annotated[list[CollectionRef], msgspec.Meta(max_length=100)] = msgspec.field(default_factory=list)


class AssignmentResult(msgspec.Struct, frozen=True, kw_only=True):
    vector_provider: str
    name: str
    action: str
    ok: bool
    code: str | None = None
    detail: str | None = None


class AssignmentReport(msgspec.Struct, frozen=True, kw_only=True):
    results: list[AssignmentResult]
    collections: list[Assignment]


class AccessQuery(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Explain access for a set of groups, or for the user a token belongs to."""

    groups: list[str] | None = None
    token: str | None = None


class AccessExplanation(msgspec.Struct, frozen=True, kw_only=True):
    groups: list[str]
    subject: str | None
    agent_visible: bool
    """Whether these groups may see and use the agent at all."""
    searches_nothing: bool
    """Whether the agent has collections and every one is restricted to groups these do not include: through it,
    the user can search nothing (an agent with no collections is a plain assistant: false)."""
    collections: list[Verdict]
