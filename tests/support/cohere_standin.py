"""A stand-in for Cohere's API that speaks its real wire format, served over HTTP on loopback.

Cohere's API cannot run on this machine, so tests run the real ``cohere`` SDK and its HTTP stack against
this server instead. It implements ``POST /v2/embed`` with Cohere's request and response JSON; further
endpoints (chat) join as extra Litestar route handlers that take the stand-in as a dependency::

    @post("/v2/chat")
    async def chat(request: Request, standin: NamedDependency[CohereStandIn]) -> Response[Any]: ...

    with running_cohere_standin(routes=[chat]) as standin:
        client = cohere.AsyncClientV2(standin.api_key, base_url=standin.base_url)

Every route gets the same gate first: the request is recorded, held for ``latency`` seconds (while counted as
in flight), answered with the next scripted failure if any, and refused without the right bearer token.
Embeddings are deterministic: a hash of (model, input_type, text) seeds a normal vector of unit length, so
tests compute the expected vector of any text with :func:`standin_embedding`.
"""

from __future__ import annotations

import asyncio
import hashlib
import socket
import threading
import time
import uuid
from collections import deque
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import msgspec
import numpy as np
import numpy.typing as npt
import uvicorn
from litestar import Litestar, Request, Response, post
from litestar.di import NamedDependency, Provide
from litestar.types import ControllerRouterHandler

MODEL_DIMENSIONS = {
    "embed-english-v3.0": 1024,
    "embed-multilingual-v3.0": 1024,
    "embed-english-light-v3.0": 384,
    "embed-multilingual-light-v3.0": 384,
    "embed-v4.0": 1536,
}
"""Cohere's documented default output dimensions; kept apart from the provider's table on purpose."""
SELECTABLE_DIMENSIONS = {"embed-v4.0": (256, 512, 1024, 1536)}
MAX_TEXTS = 96
INPUT_TYPES = ("search_document", "search_query", "classification", "clustering", "image")


class EmbedRequest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """The body of ``POST /v2/embed`` as the SDK sends it; an unknown field is a 400, as a contract check."""

    model: str
    input_type: str
    texts: list[str] | None = None
    images: list[str] | None = None
    inputs: list[Any] | None = None
    max_tokens: int | None = None
    output_dimension: int | None = None
    embedding_types: list[str] | None = None
    truncate: str | None = None
    priority: int | None = None


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    path: str
    authorization: str | None
    body: Any
    """The decoded JSON body, or ``None`` when it was not JSON."""
    received_at: float
    """``time.monotonic()`` on arrival."""

    @property
    def texts(self) -> list[str]:
        return list(self.body.get("texts") or []) if isinstance(self.body, dict) else []

    @property
    def input_type(self) -> str | None:
        return self.body.get("input_type") if isinstance(self.body, dict) else None


@dataclass(frozen=True, slots=True)
class ScriptedFailure:
    status: int
    message: str
    retry_after: str | None


def standin_embedding(model: str, input_type: str, text: str, dimension: int | None = None) -> npt.NDArray[np.float32]:
    """The unit vector the stand-in returns for ``text``; queries and documents differ, as with Cohere."""
    seed = hashlib.blake2b(f"{model}\0{input_type}\0{text}".encode(), digest_size=8).digest()
    vector = np.random.default_rng(int.from_bytes(seed, "little")).standard_normal(dimension or MODEL_DIMENSIONS[model])
    unit: npt.NDArray[np.float32] = (vector / np.linalg.norm(vector)).astype(np.float32)
    return unit


def cohere_error(status: int, message: str, headers: dict[str, str] | None = None) -> Response[Any]:
    """An error the way Cohere sends it: ``{"id": ..., "message": ...}``."""
    return Response({"id": str(uuid.uuid4()), "message": message}, status_code=status, headers=headers)


class CohereStandIn:
    """State, scripting and observations of one stand-in server; thread-safe, as the server runs in a thread.

    Args:
        api_key: The only bearer token accepted.
        latency: Seconds every request is held before it is answered, so concurrent requests overlap.
        vector_scale: Multiplies every returned vector, to check that clients normalise what they receive.
        routes: Extra route handlers (other Cohere endpoints); they can ask for ``standin`` as a dependency.
    """

    def __init__(
        self,
        *,
        api_key: str = "standin-api-key",
        latency: float = 0.0,
        vector_scale: float = 1.0,
        routes: Sequence[ControllerRouterHandler] = (),
    ) -> None:
        self.api_key = api_key
        self.latency = latency
        self.vector_scale = vector_scale
        self.base_url = ""
        """Set by :func:`running_cohere_standin` once the server listens."""
        self._routes = list(routes)
        self._lock = threading.Lock()
        self._failures: deque[ScriptedFailure] = deque()
        self._requests: list[RecordedRequest] = []
        self._in_flight = 0
        self._max_in_flight = 0

    def fail_next(
        self, status: int, *, times: int = 1, message: str | None = None, retry_after: str | None = None
    ) -> None:
        """Answer the next ``times`` requests with ``status`` (e.g. 429 with ``Retry-After``, 503, 400, 401)."""
        failure = ScriptedFailure(status, message or f"stand-in scripted failure {status}", retry_after)
        with self._lock:
            self._failures.extend([failure] * times)

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received so far, in arrival order."""
        with self._lock:
            return list(self._requests)

    @property
    def max_in_flight(self) -> int:
        """The most requests that were being answered at the same moment."""
        with self._lock:
            return self._max_in_flight

    def app(self) -> Litestar:
        return Litestar(
            route_handlers=[embed, *self._routes],
            before_request=self._gate,
            dependencies={"standin": Provide(lambda: self, sync_to_thread=False)},
            openapi_config=None,
            logging_config=None,
        )

    async def _gate(self, request: Request[Any, Any, Any]) -> Response[Any] | None:
        raw = await request.body()
        try:
            body = msgspec.json.decode(raw)
        except msgspec.DecodeError:
            body = None
        authorization = request.headers.get("authorization")
        with self._lock:
            self._requests.append(RecordedRequest(request.url.path, authorization, body, time.monotonic()))
            self._in_flight += 1
            self._max_in_flight = max(self._max_in_flight, self._in_flight)
        try:
            await asyncio.sleep(self.latency)
        finally:
            with self._lock:
                self._in_flight -= 1
                failure = self._failures.popleft() if self._failures else None
        if failure is not None:
            headers = {"Retry-After": failure.retry_after} if failure.retry_after is not None else None
            return cohere_error(failure.status, failure.message, headers)
        if authorization is None:
            return cohere_error(401, "no api key supplied")
        if authorization != f"Bearer {self.api_key}":
            return cohere_error(401, "invalid api token")
        return None


class Refused(Exception):
    """A request Cohere would refuse; becomes a Cohere-shaped error response."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def embedding_dimension(body: EmbedRequest) -> int:
    """The dimension to answer with, after the checks Cohere makes that a client can trip over."""
    dimension = MODEL_DIMENSIONS.get(body.model)
    if dimension is None:
        raise Refused(404, f"model '{body.model}' not found, make sure the correct model ID was used")
    if body.input_type not in INPUT_TYPES:
        raise Refused(400, "invalid request: valid input_type must be provided with the provided model")
    texts = body.texts or []
    if not texts or body.images or body.inputs:
        raise Refused(400, "invalid request: the stand-in embeds a non-empty list of texts only")
    if len(texts) > MAX_TEXTS:
        raise Refused(400, f"invalid request: texts must contain at most {MAX_TEXTS} items, got {len(texts)}")
    if (body.embedding_types or ["float"]) != ["float"]:
        raise Refused(400, "invalid request: the stand-in returns float embeddings only")
    if body.output_dimension is None:
        return dimension
    if body.output_dimension not in SELECTABLE_DIMENSIONS.get(body.model, ()):
        raise Refused(400, f"invalid request: output_dimension is not supported for model {body.model}")
    return body.output_dimension


@post("/v2/embed")
async def embed(request: Request[Any, Any, Any], standin: NamedDependency[CohereStandIn]) -> Response[Any]:
    """Cohere's v2 embed, for texts and float embeddings."""
    try:
        body = msgspec.json.decode(await request.body(), type=EmbedRequest)
        dimension = embedding_dimension(body)
    except msgspec.DecodeError as error:
        return cohere_error(400, f"invalid request: {error}")
    except Refused as refused:
        return cohere_error(refused.status, str(refused))
    texts = body.texts or []
    vectors = [
        (standin_embedding(body.model, body.input_type, text, dimension) * standin.vector_scale).tolist()
        for text in texts
    ]
    return Response(
        {
            "id": str(uuid.uuid4()),
            "embeddings": {"float": vectors},
            "texts": texts,
            "meta": {
                "api_version": {"version": "2"},
                "billed_units": {"input_tokens": sum(len(text.split()) for text in texts)},
            },
            "response_type": "embeddings_by_type",
        }
    )


@contextmanager
def serve_on_loopback(app: Litestar) -> Iterator[str]:
    """Run ``app`` with uvicorn on 127.0.0.1 and an ephemeral port in a background thread; yields its URL."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_config=None, access_log=False, lifespan="off", ws="none", loop="asyncio")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="cohere-standin", daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the stand-in server did not start")
            time.sleep(0.005)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


@contextmanager
def running_cohere_standin(**options: Any) -> Iterator[CohereStandIn]:
    """A :class:`CohereStandIn` (``options`` are its arguments) listening on loopback for the block."""
    standin = CohereStandIn(**options)
    with serve_on_loopback(standin.app()) as base_url:
        standin.base_url = base_url
        yield standin
