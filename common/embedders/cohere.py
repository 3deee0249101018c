"""The ``cohere`` provider: Cohere's hosted Embed models through the official SDK (``cohere.AsyncClientV2``).

Cohere embeds a passage and a search query differently (``input_type``), which is why the port separates
:meth:`~CohereEmbedder.embed_documents` from :meth:`~CohereEmbedder.embed_query`.

Failures are mapped onto our error tree with stable codes::

    401, 403, 498: key refused            Unavailable   embedding_provider_auth_failed
    400, 422: Cohere refused the texts    InvalidInput  embedding_provider_rejected
    429, 5xx, network errors, timeouts    retried, then Unavailable  embedding_provider_unavailable
    other 4xx (402 billing, 404 model)    Unavailable   embedding_provider_unavailable, not retried
    2xx unreadable or of the wrong shape  Unavailable   embedding_provider_bad_response

A refused key is ``Unavailable`` rather than ``Unauthorized``: it is this server's configuration that is wrong,
not the credentials of whoever asked for the embedding.

Token counts are an offline estimate (Cohere's tokenizers are not published as a package): all-MiniLM's
WordPiece vocabulary, the one the ``local`` provider ships, with any word it cannot split (``[UNK]``: Thai,
Amharic, a 3,000-character run without spaces) counted as one token per character. For English it tracks
subword tokenizers closely; for other scripts it over-counts, so chunks sized with it stay under the limit.
"""

from __future__ import annotations

import asyncio
import email.utils
import random
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import httpx
import numpy as np
from tokenizers import Encoding, Tokenizer

from common.embedders.base import Embedder, EmbedderSpec, SpecAttributes, Vectors
from common.embedders.local import MINILM_L6_V2
from common.errors import AppError, InvalidInput, Unavailable

if TYPE_CHECKING:
    from cohere import AsyncClientV2, EmbedByTypeResponse
    from cohere.core import ApiError, ParsingError

PROVIDER = "cohere"
MAX_TEXTS_PER_REQUEST = 96
"""Cohere's documented per-call limit for ``texts``."""

InputType = Literal["search_document", "search_query"]


@dataclass(frozen=True, slots=True)
class CohereModel:
    """One Cohere embedding model as we use it."""

    spec: EmbedderSpec
    output_dimension: int | None = None
    """Sent only to models whose dimension is selectable (v4), pinning it so Cohere cannot change it under a
    collection by changing its default; older models refuse the field."""


def _model(name: str, dimension: int, max_tokens: int, *, selectable_dimension: bool = False) -> CohereModel:
    spec = EmbedderSpec(provider=PROVIDER, model=name, dimension=dimension, max_tokens=max_tokens)
    return CohereModel(spec, dimension if selectable_dimension else None)


EMBED_ENGLISH_V3 = _model("embed-english-v3.0", 1024, 512)
EMBED_MULTILINGUAL_V3 = _model("embed-multilingual-v3.0", 1024, 512)
EMBED_ENGLISH_LIGHT_V3 = _model("embed-english-light-v3.0", 384, 512)
EMBED_MULTILINGUAL_LIGHT_V3 = _model("embed-multilingual-light-v3.0", 384, 512)
EMBED_V4 = _model("embed-v4.0", 1536, 8192, selectable_dimension=True)
"""embed-v4.0 reads up to 128k tokens, but we cap chunks at 8,192: a retrieval chunk longer than a few pages
dilutes what it is about, and 96 such chunks already make a multi-megabyte request."""

MODELS = (EMBED_ENGLISH_V3, EMBED_MULTILINGUAL_V3, EMBED_ENGLISH_LIGHT_V3, EMBED_MULTILINGUAL_LIGHT_V3, EMBED_V4)

AUTH_STATUSES = frozenset({401, 403, 498})
REJECTED_STATUSES = frozenset({400, 422})


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """When and how long to wait before trying a failed request again.

    Only rate limiting (429), server errors (5xx) and network failures are retried: any other answer would
    come back the same. The SDK's own retries are switched off so this is the only policy in force.

    Args:
        attempts: Requests per batch in all, the first included.
        base_delay: Backoff before the first retry; it doubles for each further one.
        max_delay: Ceiling for any wait, a server's ``Retry-After`` included.
    """

    attempts: int = 5
    base_delay: float = 0.5
    max_delay: float = 30.0

    def __post_init__(self) -> None:
        if self.attempts < 1 or self.base_delay < 0 or self.max_delay < 0:
            raise ValueError("attempts must be positive and delays non-negative")

    def delay(self, retry: int, retry_after: float | None = None) -> float:
        """Seconds to wait before retry number ``retry`` (1 for the first).

        A server's ``Retry-After`` wins when present. Otherwise "equal jitter": half the exponential backoff
        plus a random share of the other half, so clients throttled together do not retry together, yet none
        comes straight back.
        """
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.max_delay)
        backoff = min(self.base_delay * 2.0 ** (retry - 1), self.max_delay)
        return backoff / 2 + random.uniform(0, backoff / 2)  # noqa: S311 - jitter, not cryptography


def retry_after_seconds(headers: Mapping[str, str] | None) -> float | None:
    """The wait a ``Retry-After`` header asks for: delay-seconds (decimals accepted) or an HTTP date."""
    value = next((v for k, v in (headers or {}).items() if k.lower() == "retry-after"), None)
    if value is None:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        moment = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(moment.timestamp() - time.time(), 0.0)


class CohereEmbedder(SpecAttributes):
    """Embeds through Cohere's ``/v2/embed``: batches of at most 96 texts, a few requests in flight at once.

    The SDK (slow to import) and its HTTP client are created on first use, so building the embedder costs
    nothing and opens no connection.

    Args:
        model: Which Cohere model.
        api_key: The Cohere API key; sent as a bearer token.
        base_url: Another address for Cohere's API (a proxy, a test stand-in); ``None`` for Cohere's own.
        concurrency: Requests in flight at once for this embedder, across all callers. Retries wait for
            their turn like any other request; a batch backing off does not hold a turn while it sleeps.
        retry: The retry policy.
        timeout: Seconds to wait for one request before it counts as a network failure.
    """

    def __init__(
        self,
        model: CohereModel,
        api_key: str,
        *,
        base_url: str | None = None,
        concurrency: int = 4,
        retry: RetryPolicy = RetryPolicy(),
        timeout: float = 60.0,
    ) -> None:
        if not api_key:
            raise ValueError("a Cohere API key is required")
        if concurrency < 1 or timeout <= 0:
            raise ValueError("concurrency and timeout must be positive")
        self._model = model
        self._api_key = api_key
        self._base_url = base_url
        self._retry = retry
        self._timeout = timeout
        self._slots = asyncio.Semaphore(concurrency)
        self._http: httpx.AsyncClient | None = None
        self._sdk: AsyncClientV2 | None = None
        self._closed = False
        self._counter_lock = threading.Lock()
        self._counter: tuple[Tokenizer, int] | None = None

    @property
    def spec(self) -> EmbedderSpec:
        return self._model.spec

    async def embed_documents(self, texts: Sequence[str]) -> Vectors:
        return await self._embed(list(texts), "search_document")

    async def embed_query(self, text: str) -> Vectors:
        vectors = await self._embed([text], "search_query")
        query: Vectors = vectors[0]
        return query

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """An estimate of each text's length in Cohere tokens that errs on the long side (see module doc)."""
        tokenizer, unknown = self._token_counter()
        encodings = tokenizer.encode_batch(list(texts), add_special_tokens=False)
        return [_estimated_tokens(encoding, unknown) for encoding in encodings]

    def count(self, texts: Sequence[str]) -> list[int]:
        return self.count_tokens(texts)

    async def aclose(self) -> None:
        self._closed = True
        http, self._http, self._sdk = self._http, None, None
        if http is not None:
            await http.aclose()

    async def _embed(self, texts: list[str], input_type: InputType) -> Vectors:
        vectors = np.empty((len(texts), self.dimension), dtype=np.float32)
        starts = range(0, len(texts), MAX_TEXTS_PER_REQUEST)
        if len(starts) == 1:
            vectors[:] = await self._embed_batch(texts, input_type)
        elif len(starts) > 1:
            try:
                async with asyncio.TaskGroup() as group:
                    for start in starts:
                        group.create_task(self._fill(vectors, start, texts, input_type))
            except ExceptionGroup as failed:
                # The first failure cancelled the other batches; report it as if there had been one request.
                first = failed.exceptions[0]
                raise first from first.__cause__
        vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        return vectors

    async def _fill(self, vectors: Vectors, start: int, texts: list[str], input_type: InputType) -> None:
        batch = texts[start : start + MAX_TEXTS_PER_REQUEST]
        vectors[start : start + len(batch)] = await self._embed_batch(batch, input_type)

    async def _embed_batch(self, texts: list[str], input_type: InputType) -> Vectors:
        """One request for at most 96 texts, retried by the policy; rows in input order, not yet normalised."""
        from cohere.core import ApiError, ParsingError

        sdk = self._client()
        options: dict[str, Any] = {}
        if self._model.output_dimension is not None:
            options["output_dimension"] = self._model.output_dimension
        attempts, attempt = self._retry.attempts, 0
        while True:
            attempt += 1
            try:
                async with self._slots:
                    response = await sdk.embed(
                        model=self.model,
                        input_type=input_type,
                        texts=texts,
                        embedding_types=["float"],
                        truncate="END",
                        **options,
                    )
                return self._vectors(response, len(texts))
            except (ApiError, ParsingError) as error:
                status = error.status_code or 0
                if not _retryable(status) or attempt == attempts:
                    raise self._translate(error, status, attempt) from error
                wait = self._retry.delay(attempt, retry_after_seconds(error.headers))
            except httpx.TransportError as error:
                if attempt == attempts:
                    raise self._unavailable(f"could not reach Cohere ({type(error).__name__})", attempt) from error
                wait = self._retry.delay(attempt)
            await asyncio.sleep(wait)

    def _vectors(self, response: EmbedByTypeResponse, expected: int) -> Vectors:
        # The SDK does not validate bodies: a 200 without ``embeddings`` arrives as a model lacking the field.
        rows = getattr(getattr(response, "embeddings", None), "float_", None)
        try:
            vectors = np.asarray(rows, dtype=np.float32)
        except (TypeError, ValueError):
            vectors = np.empty(0, dtype=np.float32)
        if rows is None or vectors.shape != (expected, self.dimension):
            got = "no float embeddings" if rows is None else f"an array of shape {vectors.shape}"
            raise Unavailable(
                f"Cohere answered {got} for {expected} text(s) of {self.model} (dimension {self.dimension})",
                code="embedding_provider_bad_response",
                extra={"provider": self.provider, "model": self.model},
            )
        return vectors

    def _translate(self, error: ApiError | ParsingError, status: int, attempts: int) -> AppError:
        message = _server_message(error.body)
        extra = {"provider": self.provider, "model": self.model, "status": status}
        if status < 400:
            return Unavailable(
                f"Cohere answered {status} with a body the SDK could not read: {message[:200]}",
                code="embedding_provider_bad_response",
                extra=extra,
            )
        if status in AUTH_STATUSES:
            return Unavailable(
                f"Cohere refused the configured API key ({status}): {message}",
                code="embedding_provider_auth_failed",
                extra=extra,
            )
        if status in REJECTED_STATUSES:
            return InvalidInput(
                f"Cohere rejected the texts: {message}", code="embedding_provider_rejected", extra=extra
            )
        if _retryable(status):
            return self._unavailable(f"Cohere kept failing ({status}: {message})", attempts, status=status)
        return Unavailable(
            f"Cohere refused the request ({status}): {message}", code="embedding_provider_unavailable", extra=extra
        )

    def _unavailable(self, reason: str, attempts: int, *, status: int | None = None) -> Unavailable:
        extra: dict[str, Any] = {"provider": self.provider, "model": self.model, "attempts": attempts}
        if status is not None:
            extra["status"] = status
        return Unavailable(f"{reason} after {attempts} attempt(s)", code="embedding_provider_unavailable", extra=extra)

    def _client(self) -> AsyncClientV2:
        if self._closed:
            raise RuntimeError(f"the {self.model} embedder is closed")
        if self._sdk is None:
            from cohere import AsyncClientV2

            self._http = httpx.AsyncClient(timeout=self._timeout)
            self._sdk = AsyncClientV2(
                api_key=self._api_key,
                base_url=self._base_url,
                client_name="ragu",
                max_retries=0,
                httpx_client=self._http,
                log_warning_experimental_features=False,
            )
        return self._sdk

    def _token_counter(self) -> tuple[Tokenizer, int]:
        """The WordPiece tokenizer (no truncation, no padding) and its ``[UNK]`` id, loaded once."""
        if self._counter is None:
            with self._counter_lock:
                if self._counter is None:
                    tokenizer = Tokenizer.from_file(str(MINILM_L6_V2.tokenizer.verified_path()))
                    tokenizer.no_truncation()
                    tokenizer.no_padding()
                    unknown = tokenizer.token_to_id("[UNK]")
                    if unknown is None:
                        raise Unavailable(
                            "the WordPiece vocabulary has no [UNK] token", code="embedding_model_mismatch"
                        )
                    self._counter = (tokenizer, unknown)
        return self._counter


def _estimated_tokens(encoding: Encoding, unknown: int) -> int:
    ids = encoding.ids
    if unknown not in ids:
        return len(ids)
    spans = (end - start for token, (start, end) in zip(ids, encoding.offsets, strict=True) if token == unknown)
    return len(ids) + sum(max(span - 1, 0) for span in spans)


def _retryable(status: int) -> bool:
    return status == 429 or status >= 500


def _server_message(body: object) -> str:
    """Cohere's own explanation: its error bodies are ``{"id": ..., "message": ...}``."""
    if isinstance(body, Mapping) and isinstance(body.get("message"), str):
        return str(body["message"])
    return str(body) if body not in (None, "") else "no message"


@dataclass(frozen=True, slots=True)
class CohereProvider:
    """The ``cohere`` provider's catalogue; registered only when an API key is configured.

    Each embedder it creates owns one HTTP connection pool and allows ``concurrency`` requests in flight.
    """

    api_key: str = field(repr=False)
    _: KW_ONLY
    base_url: str | None = None
    models: tuple[CohereModel, ...] = MODELS
    concurrency: int = 4
    retry: RetryPolicy = RetryPolicy()
    timeout: float = 60.0
    name: str = PROVIDER

    @property
    def specs(self) -> Sequence[EmbedderSpec]:
        return [m.spec for m in self.models]

    def create(self, spec: EmbedderSpec) -> Embedder:
        model = next(m for m in self.models if m.spec == spec)
        return CohereEmbedder(
            model,
            self.api_key,
            base_url=self.base_url,
            concurrency=self.concurrency,
            retry=self.retry,
            timeout=self.timeout,
        )
