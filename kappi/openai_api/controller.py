"""``/v1/models`` and ``/v1/chat/completions`` under kappi, with OpenAI's error shape on every refusal of theirs.

The router carries kappi's authentication hook like every user route; its exception handlers apply to what the hook,
body parsing and the handlers raise, so an OpenAI client reads ``error.message`` and ``error.code`` from every
failure. The body keeps Ragu's ``status`` and ``code`` beside ``error`` too, so a failure reads alike on every route.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from http import HTTPStatus
from typing import Any

from litestar import Controller, Request, Response, Router, get, post
from litestar.di import NamedDependency
from litestar.exceptions import HTTPException, ValidationException
from litestar.openapi.datastructures import ResponseSpec
from litestar.params import JSONBody
from litestar.response import ServerSentEvent, ServerSentEventMessage
from litestar.status_codes import HTTP_200_OK
from litestar.types import ExceptionHandlersMap

from common.auth import Principal
from common.errors import AppError
from common.http.security import authenticated
from kappi.chat.service import ChatService
from kappi.openai_api import service
from kappi.openai_api.models import Completion, CompletionRequest, ModelList

logger = logging.getLogger(__name__)

HTTP_CODES = {400: "bad_request", 401: "unauthorized", 405: "method_not_allowed", 413: "payload_too_large"}


class OpenAIController(Controller):
    path = "/"
    tags = ["openai"]

    @get("/models", summary="Your agents, as OpenAI models")
    async def list_models(
        self, chats: NamedDependency[ChatService], principal: NamedDependency[Principal]
    ) -> ModelList:
        """The agents ``GET /agents`` lists for you; a model's ``id`` is the agent's."""
        return await service.models(chats, principal)

    @post(
        "/chat/completions",
        status_code=HTTP_200_OK,
        summary="Ask an agent (OpenAI Chat Completions)",
        responses={
            HTTP_200_OK: ResponseSpec(
                Completion, description="The answer; streamed: chunks as SSE", generate_examples=False
            )
        },
    )
    async def chat_completions(
        self,
        chats: NamedDependency[ChatService],
        principal: NamedDependency[Principal],
        data: JSONBody[CompletionRequest],
    ) -> Response[Completion] | ServerSentEvent:
        """The last message is the question, earlier user and assistant turns its history; ``stream: true`` answers
        as ``chat.completion.chunk`` events ending ``data: [DONE]``. Citations: ``ragu_citations`` and
        ``ragu_also_retrieved`` on the message (streamed: on the last chunk's ``delta``). Annotated as responses, not
        data: Litestar would give a data route's media type (JSON) to the stream too."""
        if data.stream:
            return ServerSentEvent(_sse(await service.stream(chats, data, principal)))
        return Response(await service.complete(chats, data, principal))


async def _sse(chunks: AsyncIterator[str]) -> AsyncIterator[ServerSentEventMessage]:
    async for data in chunks:
        yield ServerSentEventMessage(data=data)


def openai_router() -> Router:
    """A new router per app (a router belongs to the app it is registered on), under kappi's ``/v1``."""
    return Router(
        "/v1",
        route_handlers=[OpenAIController],
        guards=[authenticated],
        exception_handlers=EXCEPTION_HANDLERS,
    )


def _error(status: int, code: str, message: str, *, param: str | None = None, **headers: str) -> Response[Any]:
    body = {"error": service.error_body(code, message, status=status, param=param), "status": status, "code": code}
    if status == 401:
        headers["WWW-Authenticate"] = 'Bearer realm="ragu"'
    return Response(body, status_code=status, headers=headers or None)


def _app_error(_: Request[Any, Any, Any], exc: AppError) -> Response[Any]:
    if exc.status >= 500:
        logger.warning("request failed: %s", exc.code, extra={"detail": exc.detail})
    param = exc.extra.get("param")
    retry = {} if exc.retry_after_seconds is None else {"Retry-After": str(exc.retry_after_seconds)}
    return _error(exc.status, exc.code, exc.detail, param=param if isinstance(param, str) else None, **retry)


def _validation(_: Request[Any, Any, Any], exc: ValidationException) -> Response[Any]:
    errors = exc.extra if isinstance(exc.extra, list) else []
    first = errors[0] if errors and isinstance(errors[0], dict) else {}
    message = str(first.get("message") or exc.detail or "the request is malformed")
    key = first.get("key")
    return _error(400, "invalid_request", message, param=key if isinstance(key, str) and key else None)


def _http(_: Request[Any, Any, Any], exc: HTTPException) -> Response[Any]:
    status = exc.status_code
    return _error(status, HTTP_CODES.get(status, "http_error"), exc.detail or HTTPStatus(status).phrase)


def _group(request: Request[Any, Any, Any], exc: ExceptionGroup[Exception]) -> Response[Any]:
    if len(exc.exceptions) == 1 and isinstance(exc.exceptions[0], AppError):
        return _app_error(request, exc.exceptions[0])
    return _unexpected(request, exc)


def _unexpected(request: Request[Any, Any, Any], exc: Exception) -> Response[Any]:
    logger.error("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
    return _error(500, "internal", "an unexpected error occurred; it has been logged")


EXCEPTION_HANDLERS: ExceptionHandlersMap = {
    AppError: _app_error,
    ValidationException: _validation,
    HTTPException: _http,
    ExceptionGroup: _group,
    Exception: _unexpected,
}
