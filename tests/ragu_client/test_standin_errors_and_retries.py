"""Every failure the client can meet, against a local stand-in of kappi that speaks the real wire format: Litestar
with the services' own problem handler (``common.http.problems``: problem+json, ``Retry-After``), kappi's own answer
Structs and its SSE encoder. A real server cannot be made busy, slow or unreachable on cue; the stand-in can.

Each case runs with the sync and the async client alike: a 503 ``llm_busy`` with ``Retry-After`` then 200 (retried
after the wait it asks for), a wait longer than the policy allows, retries running out, a refused connection, a
timeout (retried for a GET, not for a POST), 4xx problems with their code, a proxy's page, an answer that is not
the API's and an ``error`` event inside a stream.
"""

from __future__ import annotations

import asyncio
import itertools
import socket
import threading
import time
import uuid
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from litestar import Litestar, MediaType, Response, get, post
from litestar.params import FromPath
from litestar.response import ServerSentEvent, Stream

from common.errors import AppError, InvalidInput, NotFound, Unauthorized, Unavailable
from common.http.problems import EXCEPTION_HANDLERS
from kappi.agent.models import UserAgent
from kappi.chat.answering import Event
from kappi.chat.controller import _sse as kappi_sse
from kappi.chat.models import QueryAnswer, Timings
from kappi.llm.base import Usage
from ragu_client import (
    APIConnectionError,
    APITimeoutError,
    AsyncKappiClient,
    AuthenticationError,
    KappiClient,
    NotFoundError,
    RaguError,
    ResponseDecodeError,
    RetryPolicy,
    ServerError,
    ServiceUnavailableError,
    StreamError,
    UnprocessableEntityError,
)
from ragu_client.models import AnswerToken, Preliminary, Sources
from tests.support.cohere_standin import serve_on_loopback

AGENT = UserAgent(id=uuid.uuid4(), name="Helper", description="HR policies", llm_model="extractive")
ANSWER = QueryAnswer(
    answer="25 days [1].",
    citations=[],
    usage=Usage(input_tokens=10, output_tokens=4),
    timings=Timings(embed_ms=1.0, search_ms=2.0, llm_ms=3.0, total_ms=6.0),
)
FAST = RetryPolicy(max_retries=2, initial_backoff=0.01, max_backoff=0.02)
"""Backoff in hundredths of a second, so the cases without ``Retry-After`` do not wait."""


def busy(retry_after: int) -> AppError:
    """What kappi raises when its LLM is answering its most at once (kappi/llm/openai_compatible.py)."""
    return Unavailable(
        "local is answering 2 questions, its most at once; try again shortly",
        code="llm_busy",
        extra={"provider": "local", "max_concurrent": 2},
        retry_after_seconds=retry_after,
    )


@dataclass
class Standin:
    """A script of what the next requests get (an error raised, a pause in seconds, or a whole response), then
    the normal answer; and what arrived, when."""

    base_url: str = ""
    script: deque[AppError | float | Response[Any]] = field(default_factory=deque)
    arrivals: list[tuple[str, float]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    async def next_step(self, what: str) -> Response[Any] | None:
        with self.lock:
            self.arrivals.append((what, time.monotonic()))
            step = self.script.popleft() if self.script else None
        if isinstance(step, AppError):
            raise step
        if isinstance(step, float):
            await asyncio.sleep(step)
        return step if isinstance(step, Response) else None


def _app(standin: Standin) -> Litestar:
    @get("/kappi/agents")
    async def agents() -> Any:
        return await standin.next_step("agents") or [AGENT]

    @post("/kappi/agents/{agent_id:uuid}/query", status_code=200)
    async def query(agent_id: FromPath[uuid.UUID]) -> Any:
        return await standin.next_step("query") or ANSWER

    @post("/kappi/chats/{chat_id:uuid}/messages/stream", status_code=200)
    async def stream(chat_id: FromPath[uuid.UUID]) -> Any:
        answered = await standin.next_step("stream")
        if answered is not None:
            return answered

        async def events() -> AsyncIterator[Event]:  # as kappi/chat/answering.py sends a failed answer
            yield Event(event="sources", data={"citations": []})
            yield Event(event="preliminary", data={"text": "25 days.", "citations": [1], "provider": "extractive"})
            yield Event(event="token", data={"text": "25 "})
            yield Event(event="error", data={"code": "llm_failed", "detail": "the model stopped answering"})

        return ServerSentEvent(kappi_sse(events()))

    @get("/kappi/chats/{chat_id:uuid}", status_code=200)
    async def broken(chat_id: FromPath[uuid.UUID]) -> Any:
        """Headers and half a body, then the connection drops (a server that died mid-answer)."""
        await standin.next_step("broken")

        async def half() -> AsyncIterator[bytes]:
            yield b'{"chat": {"id": '
            raise ConnectionAbortedError("the stand-in drops the connection")

        return Stream(half(), media_type=MediaType.JSON)

    return Litestar(
        route_handlers=[agents, query, stream, broken], exception_handlers=EXCEPTION_HANDLERS, logging_config=None
    )


@pytest.fixture(scope="module")
def standin() -> Iterator[Standin]:
    server = Standin()
    with serve_on_loopback(_app(server)) as base_url:
        server.base_url = f"{base_url}/kappi"
        yield server


@pytest.fixture
def fresh(standin: Standin) -> Standin:
    with standin.lock:
        standin.script.clear()
        standin.arrivals.clear()
    return standin


Call = Callable[..., Any]


@pytest.fixture(params=["sync", "async"])
def call(request: pytest.FixtureRequest) -> Call:
    """``call(base_url, method name, *args, **client options)``: the method's answer (a stream's events as a list)
    through the sync or the async client (its own event loop: the test is not a coroutine)."""

    def sync(base_url: str, name: str, *args: Any, **options: Any) -> Any:
        with KappiClient(base_url, "token", **options) as kappi:
            answer = getattr(kappi, name)(*args)
            return list(answer) if isinstance(answer, Iterator) else answer

    def asynchronous(base_url: str, name: str, *args: Any, **options: Any) -> Any:
        async def run() -> Any:
            async with AsyncKappiClient(base_url, "token", **options) as kappi:
                answer = getattr(kappi, name)(*args)
                return [e async for e in answer] if isinstance(answer, AsyncIterator) else await answer

        return asyncio.run(run())

    return sync if request.param == "sync" else asynchronous


def test_standin_llm_busy_is_retried_after_its_retry_after_then_answers(fresh: Standin, call: Call) -> None:
    """A ``POST`` too: the service refused it before doing anything. The retry waits the second it was asked to."""
    fresh.script.extend([busy(1), busy(1)])
    answer = call(fresh.base_url, "query", AGENT.id, "How many vacation days?", retries=FAST)
    assert answer.answer == "25 days [1]."
    times = [t for _, t in fresh.arrivals]
    assert len(times) == 3
    assert all(later - earlier >= 0.95 for earlier, later in itertools.pairwise(times))


def test_standin_a_wait_longer_than_the_policy_allows_fails_at_once_with_the_code(fresh: Standin, call: Call) -> None:
    fresh.script.append(busy(120))
    with pytest.raises(ServiceUnavailableError) as failed:
        call(fresh.base_url, "query", AGENT.id, "How many vacation days?", retries=FAST)
    assert (failed.value.status, failed.value.code, failed.value.retry_after) == (503, "llm_busy", 120.0)
    assert failed.value.body["max_concurrent"] == 2
    assert len(fresh.arrivals) == 1


def test_standin_retries_run_out_on_the_services_error(fresh: Standin, call: Call) -> None:
    fresh.script.extend([Unavailable("not ready", code="not_ready")] * 3)
    with pytest.raises(ServiceUnavailableError) as failed:
        call(fresh.base_url, "agents", retries=FAST)
    assert failed.value.code == "not_ready"
    assert len(fresh.arrivals) == 3


def test_standin_retries_zero_tries_once(fresh: Standin, call: Call) -> None:
    fresh.script.append(busy(0))
    with pytest.raises(ServiceUnavailableError, match="llm_busy"):
        call(fresh.base_url, "agents", retries=0)
    assert len(fresh.arrivals) == 1


def _refusing_port() -> int:
    """A loopback port nothing listens on: bound, then closed."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def test_standin_a_refused_connection_is_a_connection_error(call: Call) -> None:
    url = f"http://127.0.0.1:{_refusing_port()}/kappi"
    with pytest.raises(APIConnectionError) as failed:
        call(url, "query", AGENT.id, "How many vacation days?", retries=FAST)
    assert (failed.value.status, failed.value.code) == (None, "connection_error")
    assert not isinstance(failed.value, APITimeoutError)
    assert "ConnectError" in failed.value.detail


def test_standin_a_connection_that_breaks_mid_answer_is_a_connection_error(fresh: Standin, call: Call) -> None:
    """Retried for a ``GET`` (nothing was changed), then raised as the client's error, never httpx's."""
    with pytest.raises(APIConnectionError) as failed:
        call(fresh.base_url, "chat", uuid.uuid4(), retries=FAST)
    assert (failed.value.status, failed.value.code) == (None, "connection_error")
    assert [what for what, _ in fresh.arrivals] == ["broken"] * 3


def test_standin_a_timeout_is_retried_for_a_get_and_not_for_a_post(fresh: Standin, call: Call) -> None:
    """A ``POST`` that timed out may have been done, so it is not sent again."""
    fresh.script.extend([1.0, 1.0, 1.0])
    with pytest.raises(APITimeoutError) as slow_get:
        call(fresh.base_url, "agents", retries=FAST, timeout=0.3)
    assert (slow_get.value.status, slow_get.value.code) == (None, "timeout")
    assert [what for what, _ in fresh.arrivals] == ["agents"] * 3
    fresh.arrivals.clear()
    fresh.script.extend([1.0, 1.0, 1.0])
    with pytest.raises(APITimeoutError, match="timeout"):
        call(fresh.base_url, "query", AGENT.id, "How many vacation days?", retries=FAST, timeout=0.3)
    assert [what for what, _ in fresh.arrivals] == ["query"]


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (NotFound("agent 1 not found", code="agent_not_found"), NotFoundError),
        (Unauthorized("the token's signature does not verify", code="invalid_signature"), AuthenticationError),
        (InvalidInput("the question is empty", code="empty_question"), UnprocessableEntityError),
    ],
    ids=lambda v: v.code if isinstance(v, AppError) else "",
)
def test_standin_a_4xx_problem_raises_its_class_with_the_services_code(
    fresh: Standin, call: Call, error: AppError, kind: type[RaguError]
) -> None:
    fresh.script.append(error)
    with pytest.raises(kind) as failed:
        call(fresh.base_url, "query", AGENT.id, "How many vacation days?", retries=FAST)
    assert (failed.value.status, failed.value.code, failed.value.detail) == (error.status, error.code, error.detail)
    assert failed.value.body["code"] == error.code
    assert len(fresh.arrivals) == 1, "a 4xx is not retried"


def test_standin_a_proxys_page_gets_a_code_of_its_status(fresh: Standin, call: Call) -> None:
    """Not retried for a ``POST``: the request may have reached the service behind the proxy."""
    page = Response("<html>Bad Gateway</html>", status_code=502, media_type=MediaType.HTML)
    fresh.script.append(page)
    with pytest.raises(ServerError) as failed:
        call(fresh.base_url, "query", AGENT.id, "How many vacation days?", retries=FAST)
    assert (failed.value.status, failed.value.code, failed.value.body) == (502, "http_502", {})
    assert len(fresh.arrivals) == 1


def test_standin_an_answer_that_is_not_the_apis_raises_a_decode_error(fresh: Standin, call: Call) -> None:
    fresh.script.append(Response({"answer": 25}, status_code=200))
    with pytest.raises(ResponseDecodeError) as failed:
        call(fresh.base_url, "query", AGENT.id, "How many vacation days?", retries=FAST)
    assert (failed.value.status, failed.value.code) == (200, "invalid_response")


def test_standin_an_error_event_in_a_stream_raises_its_code_after_the_events_before_it(
    fresh: Standin, call: Call
) -> None:
    seen: list[object] = []

    def collect(base_url: str) -> None:
        with KappiClient(base_url, "token") as kappi:
            seen.extend(kappi.ask_streamed(uuid.uuid4(), "How many vacation days?"))

    with pytest.raises(StreamError) as failed:
        call(fresh.base_url, "ask_streamed", uuid.uuid4(), "How many vacation days?")
    assert (failed.value.status, failed.value.code) == (200, "llm_failed")
    assert failed.value.detail == "the model stopped answering"
    with pytest.raises(StreamError):
        collect(fresh.base_url)
    assert [type(e) for e in seen] == [Sources, Preliminary, AnswerToken]


def test_standin_a_stream_refused_before_it_began_is_retried_like_any_call(fresh: Standin, call: Call) -> None:
    fresh.script.append(busy(0))
    with pytest.raises(StreamError, match="llm_failed"):
        call(fresh.base_url, "ask_streamed", uuid.uuid4(), "How many vacation days?", retries=FAST)
    assert [what for what, _ in fresh.arrivals] == ["stream", "stream"]
