"""Upstream failures turned into Ragu errors, the same way for every provider (codes: see :mod:`kappi.llm.base`)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any, TypeVar

import httpx

from common.errors import AppError, InvalidInput, Unavailable

T = TypeVar("T")

_AUTH_STATUSES = frozenset({401, 403, 498})  # 498: Cohere's "invalid token"
_REJECTED_STATUSES = frozenset({400, 404, 413, 422})
_TIMEOUT_STATUSES = frozenset({408, 504})
_MAX_MESSAGE = 300


def status_error(provider: str, status: int, message: str) -> AppError:
    """The error for an HTTP error response; ``message`` is the upstream's own explanation.

    ``extra["status"]`` is the upstream's HTTP status; the problem document sends it as ``upstream_status``, since its
    own ``status`` is ours (``common.http.problems.problem_response``)."""
    message = message.strip()[:_MAX_MESSAGE] or "no explanation given"
    extra = {"provider": provider, "status": status}
    if status in _AUTH_STATUSES:
        return Unavailable(
            f"{provider} refused our credentials (HTTP {status}): {message}", code="llm_auth_failed", extra=extra
        )
    if status in _REJECTED_STATUSES:
        return InvalidInput(
            f"{provider} rejected the request (HTTP {status}): {message}", code="llm_rejected", extra=extra
        )
    if status in _TIMEOUT_STATUSES:
        return Unavailable(f"{provider} timed out (HTTP {status}): {message}", code="llm_timeout", extra=extra)
    return Unavailable(f"{provider} is unavailable (HTTP {status}): {message}", code="llm_unavailable", extra=extra)


def timeout_error(provider: str, seconds: float) -> Unavailable:
    return Unavailable(
        f"{provider} sent nothing for {seconds:g} s",
        code="llm_timeout",
        extra={"provider": provider, "seconds": seconds},
    )


def broken_stream(provider: str, reason: str) -> Unavailable:
    return Unavailable(f"{provider} stream failed: {reason}", code="llm_unavailable", extra={"provider": provider})


def transport_error(provider: str, exc: httpx.TransportError, seconds: float) -> Unavailable:
    """Connection refused, reset or timed out at the socket level."""
    if isinstance(exc, httpx.TimeoutException):
        return timeout_error(provider, seconds)
    return broken_stream(provider, f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)


def error_message(body: Any) -> str:
    """The human explanation in an error body, whichever dialect: ``{"error": {"message"}}`` (OpenAI, vLLM),
    ``{"error": "..."}`` (Ollama), ``{"message"}`` (Cohere) or ``{"detail"}``; else the body itself."""
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return str(error["message"])
        for value in (error, body.get("message"), body.get("detail")):
            if isinstance(value, str):
                return value
    return str(body) if body is not None else ""


async def next_within(events: AsyncIterator[T], seconds: float) -> T | None:
    """The next event, ``None`` at the end, or :class:`TimeoutError` when it takes longer than ``seconds``.

    Providers count whole events rather than bytes, so an upstream that only sends keep-alive comments still
    times out; the deadline covers one step at a time and so never spans the consumer's own work.
    """
    async with asyncio.timeout(seconds):
        return await anext(events, None)
