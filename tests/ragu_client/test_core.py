"""The client's parts that do no I/O: the retry policy's decisions and waits, ``Retry-After`` read in both of its
forms, and path parameters kept to one path segment."""

from __future__ import annotations

import contextlib
import email.utils
import time
from typing import Any

import httpx
import pytest

from ragu_client import ChonkitClient, KappiClient, RaguError, RetryPolicy
from ragu_client._core import retry_after

POLICY = RetryPolicy(max_retries=2, initial_backoff=0.5, max_backoff=8.0, max_retry_after=60.0)


def _answer(status: int, **headers: str) -> httpx.Response:
    return httpx.Response(status, headers=headers)


@pytest.mark.parametrize(
    ("header", "wait"),
    [("3", 3.0), ("0.25", 0.25), ("-4", 0.0), ("soon", None)],
)
def test_retry_after_in_seconds(header: str, wait: float | None) -> None:
    assert retry_after(_answer(503, **{"Retry-After": header})) == wait


def test_retry_after_as_an_http_date() -> None:
    """RFC 9110 allows an HTTP date too: the wait is until then (none for a date past)."""
    later = email.utils.formatdate(time.time() + 30, usegmt=True)
    earlier = email.utils.formatdate(time.time() - 30, usegmt=True)
    assert 25 <= (retry_after(_answer(503, **{"Retry-After": later})) or 0) <= 30
    assert retry_after(_answer(503, **{"Retry-After": earlier})) == 0.0
    assert retry_after(_answer(503)) is None


@pytest.mark.parametrize(
    ("status", "method", "retried"),
    [
        (503, "POST", True),  # refused before anything was done (llm_busy)
        (429, "POST", True),
        (502, "GET", True),
        (504, "DELETE", True),
        (502, "POST", False),  # a proxy lost the answer: the POST may have been done
        (500, "GET", False),
        (404, "GET", False),
    ],
)
def test_which_answers_are_retried(status: int, method: str, retried: bool) -> None:
    assert (POLICY.after_answer(0, method, _answer(status)) is not None) is retried


def test_retry_after_is_honoured_up_to_its_ceiling_and_retries_run_out() -> None:
    assert POLICY.after_answer(0, "POST", _answer(503, **{"Retry-After": "7"})) == 7.0
    assert POLICY.after_answer(0, "POST", _answer(503, **{"Retry-After": "61"})) is None
    assert POLICY.after_answer(2, "POST", _answer(503, **{"Retry-After": "1"})) is None


def test_which_failures_are_retried() -> None:
    """Nothing was sent when the connection could not be opened: any method. A read that timed out: idempotent only."""
    refused, slow = httpx.ConnectError("refused"), httpx.ReadTimeout("slow")
    assert POLICY.after_failure(0, "POST", refused) is not None
    assert POLICY.after_failure(0, "POST", slow) is None
    assert POLICY.after_failure(0, "PUT", slow) is not None
    assert POLICY.after_failure(2, "GET", refused) is None
    assert POLICY.after_failure(0, "GET", ValueError("not httpx's")) is None


@pytest.mark.parametrize("retry", [0, 1, 2, 3, 6])
def test_backoff_is_exponential_with_jitter_under_its_ceiling(retry: int) -> None:
    ceiling = min(8.0, 0.5 * 2**retry)
    waits = [POLICY.backoff(retry) for _ in range(200)]
    assert all(ceiling / 2 <= w <= ceiling for w in waits)
    assert len(set(waits)) > 1


@pytest.mark.parametrize(
    ("client", "name", "arguments", "path"),
    [
        (KappiClient, "chat", ("../admin/agents",), "/kappi/chats/%2E%2E%2Fadmin%2Fagents"),
        (KappiClient, "agent", ("a?b#c",), "/kappi/agents/a%3Fb%23c"),
        (ChonkitClient, "schema", ("identity",), "/kappi/schemas/identity"),
    ],
)
def test_a_path_parameter_stays_one_path_segment(
    client: type[KappiClient | ChonkitClient], name: str, arguments: tuple[Any, ...], path: str
) -> None:
    """A name where an id belongs reaches the route it was meant for (which answers ``invalid_id``), never another."""
    sent: list[httpx.Request] = []

    def record(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(200, json={})

    with (
        client("http://ragu.test/kappi", "token", transport=httpx.MockTransport(record)) as session,
        contextlib.suppress(RaguError),  # the answer is not the point, the request is
    ):
        getattr(session, name)(*arguments)
    assert sent[0].url.raw_path.decode() == path
