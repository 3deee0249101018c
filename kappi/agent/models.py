"""What the agents API speaks. Admins see everything; users see only :class:`UserAgent`."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated
from uuid import UUID

import msgspec

from common.groups import GroupName
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


class AgentCreate(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    name: Name
    description: Annotated[str, msgspec.Meta(max_length=2_000)] = ""
    groups: Annotated[list[GroupName], msgspec.Meta(max_length=100)] = msgspec.field(default_factory=list)
    """Who may see and use the agent (any one group suffices); empty = everyone."""
    llm_provider: str = "extractive"
    llm_model: str = "extractive"
    system_prompt: Prompt = DEFAULT_SYSTEM_PROMPT
    context_template: Prompt | None = None
    """Wraps the retrieved sources; ``{context}`` marks where they go. Default: the sources alone."""
    temperature: Temperature = 0.2
    max_tokens: MaxTokens = 800


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


VERSIONED_FIELDS = ("llm_provider", "llm_model", "system_prompt", "context_template", "temperature", "max_tokens")


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


class Assignment(msgspec.Struct, frozen=True, kw_only=True):
    vector_provider: str
    name: str
    collection_id: str
    top_k: int
    max_distance: float | None
    instruction: str
    created_at: datetime


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
    collections: list[Verdict]
