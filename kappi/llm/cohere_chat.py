"""Cohere's chat models through the official SDK's v2 ``chat_stream`` (``POST /v2/chat``, typed SSE events).

``content-delta`` events become :class:`~kappi.llm.base.Token`; ``message-end`` carries the finish reason and the
usage, reported as billed units when present (what the account pays), else raw token counts. The SDK gets an
httpx client we own: its timeouts are ours, closing the provider closes it, and retries are off (the SDK never
retries a stream anyway; a retry here would only hide an outage behind a longer wait).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from contextlib import aclosing
from typing import TYPE_CHECKING

import httpx

from kappi.llm.base import ChatMessage, LlmEvent, LlmRequest, Token, Usage
from kappi.llm.errors import broken_stream, error_message, next_within, status_error, timeout_error, transport_error
from kappi.llm.prompt import build_messages

if TYPE_CHECKING:
    from cohere import ChatMessageV2
    from cohere import Usage as CohereUsage

COHERE_CHAT_MODELS = ("command-a-03-2025", "command-r-plus-08-2024", "command-r-08-2024", "command-r7b-12-2024")
"""Chat models of Cohere's v2 API (docs.cohere.com/docs/models); override with the ``models`` argument."""


class CohereChatProvider:
    """Streams answers from Cohere.

    Args:
        api_key: The Cohere API key.
        base_url: Another API address (a proxy, or a stand-in in tests); default Cohere's own.
        models: The models to offer.
        timeout: Longest wait, in seconds, for the response and then for each streamed event.
        connect_timeout: Longest wait to open the connection.
    """

    name = "cohere"
    reads_system_prompt = True

    def __init__(
        self,
        *,
        api_key: str,
        base_url: str | None = None,
        models: Sequence[str] = COHERE_CHAT_MODELS,
        timeout: float = 60.0,
        connect_timeout: float = 10.0,
    ) -> None:
        from cohere import AsyncClientV2  # the SDK takes a second to import: only when Cohere is configured

        self._models = list(models)
        self._timeout = timeout
        self._http = httpx.AsyncClient(timeout=httpx.Timeout(timeout, connect=connect_timeout))
        self._client = AsyncClientV2(
            api_key=api_key,
            base_url=base_url,  # passed even when None: the SDK's own default reads CO_API_URL
            httpx_client=self._http,
            max_retries=0,
            log_warning_experimental_features=False,
        )

    def models(self) -> list[str]:
        return list(self._models)

    async def stream(self, request: LlmRequest) -> AsyncGenerator[LlmEvent, None]:
        from cohere import ContentDeltaV2ChatStreamResponse, MessageEndV2ChatStreamResponse
        from cohere.core.api_error import ApiError

        events = self._client.chat_stream(
            model=request.model,
            messages=[_to_cohere(m) for m in build_messages(request)],
            temperature=request.temperature,
            max_tokens=request.max_tokens,
        )
        usage: Usage | None = None
        try:
            async with aclosing(events):  # type: ignore[type-var]  # typed AsyncIterator, is an async generator
                while (event := await next_within(events, self._timeout)) is not None:
                    if isinstance(event, ContentDeltaV2ChatStreamResponse):
                        content = event.delta.message.content if event.delta and event.delta.message else None
                        if content is not None and content.text:
                            yield Token(text=content.text)
                    elif isinstance(event, MessageEndV2ChatStreamResponse) and event.delta is not None:
                        delta = event.delta
                        if delta.error or delta.finish_reason == "ERROR":
                            raise broken_stream(self.name, delta.error or "generation failed")
                        usage = _usage(delta.usage)
        except ApiError as exc:
            raise status_error(self.name, exc.status_code or 0, error_message(exc.body)) from exc
        except TimeoutError:
            raise timeout_error(self.name, self._timeout) from None
        except httpx.TransportError as exc:
            raise transport_error(self.name, exc, self._timeout) from exc
        if usage is None:
            raise broken_stream(self.name, "the stream ended before message-end")
        yield usage

    async def aclose(self) -> None:
        await self._http.aclose()


def _to_cohere(message: ChatMessage) -> ChatMessageV2:
    from cohere import AssistantChatMessageV2, SystemChatMessageV2, UserChatMessageV2

    if message.role == "system":
        return SystemChatMessageV2(content=message.content)
    if message.role == "assistant":
        return AssistantChatMessageV2(content=message.content)
    return UserChatMessageV2(content=message.content)


def _usage(usage: CohereUsage | None) -> Usage:
    """Billed units if Cohere reported them, else raw token counts; the SDK gives floats."""
    counts = None if usage is None else usage.billed_units or usage.tokens
    if counts is None:
        return Usage()
    return Usage(
        input_tokens=None if counts.input_tokens is None else int(counts.input_tokens),
        output_tokens=None if counts.output_tokens is None else int(counts.output_tokens),
    )
