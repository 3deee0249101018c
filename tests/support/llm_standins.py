"""Stand-ins for the chat-model servers kappi streams from, which cannot run on this machine.

Each is a real HTTP/1.1 server on 127.0.0.1 (an ephemeral port) that speaks the vendor's wire format:

* :class:`OpenAIStandin` — ``POST /v1/chat/completions`` with ``stream: true``: chunked ``text/event-stream`` of
  ``data: {chat.completion.chunk}`` events, a ``: keep-alive`` comment, the usage chunk (``choices: []``) when
  ``stream_options.include_usage`` asks for it, then ``data: [DONE]``; errors as ``{"error": {"message": ...}}``.
* :class:`CohereChatStandin` — Cohere's ``POST /v2/chat`` stream as the SDK's v2 ``chat_stream`` parses it:
  ``event:``/``data:`` pairs typed ``message-start``, ``content-start``, ``content-delta`` (text at
  ``delta.message.content.text``), ``content-end``, ``message-end`` (``finish_reason`` and ``usage`` with
  ``billed_units`` and ``tokens``); errors as ``{"message": ...}``.

The bytes are written in ragged pieces, one HTTP chunk each with a pause between, so events arrive split
mid-line and several to a read, as they do over real networks. A :class:`Script` makes a stand-in fail with an
HTTP status, stall mid-stream (sending only keep-alive comments until the client leaves) or drop the connection;
``client_disconnected`` is set when a client goes away before its response is complete.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from http import HTTPStatus
from types import TracebackType
from typing import Any, Self

_PIECE_SIZES = (7, 23, 3, 61, 2, 37, 11, 90)  # deliberately unrelated to event boundaries
_PAUSE_SECONDS = 0.001  # long enough for the client to read each piece on its own


@dataclass
class Script:
    """What the stand-in does with the requests that follow (tests change it between requests)."""

    tokens: Sequence[str] = ("The notice", " period is", " 30 days", " [1].")
    status: int = 200
    """Anything but 200 answers with the vendor's JSON error body instead of a stream."""
    error_message: str = "scripted failure"
    stall_after: int | None = None
    """Send this many tokens, then only keep-alive comments until the client disconnects."""
    drop_after: int | None = None
    """Send this many tokens, then close the connection without ending the response."""
    error_after: int | None = None
    """Send this many tokens, then the vendor's in-stream error event, and end the response."""
    input_tokens: int = 42
    output_tokens: int = 7


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class _Plan:
    """The events of one streamed response, and where the script interrupts them."""

    events: list[bytes]
    token_positions: list[int] = field(default_factory=list)
    """Index in ``events`` of each token's event, to stall or drop right after the n-th token."""


class _StandinServer(abc.ABC):
    """The HTTP/1.1 plumbing; a vendor subclass says what its stream and its error bodies look like."""

    api_path = "/"

    def __init__(self, *, api_key: str | None, keepalive_seconds: float = 0.05) -> None:
        self.api_key = api_key
        self.keepalive_seconds = keepalive_seconds
        self.script = Script()
        self.requests: list[RecordedRequest] = []
        self.client_disconnected = asyncio.Event()
        self.completed_streams = 0
        self.connections = 0
        self._server: asyncio.Server | None = None
        self._handlers: set[asyncio.Task[None]] = set()

    @property
    def root_url(self) -> str:
        if self._server is None:
            raise RuntimeError("stand-in not started")
        host, port = self._server.sockets[0].getsockname()[:2]
        return f"http://{host}:{port}"

    async def __aenter__(self) -> Self:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._server is None:
            return
        self._server.close()
        for task in list(self._handlers):
            task.cancel()
        await asyncio.gather(*self._handlers, return_exceptions=True)
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        self.connections += 1
        try:
            while (request := await _read_request(reader)) is not None:
                self.requests.append(request)
                if not await self._respond(request, reader, writer):
                    return
        except (ConnectionError, asyncio.IncompleteReadError):
            self.client_disconnected.set()
        except asyncio.CancelledError:
            pass  # shutting down; ending "cancelled" would make asyncio's stream callback log an error
        finally:
            self._handlers.discard(task)
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    async def _respond(
        self, request: RecordedRequest, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> bool:
        """Answer one request; ``False`` when the connection must not be reused."""
        if request.method != "POST" or request.path != self.api_path:
            await _write_json(writer, 404, self.error_body(f"no route {request.method} {request.path}"))
            return True
        if self.api_key is not None and request.headers.get("authorization") != f"Bearer {self.api_key}":
            await _write_json(writer, 401, self.error_body("invalid api key"))
            return True
        script = self.script
        if script.status != 200:
            await _write_json(writer, script.status, self.error_body(script.error_message))
            return True
        plan = self.plan(request.body, script)
        interrupt_after = script.stall_after if script.stall_after is not None else script.drop_after
        events = plan.events
        if interrupt_after is not None:
            events = events[: plan.token_positions[interrupt_after - 1] + 1] if interrupt_after else events[:1]
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\n"
            b"cache-control: no-cache\r\ntransfer-encoding: chunked\r\n\r\n"
        )
        await _write_ragged(writer, b"".join(events))
        if script.stall_after is not None:
            await self._hold(reader, writer)
            return False
        if script.drop_after is not None:
            return False
        self.completed_streams += 1
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        return True

    async def _hold(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Send keep-alive comments, and nothing else, until the client hangs up."""
        while True:
            try:
                if not await asyncio.wait_for(reader.read(1024), self.keepalive_seconds):
                    break
            except TimeoutError:
                writer.write(_chunk(b": keep-alive\n\n"))
                await writer.drain()
        self.client_disconnected.set()

    @abc.abstractmethod
    def plan(self, body: Any, script: Script) -> _Plan:
        """The events answering one request ``body`` (parsed JSON) under ``script``."""

    @abc.abstractmethod
    def error_body(self, message: str) -> Any:
        """The vendor's JSON error body."""


class OpenAIStandin(_StandinServer):
    """An OpenAI-compatible chat-completions server; ``api_key=None`` accepts any caller, like Ollama."""

    api_path = "/v1/chat/completions"

    def __init__(self, *, api_key: str | None = None, keepalive_seconds: float = 0.05) -> None:
        super().__init__(api_key=api_key, keepalive_seconds=keepalive_seconds)

    @property
    def base_url(self) -> str:
        return f"{self.root_url}/v1"

    def error_body(self, message: str) -> Any:
        return {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": None}}

    def plan(self, body: Any, script: Script) -> _Plan:
        def chunk(choices: list[Any], usage: Any = None) -> bytes:
            payload = {
                "id": "chatcmpl-standin",
                "object": "chat.completion.chunk",
                "created": 1_700_000_000,
                "model": body["model"],
                "system_fingerprint": "fp_standin",
                "choices": choices,
                "usage": usage,
            }
            return b"data: " + json.dumps(payload, ensure_ascii=False).encode() + b"\n\n"

        plan = _Plan([chunk([{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}])])
        plan.events.append(b": keep-alive\n\n")
        for token in script.tokens[: script.error_after]:
            plan.token_positions.append(len(plan.events))
            plan.events.append(chunk([{"index": 0, "delta": {"content": token}, "finish_reason": None}]))
        if script.error_after is not None:
            error = {"error": {"message": script.error_message, "type": "server_error", "param": None, "code": None}}
            plan.events.append(b"data: " + json.dumps(error).encode() + b"\n\n")
            return plan
        plan.events.append(chunk([{"index": 0, "delta": {}, "finish_reason": "stop"}]))
        if body.get("stream_options", {}).get("include_usage"):
            total = script.input_tokens + script.output_tokens
            usage = {"prompt_tokens": script.input_tokens, "completion_tokens": script.output_tokens}
            plan.events.append(chunk([], {**usage, "total_tokens": total}))
        plan.events.append(b"data: [DONE]\n\n")
        return plan


class CohereChatStandin(_StandinServer):
    """Cohere's v2 chat endpoint; the SDK talks to it when given ``base_url=standin.root_url``."""

    api_path = "/v2/chat"

    def __init__(self, *, api_key: str = "test-cohere-key", keepalive_seconds: float = 0.05) -> None:
        super().__init__(api_key=api_key, keepalive_seconds=keepalive_seconds)

    def error_body(self, message: str) -> Any:
        return {"id": "standin-error", "message": message}

    def plan(self, body: Any, script: Script) -> _Plan:
        def event(kind: str, payload: dict[str, Any]) -> bytes:
            data = json.dumps({"type": kind, **payload}, ensure_ascii=False)
            return f"event: {kind}\ndata: {data}\n\n".encode()

        start = {"role": "assistant", "content": [], "tool_plan": "", "tool_calls": [], "citations": []}
        plan = _Plan([event("message-start", {"id": "standin-message", "delta": {"message": start}})])
        text_start = {"message": {"content": {"type": "text", "text": ""}}}
        plan.events.append(event("content-start", {"index": 0, "delta": text_start}))
        for token in script.tokens[: script.error_after]:
            plan.token_positions.append(len(plan.events))
            delta = {"message": {"content": {"text": token}}}
            plan.events.append(event("content-delta", {"index": 0, "delta": delta}))
        plan.events.append(event("content-end", {"index": 0}))
        if script.error_after is not None:
            failed = {"finish_reason": "ERROR", "error": script.error_message}
            plan.events.append(event("message-end", {"delta": failed}))
            return plan
        usage = {
            # billed units leave out the prompt template Cohere adds; raw token counts include it
            "billed_units": {"input_tokens": script.input_tokens, "output_tokens": script.output_tokens},
            "tokens": {"input_tokens": script.input_tokens + 60, "output_tokens": script.output_tokens},
        }
        plan.events.append(event("message-end", {"delta": {"finish_reason": "COMPLETE", "usage": usage}}))
        return plan


async def _read_request(reader: asyncio.StreamReader) -> RecordedRequest | None:
    """The next request on a kept-alive connection, or ``None`` once the client has closed it."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None
    request_line, *header_lines = head.decode("latin-1").rstrip("\r\n").split("\r\n")
    method, path, _ = request_line.split(" ", 2)
    headers = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0"))
    raw = await reader.readexactly(length) if length else b""
    return RecordedRequest(method=method, path=path, headers=headers, body=json.loads(raw) if raw else None)


def _chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


async def _write_ragged(writer: asyncio.StreamWriter, payload: bytes) -> None:
    offset, turn = 0, 0
    while offset < len(payload):
        size = _PIECE_SIZES[turn % len(_PIECE_SIZES)]
        writer.write(_chunk(payload[offset : offset + size]))
        await writer.drain()
        await asyncio.sleep(_PAUSE_SECONDS)
        offset, turn = offset + size, turn + 1


async def _write_json(writer: asyncio.StreamWriter, status: int, body: Any) -> None:
    data = json.dumps(body).encode()
    try:
        reason = HTTPStatus(status).phrase
    except ValueError:  # vendor codes such as Cohere's 498
        reason = "Error"
    writer.write(
        f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\ncontent-length: {len(data)}\r\n\r\n".encode()
        + data
    )
    await writer.drain()
