"""Every failure of a call is a :class:`RaguError`; no httpx or msgspec exception reaches the caller.

::

    RaguError                      status, code, detail, body
    ├── APIStatusError             the service answered with a problem document (4xx, 5xx)
    │   ├── BadRequestError            400 (a request the service refuses: ``invalid_request`` and others)
    │   ├── AuthenticationError        401 (no token, a forged or expired one)
    │   ├── PermissionDeniedError      403
    │   ├── NotFoundError              404
    │   ├── ConflictError              409
    │   ├── RequestTooLargeError       413
    │   ├── UnsupportedMediaTypeError  415
    │   ├── UnprocessableEntityError   422 (``invalid_input``: well-formed, but not acceptable)
    │   ├── RateLimitError             429
    │   └── ServerError                5xx
    │       └── ServiceUnavailableError  503 (``llm_busy``: retried after its ``Retry-After``)
    ├── StreamError                an ``error`` event inside a stream the service had answered 200
    ├── APIConnectionError         no answer: the connection failed, was refused or broke (``connection_error``)
    │   └── APITimeoutError        no answer in time (``timeout``)
    └── ResponseDecodeError        an answer the client cannot read (``invalid_response``)

Branch on ``code``: it is the service's stable problem-details code where the service sent one, and one of the
client's own codes above where it could not.
"""

from __future__ import annotations

from typing import Any


class RaguError(Exception):
    """A failed call. ``code``: the problem-details code (stable: branch on it); ``detail``: the words for a
    person; ``status``: the HTTP status (``None`` when no answer came); ``body``: the whole problem document;
    ``retry_after``: the seconds the service asked the client to wait, when it did."""

    def __init__(
        self,
        status: int | None,
        code: str,
        detail: str,
        body: dict[str, Any] | None = None,
        *,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(f"{status} {code}: {detail}" if status is not None else f"{code}: {detail}")
        self.status = status
        self.code = code
        self.detail = detail
        self.body = body or {}
        self.retry_after = retry_after


class APIStatusError(RaguError):
    """The service answered with an error status; ``body`` is its problem document."""

    status: int


class BadRequestError(APIStatusError):
    pass


class AuthenticationError(APIStatusError):
    pass


class PermissionDeniedError(APIStatusError):
    pass


class NotFoundError(APIStatusError):
    pass


class ConflictError(APIStatusError):
    pass


class RequestTooLargeError(APIStatusError):
    pass


class UnsupportedMediaTypeError(APIStatusError):
    pass


class UnprocessableEntityError(APIStatusError):
    pass


class RateLimitError(APIStatusError):
    pass


class ServerError(APIStatusError):
    pass


class ServiceUnavailableError(ServerError):
    pass


class StreamError(RaguError):
    """An ``error`` event of a stream: the service had answered 200, so ``status`` is 200 and ``code`` the
    event's (``llm_failed``, ``llm_timeout``, ...)."""


class APIConnectionError(RaguError):
    """No answer: the service could not be reached, or the connection broke before the answer was whole."""

    def __init__(self, detail: str, code: str = "connection_error") -> None:
        super().__init__(None, code, detail)


class APITimeoutError(APIConnectionError):
    def __init__(self, detail: str) -> None:
        super().__init__(detail, code="timeout")


class ResponseDecodeError(RaguError):
    """The service's answer is not what its API document says (or not JSON at all: a proxy's page)."""


STATUS_ERRORS: dict[int, type[APIStatusError]] = {
    400: BadRequestError,
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    409: ConflictError,
    413: RequestTooLargeError,
    415: UnsupportedMediaTypeError,
    422: UnprocessableEntityError,
    429: RateLimitError,
    503: ServiceUnavailableError,
}


def status_error(status: int) -> type[APIStatusError]:
    """The class of a problem answer with this status."""
    return STATUS_ERRORS.get(status, ServerError if status >= 500 else APIStatusError)
