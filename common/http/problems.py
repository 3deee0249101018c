"""Every error leaves a service as problem-details JSON (RFC 9457) with a stable ``code``.

One place maps our error tree and Litestar's own exceptions (bad JSON, unknown route, wrong method);
anything else is a bug: logged with its traceback and reported as a bare 500 that leaks nothing.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from http import HTTPStatus
from typing import Any
from uuid import UUID

import asyncpg
from litestar import Request, Response
from litestar.exceptions import HTTPException, NotFoundException, ValidationException
from litestar.routes import HTTPRoute
from litestar.types import ExceptionHandlersMap
from litestar.utils.scope.state import ScopeState

from common.errors import AppError

logger = logging.getLogger(__name__)

PROBLEM_MEDIA_TYPE = "application/problem+json"

_HTTP_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "route_not_found",
    405: "method_not_allowed",
    413: "payload_too_large",
    415: "unsupported_media_type",
    429: "too_many_requests",
}


STANDARD_MEMBERS = frozenset({"type", "title", "status", "code", "detail", "instance"})
"""The members every problem document owns. An extension member may never replace one: a client branching on
``status`` or ``code`` must read ours, whatever an error carries."""


def problem(
    status: int, code: str, detail: str, /, *, retry_after_seconds: int | None = None, **extra: Any
) -> Response[dict[str, Any]]:
    """A problem document; ``extra`` keywords become extension members (see :func:`problem_response`).

    ``status``, ``code`` and ``detail`` are positional-only so that an extension member of the same name lands in
    ``extra`` instead of colliding with them (a ``TypeError``, and so a 500, in the error handler itself)."""
    return problem_response(status, code, detail, extra, retry_after_seconds=retry_after_seconds)


def problem_response(
    status: int,
    code: str,
    detail: str,
    extra: Mapping[str, Any],
    *,
    retry_after_seconds: int | None = None,
) -> Response[dict[str, Any]]:
    """The response for a problem, ``extra`` taken as a mapping, never spread into a signature.

    An extension member named like a standard one describes something else, in practice an upstream's own answer
    (an LLM server's HTTP ``status``), so it is sent as ``upstream_<name>``: nothing is lost, and the standard
    member stays ours."""
    body = {"type": "about:blank", "title": HTTPStatus(status).phrase, "status": status, "code": code}
    body["detail"] = detail
    for name, value in extra.items():
        body[f"upstream_{name}" if name in STANDARD_MEMBERS else name] = value
    headers = _headers(status)
    if retry_after_seconds is not None:
        headers = {**(headers or {}), "Retry-After": str(retry_after_seconds)}
    return Response(body, status_code=status, media_type=PROBLEM_MEDIA_TYPE, headers=headers)


def _headers(status: int) -> dict[str, str] | None:
    return {"WWW-Authenticate": 'Bearer realm="ragu"'} if status == 401 else None


def _app_error(_: Request[Any, Any, Any], exc: AppError) -> Response[dict[str, Any]]:
    if exc.status >= 500:
        logger.warning("request failed: %s", exc.code, extra={"detail": exc.detail})
    return problem_response(exc.status, exc.code, exc.detail, exc.extra, retry_after_seconds=exc.retry_after_seconds)


def _validation(request: Request[Any, Any, Any], exc: ValidationException) -> Response[dict[str, Any]]:
    errors = exc.extra if isinstance(exc.extra, list) else []
    if len(errors) == 1 and (misplaced := _misplaced_id_in(request, errors[0])):
        return misplaced
    return problem(400, "invalid_request", exc.detail or "the request is malformed", errors=errors)


def _misplaced_id_in(request: Request[Any, Any, Any], error: Any) -> Response[dict[str, Any]] | None:
    """``invalid_id`` for a string that is not a UUID where a body field or a query parameter takes an id, as for a
    path segment: msgspec says only "Invalid UUID", and what was sent is usually a name."""
    if not isinstance(error, dict) or error.get("message") != "Invalid UUID":
        return None
    key, source = str(error.get("key", "")), error.get("source")
    if source == "body":
        value = _at(ScopeState.from_scope(request.scope).json, key)
    elif source == "query":
        value = request.query_params.get(key)
    else:
        return None
    if not isinstance(value, str):
        return None
    listing = f"/{_noun(key)}s"
    routes = [r for r in request.app.routes if isinstance(r, HTTPRoute)]
    has_listing = any(r.path == listing and "GET" in r.methods for r in routes)
    return _invalid_id(request, source, key, value, listing if has_listing else None)


def _not_found(request: Request[Any, Any, Any], _: NotFoundException) -> Response[dict[str, Any]]:
    root, path = _split_mount(request)
    if misplaced := _misplaced_id(request, path):
        return _invalid_id(request, "path", *misplaced)
    return problem(404, "route_not_found", f"no route {request.method} {root}{path}")


def _invalid_id(
    request: Request[Any, Any, Any], source: str, name: str, value: str, listing: str | None
) -> Response[dict[str, Any]]:
    """``400 invalid_id``: ``value`` is not a UUID where ``name`` takes an id; ``source`` is where it was sent
    (``path``, ``query`` or ``body``), ``listing`` the path that lists such ids, if any. A body's ``name`` is the
    ``field`` member, a path's or query's the ``parameter``."""
    root, _ = _split_mount(request)
    noun = _noun(name).replace("_", " ")
    sent = repr(value) if source == "path" else f"{value!r} in {name}"
    member = "field" if source == "body" else "parameter"
    where = f"; GET {root}{listing} lists each {noun} with its id" if listing else ""
    detail = (
        f"{sent} is not a valid {noun} id: ids are UUIDs (like 3fa85f64-5717-4562-b3fc-2c963f66afa6), "
        f"and names are not ids{where}"
    )
    return problem_response(400, "invalid_id", detail, {member: name, "value": value})


_KEY_PART = re.compile(r"[^.\[\]]+")
"""The names and indexes of a validation error's ``key``: ``filters.document_ids[1]``."""


def _noun(name: str) -> str:
    """What an id names, from where it was sent: ``document`` for ``document_ids[1]`` or ``document_id``."""
    field = next((part for part in reversed(_KEY_PART.findall(name)) if not part.isdigit()), name)
    return field.removesuffix("_ids").removesuffix("_id")


def _at(document: Any, key: str) -> Any:
    """The value at a validation error's ``key`` in the decoded JSON body (``None`` when it is not there)."""
    for part in _KEY_PART.findall(key):
        if isinstance(document, dict):
            document = document.get(part)
        elif isinstance(document, list) and part.isdigit() and int(part) < len(document):
            document = document[int(part)]
        else:
            return None
    return document


def _split_mount(request: Request[Any, Any, Any]) -> tuple[str, str]:
    """The mount (``root_path``) and the path below it. ASGI's ``path`` includes the mount and Litestar strips
    it only once a route matches, so ``request.url``, which joins the two, names the mount twice on a miss."""
    root, path = request.scope.get("root_path", ""), request.scope["path"]
    if root and (path == root or path.startswith(root + "/")):
        return root, path[len(root) :] or "/"
    return root, path


def _misplaced_id(request: Request[Any, Any, Any], path: str) -> tuple[str, str, str | None] | None:
    """When ``path`` misses only because a segment is not a UUID where a route of this method takes an id:
    that parameter, the segment, and the path listing such things (if the service has one)."""
    segments = [s for s in path.split("/") if s]
    routes = [r for r in request.app.routes if isinstance(r, HTTPRoute)]
    for route in routes:
        if request.method not in route.methods or len(route.path_components) != len(segments):
            continue
        bad: tuple[str, str, int] | None = None
        for index, (component, segment) in enumerate(zip(route.path_components, segments, strict=True)):
            if isinstance(component, str):
                if component != segment:
                    break
            elif component.type is UUID and not _parses(UUID, segment):
                bad = bad or (component.name, segment, index)
            elif component.parser is not None and not _parses(component.parser, segment):
                break
        else:
            if bad is not None:
                name, value, index = bad
                listing = "/" + "/".join(segments[:index])
                has_listing = any(r.path == listing and "GET" in r.methods for r in routes)
                return name, value, listing if has_listing else None
    return None


def _parses(parser: Any, segment: str) -> bool:
    try:
        parser(segment)
    except (ValueError, TypeError, ArithmeticError):
        return False
    return True


def _http(_: Request[Any, Any, Any], exc: HTTPException) -> Response[dict[str, Any]]:
    code = _HTTP_CODES.get(exc.status_code, "http_error")
    return problem(exc.status_code, code, exc.detail or HTTPStatus(exc.status_code).phrase)


def _unstorable_text(_: Request[Any, Any, Any], exc: asyncpg.DataError) -> Response[dict[str, Any]]:
    """PostgreSQL text and JSON cannot hold a NUL character; a request carrying one is the caller's mistake.
    Raised by the statement that would store it, so its transaction rolls back and nothing is half-stored."""
    logger.info("refused unstorable text: %s", exc)
    return problem(422, "invalid_text", "text fields may not contain NUL (\\u0000) characters")


def _unexpected(request: Request[Any, Any, Any], exc: Exception) -> Response[dict[str, Any]]:
    logger.error("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
    return problem(500, "internal", "an unexpected error occurred; it has been logged")


EXCEPTION_HANDLERS: ExceptionHandlersMap = {
    AppError: _app_error,
    ValidationException: _validation,
    NotFoundException: _not_found,
    HTTPException: _http,
    asyncpg.CharacterNotInRepertoireError: _unstorable_text,  # NUL in a text value
    asyncpg.UntranslatableCharacterError: _unstorable_text,  # \u0000 in a JSON value
    Exception: _unexpected,
}
