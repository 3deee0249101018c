"""One error tree for every Ragu service, mapped to problem-details JSON in one place.

    AppError                      500  internal
    ├── BadRequest                400  bad_request
    ├── InvalidInput              422  invalid_input
    ├── Unauthorized              401  unauthorized
    ├── Forbidden                 403  forbidden
    ├── NotFound                  404  not_found
    ├── Conflict                  409  conflict
    ├── PayloadTooLarge           413  payload_too_large
    ├── UnsupportedMediaType      415  unsupported_media_type
    └── Unavailable               503  unavailable

Services raise these (never HTTP exceptions); each carries a stable machine-readable ``code`` that
callers can branch on, and a human ``detail``. Subclasses only fix the status; the code is chosen
where the error is raised so that it names the exact cause (``document_encrypted``, ``token_expired``).

``extra`` becomes extension members of the problem document. A member named like a standard one (``status``,
``code``, ``detail``, ``type``, ``title``, ``instance``) is sent as ``upstream_<name>`` (an LLM server's own HTTP
status arrives as ``upstream_status``): the standard members always describe this response.
"""

from __future__ import annotations

from typing import Any, ClassVar


class AppError(Exception):
    """Base of every error a Ragu service reports to its callers."""

    status: ClassVar[int] = 500
    default_code: ClassVar[str] = "internal"

    def __init__(
        self,
        detail: str,
        *,
        code: str | None = None,
        extra: dict[str, Any] | None = None,
        retry_after_seconds: int | None = None,
    ) -> None:
        super().__init__(detail)
        self.detail = detail
        self.code = code or self.default_code
        self.extra = extra or {}
        self.retry_after_seconds = retry_after_seconds
        """Sent as ``Retry-After``: when a client may try again (a busy model), so it need not guess."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code!r}, detail={self.detail!r})"


class BadRequest(AppError):
    """A request that cannot be read at all (JSON nested past what the decoder can hold), before any validation."""

    status = 400
    default_code = "bad_request"


class InvalidInput(AppError):
    status = 422
    default_code = "invalid_input"


class Unauthorized(AppError):
    status = 401
    default_code = "unauthorized"


class Forbidden(AppError):
    status = 403
    default_code = "forbidden"


class NotFound(AppError):
    status = 404
    default_code = "not_found"


class Conflict(AppError):
    status = 409
    default_code = "conflict"


class PayloadTooLarge(AppError):
    status = 413
    default_code = "payload_too_large"


class UnsupportedMediaType(AppError):
    status = 415
    default_code = "unsupported_media_type"


class Unavailable(AppError):
    status = 503
    default_code = "unavailable"
