"""Both services on one database (the test's transaction), sharing the vector stores and embedders."""

from __future__ import annotations

import math
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import UTC, datetime
from typing import Any

import httpx
import msgspec
import numpy as np
import numpy.typing as npt
import pytest
from litestar import Litestar

from chonkit.app import create_app as create_chonkit
from common.auth import Authenticator, Principal
from common.clients import SharedClients
from common.config import Settings
from common.db import SingleConnectionDatabase
from common.embedders.base import EmbedderRegistry
from common.vectors.base import VectorRecord
from common.vectors.registry import VectorRegistry
from kappi.agent.models import Assignment
from kappi.app import Kappi
from kappi.app import create_app as create_kappi
from kappi.llm.registry import default_llm_registry
from schemas.models import Identity
from tests.chonkit.conftest import bearer

AppClient = Callable[[Litestar], AbstractAsyncContextManager[httpx.AsyncClient]]


@pytest.fixture
async def chonkit(
    settings: Settings, db: SingleConnectionDatabase, clients: SharedClients, app_client: AppClient
) -> AsyncIterator[httpx.AsyncClient]:
    async with app_client(create_chonkit(settings, database=db, clients=clients, worker=False)) as client:
        client.headers.update(bearer(settings))
        yield client


@pytest.fixture
async def kappi(
    settings: Settings, db: SingleConnectionDatabase, clients: SharedClients, app_client: AppClient
) -> AsyncIterator[httpx.AsyncClient]:
    """Kappi with no default identity; each request names its user with :func:`as_user`."""
    async with app_client(create_kappi(settings, database=db, clients=clients)) as client:
        yield client


def as_user(settings: Settings, subject: str, *groups: str, admin: bool = False) -> dict[str, str]:
    return bearer(settings, subject, admin=admin, groups=groups)


def sse_events(body: str) -> list[tuple[str, Any]]:
    """Parse a complete SSE body into (event, decoded data) pairs."""
    events = []
    for block in body.split("\r\n\r\n" if "\r\n\r\n" in body else "\n\n"):
        name, data = "message", []
        for line in block.splitlines():
            if line.startswith("event:"):
                name = line.removeprefix("event:").strip()
            elif line.startswith("data:"):
                data.append(line.removeprefix("data:").lstrip())
        if data:
            events.append((name, msgspec.json.decode("\n".join(data))))
    return events


def principal(subject: str, *groups: str, admin: bool = False) -> Principal:
    """A user as the authenticator hands them to a service."""
    roles = frozenset({"admin"}) if admin else frozenset()
    return Principal(subject=subject, name=None, groups=frozenset(groups), roles=roles, is_admin=admin)


@pytest.fixture
def services(db: SingleConnectionDatabase, clients: SharedClients, settings: Settings) -> Kappi:
    """Kappi's services as its app composes them, for tests that call them directly. The caches live 60 s, so a
    decision that must be live cannot pass on a fresh cache entry."""
    return Kappi.build(db, clients, clients.vectors, default_llm_registry(), Authenticator(settings), ttl=60)


QUESTION = "How many vacation days do employees get?"
EMBEDDER = ("local", "all-MiniLM-L6-v2")


class Placed(msgspec.Struct, frozen=True, kw_only=True):
    """A chunk to store, at a chosen cosine similarity to :data:`QUESTION`: its score when that is asked."""

    score: float
    content: str
    document_id: str = msgspec.field(default_factory=lambda: str(uuid.uuid4()))
    parent_content: str | None = None
    tags: list[str] | None = None
    label: str | None = None


class Shelf:
    """Collections made for one test. Each chunk's vector is built from the question's own embedding (the real local
    model), so a test knows every score in advance instead of hoping a model ranks texts its way."""

    def __init__(self, vectors: VectorRegistry, embedders: EmbedderRegistry) -> None:
        self.vectors = vectors
        self.embedders = embedders
        self._question: npt.NDArray[np.float32] | None = None
        self._placed = 0

    async def collection(
        self, provider: str = "qdrant", *, groups: Sequence[str] = (), chunks: Sequence[Placed] = (), name: str = ""
    ) -> Identity:
        identity = Identity(
            collection_id=str(uuid.uuid4()),
            name=name or f"Shelf_{uuid.uuid4().hex[:8]}",
            model=EMBEDDER[1],
            vectorProvider=provider,
            embeddingProvider=EMBEDDER[0],
            groups=list(groups) or msgspec.UNSET,
        )
        question = await self.question_vector()
        store = self.vectors.get(provider)
        await store.create_collection(identity, len(question))
        records = [
            VectorRecord(
                id=str(uuid.uuid4()), vector=self._at(question, chunk.score), payload=_payload(identity, chunk)
            )
            for chunk in chunks
        ]
        if records:
            await store.upsert(identity.name, records)
        return identity

    async def question_vector(self) -> npt.NDArray[np.float32]:
        if self._question is None:
            self._question = await self.embedders.get(*EMBEDDER).embed_query(QUESTION)
        return self._question

    def _at(self, question: npt.NDArray[np.float32], score: float) -> npt.NDArray[np.float32]:
        """A unit vector at cosine similarity ``score`` to the (unit) question vector."""
        self._placed += 1
        other = np.random.default_rng(self._placed).normal(size=question.shape)
        other -= other.dot(question) * question
        other /= np.linalg.norm(other)
        return (score * question + math.sqrt(1 - score**2) * other).astype(np.float32)


def _payload(identity: Identity, chunk: Placed) -> dict[str, Any]:
    extras: dict[str, Any] = {} if chunk.parent_content is None else {"parent_content": chunk.parent_content}
    extras |= {} if chunk.tags is None else {"tags": chunk.tags}
    extras |= {} if chunk.label is None else {"label": chunk.label}
    return {**identity.to_dict(), "content": chunk.content, "document_id": chunk.document_id, **extras}


def assignment(identity: Identity, *, top_k: int = 5, max_distance: float | None = None) -> Assignment:
    """How an agent holds ``identity``'s collection, as :meth:`AgentService.assign` would store it."""
    return Assignment(
        vector_provider=identity.vectorProvider,
        name=identity.name,
        collection_id=identity.collection_id,
        top_k=top_k,
        max_distance=max_distance,
        instruction=f"{identity.name} notes",
        created_at=datetime.now(UTC),
    )


@pytest.fixture
def shelf(vectors: VectorRegistry, embedders: EmbedderRegistry) -> Shelf:
    return Shelf(vectors, embedders)
