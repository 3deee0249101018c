"""What the OpenAI-compatible API speaks: OpenAI's Chat Completions and Models shapes, plus the documented
``ragu_`` extension fields that carry an answer's citations."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from kappi.chat.models import Citation

MAX_MESSAGES = 200
"""Messages in one request; only the last few are used (the question and up to six before it)."""
MessageText = Annotated[str, msgspec.Meta(max_length=10_000)]
"""As long as a question to the chat API may be."""


class ContentPart(msgspec.Struct, frozen=True, kw_only=True):
    """A part of a message's content; only ``text`` parts are read (an image is refused, never ignored)."""

    type: Annotated[str, msgspec.Meta(max_length=50)]
    text: MessageText | None = None


class InputMessage(msgspec.Struct, frozen=True, kw_only=True):
    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: MessageText | Annotated[list[ContentPart], msgspec.Meta(max_length=100)] | None = None


class StreamOptions(msgspec.Struct, frozen=True, kw_only=True):
    include_usage: bool | None = None
    """A last chunk with no choices and the answer's ``usage``, before ``[DONE]``."""


class CompletionRequest(msgspec.Struct, frozen=True, kw_only=True):
    """OpenAI's request. Fields the agent's own configuration decides (``temperature``, ``max_tokens``, ``tools``
    and the rest) are accepted and ignored, as unknown ones are, so any OpenAI client's defaults are taken."""

    model: Annotated[str, msgspec.Meta(min_length=1, max_length=200)]
    """The id of an agent the caller may use (``GET /v1/models``)."""
    messages: Annotated[list[InputMessage], msgspec.Meta(min_length=1, max_length=MAX_MESSAGES)]
    stream: bool | None = False
    stream_options: StreamOptions | None = None
    n: Annotated[int, msgspec.Meta(ge=1, le=1)] | None = None
    """One answer per request: there is one grounded answer to a question."""


class ModelCard(msgspec.Struct, frozen=True, kw_only=True):
    """An agent as an OpenAI model object; ``name`` and ``description`` are the agent's (chat front ends show them)."""

    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str = "ragu"
    name: str
    description: str


class ModelList(msgspec.Struct, frozen=True, kw_only=True):
    object: Literal["list"] = "list"
    data: list[ModelCard]


class CompletionUsage(msgspec.Struct, frozen=True, kw_only=True):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class AssistantMessage(msgspec.Struct, frozen=True, kw_only=True):
    role: Literal["assistant"] = "assistant"
    content: str
    ragu_citations: list[Citation]
    """Extension: the passages the answer cites, numbered as its ``[n]`` markers (the query API's ``citations``)."""
    ragu_also_retrieved: list[Citation]
    """Extension: the passages the answer was given and does not cite (the query API's ``also_retrieved``)."""


class Choice(msgspec.Struct, frozen=True, kw_only=True):
    index: int = 0
    message: AssistantMessage
    finish_reason: Literal["stop"] = "stop"
    logprobs: None = None


class Completion(msgspec.Struct, frozen=True, kw_only=True):
    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    choices: list[Choice]
    usage: CompletionUsage


class Delta(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A chunk's part of the answer: the role first, then text; the last holds the extension fields."""

    role: Literal["assistant"] | None = None
    content: str | None = None
    ragu_citations: list[Citation] | None = None
    ragu_also_retrieved: list[Citation] | None = None


class ChunkChoice(msgspec.Struct, frozen=True, kw_only=True):
    index: int = 0
    delta: Delta
    finish_reason: Literal["stop"] | None = None
    logprobs: None = None


class CompletionChunk(msgspec.Struct, frozen=True, kw_only=True):
    id: str
    object: Literal["chat.completion.chunk"] = "chat.completion.chunk"
    created: int
    model: str
    choices: list[ChunkChoice]
    usage: CompletionUsage | None = None
