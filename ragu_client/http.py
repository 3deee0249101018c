"""One HTTP session per service: the caller's token on every request, problem details raised as
:class:`RaguError`, responses decoded into the client's Structs, and Server-Sent Events read line by line."""

from __future__ import annotations

import inspect
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from types import TracebackType
from typing import Any, Self, TypeVar

import httpx
import msgspec

T = TypeVar("T")

Token = str | Callable[[], str | Awaitable[str]]
"""A bearer token, or a callable (plain or async) asked for a fresh one before every request."""


class RaguError(Exception):
    """Every failed call. ``code`` is the problem-details code (stable: branch on it), ``detail`` the words for
    a person, ``body`` the whole problem document. An error that arrives inside a stream the server had
    already answered 200 carries that 200 as its ``status``."""

    def __init__(self, status: int, code: str, detail: str, body: dict[str, Any] | None = None) -> None:
        super().__init__(f"{status} {code}: {detail}")
        self.status = status
        self.code = code
        self.detail = detail
        self.body = body or {}


class Service:
    """A session with one service at ``base_url`` (e.g. ``https://ragu.example/kappi``)."""

    def __init__(
        self,
        base_url: str,
        token: Token,
        *,
        timeout: float = 30.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._token = token
        self._http = httpx.AsyncClient(base_url=base_url, timeout=timeout, transport=transport)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        await self.aclose()

    async def _call(
        self, method: str, path: str, answer: type[T], *, body: Any = None, params: dict[str, Any] | None = None
    ) -> T:
        response = await self._send(method, path, body=body, params=params)
        return msgspec.json.decode(response.content, type=answer)

    async def _send(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        params: dict[str, Any] | None = None,
        files: list[tuple[str, tuple[str, bytes]]] | None = None,
    ) -> httpx.Response:
        headers = await self._headers(body)
        content = None if body is None else msgspec.json.encode(body)
        response = await self._http.request(method, path, content=content, params=params, files=files, headers=headers)
        if response.is_error:
            raise _problem(response)
        return response

    async def _events(self, method: str, path: str, *, body: Any = None) -> AsyncGenerator[tuple[str, bytes], None]:
        """(event name, data) of a Server-Sent Events response, as each arrives; an ``error`` event raises."""
        headers = await self._headers(body)
        content = None if body is None else msgspec.json.encode(body)
        async with self._http.stream(method, path, content=content, headers=headers) as response:
            if response.is_error:
                await response.aread()
                raise _problem(response)
            async for name, data in _sse(response):
                if name == "error":
                    failure = msgspec.json.decode(data, type=dict[str, Any])
                    raise RaguError(response.status_code, failure.get("code", "stream_error"),
                                    failure.get("detail", ""), failure)  # fmt: skip
                yield name, data

    async def _headers(self, body: Any) -> dict[str, str]:
        token = self._token if isinstance(self._token, str) else self._token()
        if inspect.isawaitable(token):
            token = await token
        headers = {"Authorization": f"Bearer {token}"}
        if body is not None:
            headers["Content-Type"] = "application/json"
        return headers


def _problem(response: httpx.Response) -> RaguError:
    """The service's problem document as an error; a body that is none (a proxy's page) still gets a code."""
    try:
        body = msgspec.json.decode(response.content, type=dict[str, Any])
    except msgspec.DecodeError:
        body = {}
    code, detail = body.get("code"), body.get("detail")
    return RaguError(
        response.status_code,
        code if isinstance(code, str) else f"http_{response.status_code}",
        detail if isinstance(detail, str) else response.reason_phrase,
        body,
    )


async def _sse(response: httpx.Response) -> AsyncIterator[tuple[str, bytes]]:
    name, data = "message", list[str]()
    async for line in response.aiter_lines():
        if not line:
            if data:
                yield name, "\n".join(data).encode()
            name, data = "message", list[str]()
        elif not line.startswith(":"):
            field, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if field == "event":
                name = value
            elif field == "data":
                data.append(value)
    if data:
        yield name, "\n".join(data).encode()
