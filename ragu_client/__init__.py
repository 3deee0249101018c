"""Typed clients for Ragu, sync and async: kappi (agents, questions, chats; its admin API), chonkit (documents,
collections, jobs, sources), and kappi as a ``Retriever``.

``KappiClient`` and ``ChonkitClient`` answer directly, ``AsyncKappiClient`` and ``AsyncChonkitClient`` are awaited;
both have the same methods, a method for every route. Every failure raises a :class:`RaguError` carrying a ``code``
(see :mod:`ragu_client.errors`); refusals that ask for a wait (``503 llm_busy``, ``429``) are retried after their
``Retry-After`` (:class:`RetryPolicy`). Depends only on httpx and msgspec; tokens are the caller's (a string, or a
callable returning a fresh one).
"""

from ragu_client._async import AsyncChonkitClient, AsyncKappiClient
from ragu_client._core import AsyncToken, RetryPolicy, SyncToken
from ragu_client._sync import ChonkitClient, KappiClient
from ragu_client.errors import (
    APIConnectionError,
    APIStatusError,
    APITimeoutError,
    AuthenticationError,
    BadRequestError,
    ConflictError,
    NotFoundError,
    PermissionDeniedError,
    RaguError,
    RateLimitError,
    RequestTooLargeError,
    ResponseDecodeError,
    ServerError,
    ServiceUnavailableError,
    StreamError,
    UnprocessableEntityError,
    UnsupportedMediaTypeError,
)
from ragu_client.retriever import Document, KappiRetriever, RagInputFilter, Retriever, with_context

__all__ = [
    "APIConnectionError",
    "APIStatusError",
    "APITimeoutError",
    "AsyncChonkitClient",
    "AsyncKappiClient",
    "AsyncToken",
    "AuthenticationError",
    "BadRequestError",
    "ChonkitClient",
    "ConflictError",
    "Document",
    "KappiClient",
    "KappiRetriever",
    "NotFoundError",
    "PermissionDeniedError",
    "RagInputFilter",
    "RaguError",
    "RateLimitError",
    "RequestTooLargeError",
    "ResponseDecodeError",
    "Retriever",
    "RetryPolicy",
    "ServerError",
    "ServiceUnavailableError",
    "StreamError",
    "SyncToken",
    "UnprocessableEntityError",
    "UnsupportedMediaTypeError",
    "with_context",
]
