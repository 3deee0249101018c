"""Any server that speaks OpenAI's streaming ``POST /v1/chat/completions``: OpenAI, Ollama, vLLM, llama.cpp, LM Studio.

We talk to it with ``httpx`` (already a dependency) and the small SSE parser in :mod:`kappi.llm.sse` rather than
the ``openai`` SDK: the wire format is one documented request and a stream of ``data: {json}`` lines ending with
``data: [DONE]``, the servers we target differ from OpenAI in ways an SDK does not smooth over (Ollama needs no
key; error bodies vary), and another SDK would add a second HTTP stack and its retry policy to reason about.

``stream_options.include_usage`` asks for token counts in one last chunk with no choices; servers that ignore it
leave :class:`~kappi.llm.base.Usage` empty. ``max_tokens`` is used rather than ``max_completion_tokens`` because
every compatible server accepts it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Sequence
from contextlib import aclosing
from typing import Any

import httpx
import msgspec

from common.errors import AppError, Unavailable
from kappi.llm.base import LlmEvent, LlmRequest, Token, Usage
from kappi.llm.errors import broken_stream, error_message, next_within, status_error, timeout_error, transport_error
from kappi.llm.prompt import build_messages
from kappi.llm.sse import SseParser

# Upstream payloads carry many fields we do not need and gain new ones; unknown fields are ignored on purpose.


class _Delta(msgspec.Struct):
    content: str | None = None


class _Choice(msgspec.Struct):
    delta: _Delta | None = None
    finish_reason: str | None = None


class _TokenCounts(msgspec.Struct):
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


class _Chunk(msgspec.Struct):
    choices: list[_Choice] = msgspec.field(default_factory=list)
    usage: _TokenCounts | None = None
    error: Any = None
    """``{"error": {...}}``: how OpenAI and most servers report a failure after the stream has started."""
    object: str | None = None
    message: Any = None
    """``{"object": "error", "message": ...}``: how vLLM reports one."""


_decode_chunk = msgspec.json.Decoder(_Chunk).decode
_DONE = _Chunk()
BUSY_RETRY_AFTER_SECONDS = 2
"""``Retry-After`` of an ``llm_busy`` refusal: a short answer's time on a small local model, so a client's retry
usually finds a place free."""


class OpenAICompatibleProvider:
    """Streams answers from one OpenAI-compatible server.

    Args:
        base_url: The API root including ``/v1``, e.g. ``http://localhost:11434/v1`` for Ollama.
        api_key: Sent as a bearer token when set; local servers usually need none.
        models: Models to offer; empty lets any model name through to the server, which then decides.
        timeout: Longest wait, in seconds, for the response and then for each streamed event.
        connect_timeout: Longest wait to open the connection.
        name: The registry name: ``openai``, or ``local`` for the embedded llama.cpp server.
        max_concurrent: Most answers streamed at once; one more is refused at once with ``llm_busy`` (503)
            rather than queued without bound. ``None``: the server decides.
    """

    reads_system_prompt = True

    def __init__(
        self,
        *,
        base_url: str,
        api_key: str | None = None,
        models: Sequence[str] = (),
        timeout: float = 60.0,
        connect_timeout: float = 10.0,
        name: str = "openai",
        max_concurrent: int | None = None,
    ) -> None:
        self.name = name
        self._max_concurrent = max_concurrent
        self._in_flight = 0
        headers = {"accept": "text/event-stream", "content-type": "application/json"}
        if api_key:
            headers["authorization"] = f"Bearer {api_key}"
        self._client = httpx.AsyncClient(
            base_url=base_url,
            headers=headers,
            timeout=httpx.Timeout(timeout, connect=connect_timeout),
        )
        self._models = list(models)
        self._timeout = timeout

    def models(self) -> list[str]:
        return list(self._models)

    async def stream(self, request: LlmRequest) -> AsyncGenerator[LlmEvent, None]:
        """The answer's events; with ``max_concurrent``, refused with ``llm_busy`` when that many are streaming."""
        if self._max_concurrent is not None and self._in_flight >= self._max_concurrent:
            raise Unavailable(
                f"{self.name} is answering {self._in_flight} questions, its most at once; try again shortly",
                code="llm_busy",
                extra={"provider": self.name, "max_concurrent": self._max_concurrent},
                retry_after_seconds=BUSY_RETRY_AFTER_SECONDS,
            )
        self._in_flight += 1
        try:
            async with aclosing(self._stream(request)) as events:
                async for event in events:
                    yield event
        finally:
            self._in_flight -= 1

    async def _stream(self, request: LlmRequest) -> AsyncGenerator[LlmEvent, None]:
        body = {
            "model": request.model,
            "messages": build_messages(request),
            "temperature": request.temperature,
            "max_tokens": request.max_tokens,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        http_request = self._client.build_request("POST", "chat/completions", content=msgspec.json.encode(body))
        try:
            async with asyncio.timeout(self._timeout):
                response = await self._client.send(http_request, stream=True)
        except TimeoutError:
            raise timeout_error(self.name, self._timeout) from None
        except httpx.TransportError as exc:
            raise transport_error(self.name, exc, self._timeout) from exc
        try:
            if response.is_error:
                raise await self._status_error(response)
            async with aclosing(self._answer(response)) as events:
                async for event in events:
                    yield event
        except TimeoutError:
            raise timeout_error(self.name, self._timeout) from None
        except httpx.TransportError as exc:
            raise transport_error(self.name, exc, self._timeout) from exc
        finally:
            await response.aclose()  # an unfinished body is dropped with its connection: the server stops generating

    async def _answer(self, response: httpx.Response) -> AsyncGenerator[LlmEvent, None]:
        counts: _TokenCounts | None = None
        complete = False
        async with aclosing(self._chunks(response)) as chunks:
            while (chunk := await next_within(chunks, self._timeout)) is not None:
                if chunk is _DONE:
                    complete = True
                    continue
                if chunk.error is not None or chunk.object == "error":
                    raise broken_stream(self.name, error_message({"error": chunk.error, "message": chunk.message}))
                for choice in chunk.choices:
                    if choice.delta is not None and choice.delta.content:
                        yield Token(text=choice.delta.content)
                    complete = complete or choice.finish_reason is not None
                counts = chunk.usage or counts
        if not complete:
            raise broken_stream(self.name, "the stream ended before the answer was complete")
        yield Usage(input_tokens=counts.prompt_tokens, output_tokens=counts.completion_tokens) if counts else Usage()

    async def _chunks(self, response: httpx.Response) -> AsyncGenerator[_Chunk, None]:
        """Decoded chunks, ``_DONE`` for ``[DONE]``; read to the end so the connection can be reused."""
        parser = SseParser()
        done = False
        async for raw in response.aiter_bytes():
            for event in parser.feed(raw):
                if done:
                    continue
                if event.data == "[DONE]":
                    done = True
                    yield _DONE
                    continue
                try:
                    chunk = _decode_chunk(event.data)
                except msgspec.DecodeError as exc:
                    # Not quoted: the event may hold the model's raw text (its system prompt repeated, #26), and
                    # this detail reaches the user and the log.
                    raise broken_stream(self.name, f"malformed event ({len(event.data)} characters)") from exc
                yield chunk

    async def _status_error(self, response: httpx.Response) -> AppError:
        async with asyncio.timeout(self._timeout):
            body = await response.aread()
        try:
            parsed: Any = msgspec.json.decode(body)
        except msgspec.DecodeError:
            parsed = body.decode("utf-8", errors="replace")
        return status_error(self.name, response.status_code, error_message(parsed))

    async def aclose(self) -> None:
        await self._client.aclose()
