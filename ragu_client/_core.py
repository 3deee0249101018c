"""What the sync and async clients share, none of it doing I/O: the retry policy (when to try a call again and
how long to wait, ``Retry-After`` honoured), turning answers and httpx's failures into
:class:`~ragu_client.errors.RaguError`, decoding, and Server-Sent Events read line by line."""

from __future__ import annotations

import email.utils
import inspect
import random
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

import httpx
import msgspec

from ragu_client.errors import (
    APIConnectionError,
    APITimeoutError,
    RaguError,
    ResponseDecodeError,
    StreamError,
    status_error,
)

T = TypeVar("T")

SyncToken = str | Callable[[], str]
"""A bearer token, or a callable asked for a fresh one before every request."""
AsyncToken = str | Callable[[], str | Awaitable[str]]
"""A bearer token, or a callable (plain or async) asked for a fresh one before every request."""
Files = list[tuple[str, tuple[str, bytes]]]

IDEMPOTENT = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "DELETE"})


@dataclass(frozen=True, kw_only=True)
class RetryPolicy:
    """When and how long a call is tried again.

    Retried, up to ``max_retries`` times after the first attempt:

    - ``429`` and ``503`` (the service refused before doing anything, e.g. ``llm_busy``), any method;
    - ``502`` and ``504`` (a proxy lost the answer), and a connection that broke or timed out after the request
      was sent, for idempotent methods only (``GET``, ``PUT``, ``DELETE``): a ``POST`` may have been done;
    - a connection that could not be opened (refused, connect or pool timeout), any method: nothing was sent.

    The wait is the answer's ``Retry-After`` (seconds or an HTTP date) when it has one: a call asked to wait more
    than ``max_retry_after`` seconds fails at once with the service's error instead. Otherwise it is exponential
    backoff with jitter: ``initial_backoff * 2**retry``, at most ``max_backoff``, of which a random half or more.
    """

    max_retries: int = 2
    initial_backoff: float = 0.5
    max_backoff: float = 8.0
    max_retry_after: float = 60.0

    def backoff(self, retry: int) -> float:
        ceiling = min(self.max_backoff, self.initial_backoff * 2.0**retry)
        return ceiling / 2 + random.uniform(0, ceiling / 2)  # noqa: S311 -- jitter, not a secret

    def after_answer(self, retry: int, method: str, response: httpx.Response) -> float | None:
        """Seconds to wait before trying again a call whose answer was ``response``; ``None``: do not."""
        status = response.status_code
        if retry >= self.max_retries or status not in (429, 502, 503, 504):
            return None
        if status in (502, 504) and method not in IDEMPOTENT:
            return None
        asked = retry_after(response)
        if asked is None:
            return self.backoff(retry)
        return asked if asked <= self.max_retry_after else None

    def after_failure(self, retry: int, method: str, error: Exception) -> float | None:
        """Seconds to wait before trying again a call that got no answer; ``None``: do not."""
        if retry >= self.max_retries or not isinstance(error, httpx.TransportError):
            return None
        unsent = isinstance(error, httpx.ConnectError | httpx.ConnectTimeout | httpx.PoolTimeout)
        return self.backoff(retry) if unsent or method in IDEMPOTENT else None


def policy(retries: RetryPolicy | int) -> RetryPolicy:
    return retries if isinstance(retries, RetryPolicy) else RetryPolicy(max_retries=retries)


def retry_after(response: httpx.Response) -> float | None:
    """The wait a ``Retry-After`` header asks for: delay-seconds (decimals accepted) or an HTTP date."""
    value = response.headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def problem(response: httpx.Response) -> RaguError:
    """The service's problem document as an error; a body that is none (a proxy's page) still gets a code."""
    try:
        body = msgspec.json.decode(response.content, type=dict[str, Any])
    except msgspec.DecodeError:
        body = {}
    code, detail = body.get("code"), body.get("detail")
    return status_error(response.status_code)(
        response.status_code,
        code if isinstance(code, str) else f"http_{response.status_code}",
        detail if isinstance(detail, str) else response.reason_phrase,
        body,
        retry_after=retry_after(response),
    )


def no_answer(error: Exception) -> RaguError:
    """httpx's failure as the client's: a timeout, or a connection (or URL) that did not work."""
    if isinstance(error, httpx.TimeoutException):
        return APITimeoutError(f"{type(error).__name__}: {error}")
    return APIConnectionError(f"{type(error).__name__}: {error}")


FAILURES = (httpx.HTTPError, httpx.InvalidURL)
"""What httpx raises when a call gets no (whole) answer; the clients raise :func:`no_answer` of it instead."""


def decode(content: bytes, answer: type[T], status: int) -> T:
    try:
        return msgspec.json.decode(content, type=answer)
    except msgspec.DecodeError as exc:  # a ValidationError is a DecodeError
        raise ResponseDecodeError(status, "invalid_response", str(exc)) from None


def stream_error(status: int, data: bytes) -> StreamError:
    """An ``error`` event: the service had already answered ``status`` (200) when the failure came."""
    try:
        failure = msgspec.json.decode(data, type=dict[str, Any])
    except msgspec.DecodeError:
        failure = {}
    code, detail = failure.get("code"), failure.get("detail")
    return StreamError(
        status,
        code if isinstance(code, str) else "stream_error",
        detail if isinstance(detail, str) else "",
        failure,
    )


class SseParser:
    """Server-Sent Events from lines: :meth:`line` returns ``(event name, data)`` when an event is complete, and
    :meth:`end` the last one when the stream ends without a blank line after it."""

    def __init__(self) -> None:
        self.name, self.data = "message", list[str]()

    def line(self, line: str) -> tuple[str, bytes] | None:
        if not line:
            return self.end()
        if not line.startswith(":"):
            field, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if field == "event":
                self.name = value
            elif field == "data":
                self.data.append(value)
        return None

    def end(self) -> tuple[str, bytes] | None:
        event = (self.name, "\n".join(self.data).encode()) if self.data else None
        self.name, self.data = "message", []
        return event


def event_of(status: int, event: tuple[str, bytes] | None) -> tuple[str, bytes] | None:
    """An event to yield; an ``error`` event raises."""
    if event is not None and event[0] == "error":
        raise stream_error(status, event[1])
    return event


def prepared(json: Any, token: str, headers: Mapping[str, str]) -> tuple[bytes | None, dict[str, str]]:
    """The body and headers of a request: the caller's token, and JSON encoded by msgspec (UNSET left out)."""
    sent = {**headers, "Authorization": f"Bearer {token}"}
    if json is None:
        return None, sent
    sent["Content-Type"] = "application/json"
    return msgspec.json.encode(json), sent


def token_sync(token: SyncToken) -> str:
    return token if isinstance(token, str) else token()


async def token_async(token: AsyncToken) -> str:
    value = token if isinstance(token, str) else token()
    return await value if inspect.isawaitable(value) else value
