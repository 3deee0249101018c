"""The LLM port: what kappi's chat service needs from any language-model provider.

A provider turns one :class:`LlmRequest` (the agent's instructions, the conversation and the passages retrieval
found) into a stream of :class:`Token` events followed by exactly one :class:`Usage`. Vendor types never cross
this port. Failures are raised from the stream as Ragu errors with stable codes, so the chat service can end its
SSE response with a clear error event instead of hanging:

    Unavailable   llm_unavailable   upstream down, overloaded (429/5xx) or the stream broke off
    Unavailable   llm_auth_failed   upstream refused our credentials (401/403)
    Unavailable   llm_timeout       no event within the provider's timeout (a stalled upstream)
    InvalidInput  llm_rejected      upstream refused the request itself (unknown model, prompt too long)
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import aclosing
from typing import Annotated, Literal, Protocol

import msgspec


class ChatMessage(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    role: Literal["system", "user", "assistant"]
    content: str


class Passage(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One retrieved passage, numbered so the answer can cite it as ``[citation]``."""

    collection: str
    instruction: str | None
    """The collection's note to the model (e.g. "Prefer the 2024 handbook"), rendered once per collection."""
    document_id: str
    document_name: str | None
    page_start: int | None
    page_end: int | None
    text: str
    score: float
    citation: Annotated[int, msgspec.Meta(ge=1)]


class LlmRequest(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One answer to generate. ``messages`` is the conversation so far, ending with the user's question."""

    model: str
    system: str
    """The complete system prompt: the agent's instructions and the rendered context (see :mod:`kappi.llm.prompt`);
    empty for a provider that does not read it (:attr:`LlmProvider.reads_system_prompt`)."""
    messages: list[ChatMessage]
    passages: list[Passage]
    """The same passages as in ``system``, for providers that work on them directly (``extractive``)."""
    temperature: float = 0.3
    max_tokens: int = 1024


class Token(msgspec.Struct, frozen=True, kw_only=True):
    """The next piece of the answer's text, to be appended as is."""

    text: str


class Usage(msgspec.Struct, frozen=True, kw_only=True):
    """What the answer cost in model tokens; ``None`` where the upstream did not say."""

    input_tokens: int | None = None
    output_tokens: int | None = None


LlmEvent = Token | Usage


class LlmProvider(Protocol):
    """One way of answering: an offline extractor, a vendor SDK or an OpenAI-compatible server.

    ``stream`` is an async generator. Closing it early (``aclose()``, as the chat service does when the browser
    disconnects) must cancel the upstream call promptly, so an abandoned answer stops costing tokens.
    """

    @property
    def name(self) -> str:
        """The registry key, e.g. ``"cohere"``."""
        ...

    @property
    def reads_system_prompt(self) -> bool:
        """Whether :attr:`LlmRequest.system` is read; rendering the context costs a question ~0.1 ms otherwise."""
        ...

    def models(self) -> list[str]:
        """Models this provider offers; empty when the upstream decides (an OpenAI-compatible server)."""
        ...

    def stream(self, request: LlmRequest) -> AsyncGenerator[LlmEvent, None]:
        """Tokens in order, then one :class:`Usage`; errors are raised as described in the module docstring."""
        ...

    async def aclose(self) -> None:
        """Release HTTP clients; the provider is unusable afterwards."""
        ...


async def complete(provider: LlmProvider, request: LlmRequest) -> tuple[str, Usage]:
    """The whole answer at once, for callers that do not stream (titles, tests, the CLI)."""
    parts: list[str] = []
    usage = Usage()
    async with aclosing(provider.stream(request)) as events:
        async for event in events:
            if isinstance(event, Token):
                parts.append(event.text)
            else:
                usage = event
    return "".join(parts), usage
