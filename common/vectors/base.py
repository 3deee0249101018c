"""The vector-store port: what chonkit and kappi need from pgvector, Qdrant or Weaviate, in our own types.

Every Ragu collection holds one **identity record** at :data:`IDENTITY_ID` whose properties are the
collection's :class:`~schemas.models.Identity` (validated against ``schemas/`` before every write) and
whose vector is :func:`identity_vector` — a unit vector every provider accepts. It never appears in
searches, counts or document listings. Every chunk record carries the identity properties too
(``collection_id``, ``name``, ``model``, ``vectorProvider``, ``embeddingProvider``, ``groups``) plus the
text payload (``content``, ``document_id``) plus our extras (:data:`CHUNK_EXTRAS`): a :class:`ChunkPayload`,
which adapters store under the same keys in each engine's format. Queries always name the properties they
want back, and readers take them as a :class:`ChunkFields` (:func:`read_chunk`).

Vendor types (qdrant_client.models, weaviate classes, asyncpg records) never cross this port.
Distances are cosine distances (``1 - cosine similarity``, 0 = identical) in every retrieval mode.

Retrieval modes (:data:`RetrievalMode`), identical in every adapter:

- ``dense``: cosine similarity to ``vector``; ``score`` is the similarity.
- ``lexical``: BM25 over ``content`` as :mod:`common.vectors.lexical` analyses it; ``score`` is the BM25 score.
  A ``text`` with no indexable term (only stop words or punctuation) finds nothing.
- ``hybrid``: both legs, each :func:`common.vectors.fusion.leg_depth` deep, merged by weighted reciprocal-rank
  fusion (:func:`common.vectors.fusion.fuse`), per chunk or per document (:attr:`Search.fusion`); ``score`` is
  the fused score. With no indexable term it is the dense leg's order.

In every mode: hits sorted by score descending, ties by id ascending (a hybrid search fused per document: ties by
the chunk's own fused score, then id); ``distance`` is the cosine distance between
the hit's stored vector and the query vector; every ``where`` condition applies to every leg; ``max_distance``
is a post-filter: of the ``limit`` best hits, those further than it are dropped (in a dense search that is the
same as cutting first); the identity record is never a hit.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, Protocol, TypeAlias

import msgspec
import numpy as np
import numpy.typing as npt

from common.errors import AppError
from schemas.models import Identity

IDENTITY_ID = "00000000-0000-0000-0000-000000000000"
"""The nil UUID: the identity record's id in every collection."""

IDENTITY_PROPERTIES = ("collection_id", "name", "model", "vectorProvider", "embeddingProvider", "groups")
TEXT_PROPERTIES = ("content", "document_id")
CHUNK_EXTRAS = (
    "chunk_index",
    "char_start",
    "char_end",
    "page_start",
    "page_end",
    "heading_path",
    "token_count",
    "content_hash",
    "document_sha256",
    "document_name",
    "parent_index",
    "parent_content",
    "tags",
    "label",
    "ocr",
)
"""Our own payload fields beside the contract's (:class:`ChunkPayload` says what each holds); adapters store
them as they are and may index some."""

FILTERABLE = ("document_id", "groups", "tags", "label")
"""Payload fields we filter on; adapters index them (Qdrant payload indexes, Weaviate filterable, SQL)."""


RetrievalMode = Literal["dense", "lexical", "hybrid"]
RETRIEVAL_MODES: tuple[RetrievalMode, ...] = ("dense", "lexical", "hybrid")
DEFAULT_DENSE_WEIGHT = 0.4
"""The dense leg's share of a hybrid search's fusion when none is asked for, chosen with ``bench/scifact_bench.py``:
0.4 ranked better than 0.5 and 0.6 at every depth and RRF k tried. Measured on SciFact's test split itself, so a
default, not a law: every assignment and search may set its own.
"""
"""What a search ranks by (module docstring)."""
Fusion = Literal["chunk", "document", "document_lead"]
FUSIONS: tuple[Fusion, ...] = ("chunk", "document", "document_lead")
DEFAULT_FUSION: Fusion = "chunk"
"""How a hybrid search fuses its legs when none is asked for (:func:`common.vectors.fusion.fuse`): ``chunk`` ranks
each chunk by its own ranks in the legs, ``document`` by its document's best ranks, ``document_lead`` the document's
best chunk only by them. A per-document fusion becomes the default only if it ranks better on SciFact's dev split
and loses nothing on the answer suite's dev split (``docs/benchmarks.md``)."""

Vector: TypeAlias = Sequence[float] | npt.NDArray[np.float32]
"""Plain floats or an embedder's float32 array; adapters convert once, at their boundary."""


def identity_vector(dimension: int) -> list[float]:
    """``[1, 0, 0, …]``: unit length (cosine-safe everywhere), never a zero vector."""
    return [1.0] + [0.0] * (dimension - 1)


class ChunkFields(msgspec.Struct, frozen=True, kw_only=True):
    """A chunk's text and where it comes from, as readers take it from a hit. A search returns only the
    properties it asked for: the others, and any a chunk lacks, keep these defaults."""

    content: str = ""
    document_id: str = ""
    document_name: str | None = None
    """For citations, so kappi needs nothing but the vector store."""
    chunk_index: int | None = None
    """Position of the chunk in its document."""
    char_start: int | None = None
    char_end: int | None = None
    page_start: int | None = None
    page_end: int | None = None
    heading_path: list[str] = msgspec.field(default_factory=list)
    parent_index: int | None = None
    """Parent/child chunking: the parent this chunk belongs to."""
    parent_content: str | None = None
    """The parent's text, so kappi reads it without chonkit's database."""
    tags: list[str] = msgspec.field(default_factory=list)
    """The chonkit document's tags, copied on every chunk so searches filter on them (:class:`SearchFilter`)."""
    label: str | None = None
    """The chonkit document's label, likewise."""
    ocr: bool = False
    """Some of the chunk's text was recognised from a page image (OCR), so it may hold misreadings."""
    model: str | None = None
    embeddingProvider: str | None = None  # noqa: N815 -- the identity's wire spelling
    """The embedding model that wrote the chunk (the identity's): which version of a collection a hit comes from
    while its model changes. ``None`` for another application's chunks."""


class ChunkPayload(ChunkFields, frozen=True, kw_only=True):
    """Everything a chunk record carries, as the embedding worker writes it: the collection's identity
    properties (``groups`` left out when the collection has none, as in the identity), the text payload
    (required, as ``schemas/text-payload.schema.json`` says) and the extras."""

    collection_id: str
    name: str
    model: str
    vectorProvider: str  # noqa: N815 -- the identity's wire spelling
    embeddingProvider: str  # noqa: N815
    groups: list[str] | msgspec.UnsetType = msgspec.UNSET
    content: str
    document_id: str
    document_sha256: str
    """Which version of the document the chunk came from."""
    token_count: int
    content_hash: str
    """sha256 of ``content``, for incremental re-embedding."""


def read_chunk(payload: dict[str, Any]) -> ChunkFields:
    """A hit's payload, typed. A property of another type than Ragu writes (another application's chunk) reads
    as absent, so that one odd chunk never costs a question."""
    try:
        return msgspec.convert(payload, ChunkFields)
    except msgspec.ValidationError:
        return msgspec.convert({k: v for k, v in payload.items() if _fits(k, v)}, ChunkFields)


def _fits(key: str, value: object) -> bool:
    try:
        msgspec.convert({key: value}, ChunkFields)
    except msgspec.ValidationError:
        return False
    return True


class VectorRecord(msgspec.Struct, frozen=True, kw_only=True):
    """One chunk to write. ``id`` is a UUID string chosen by the caller (deterministic: retries overwrite)."""

    id: str
    vector: Vector
    payload: ChunkPayload | dict[str, Any]
    """A Ragu chunk's :class:`ChunkPayload`, or any JSON object (stored as it is)."""


class Legs(msgspec.Struct, frozen=True, kw_only=True):
    """Which leg of a lexical or hybrid search found a hit, so users can see what fusion changed."""

    dense_rank: int | None
    """1-based rank among the dense leg's candidates; ``None``: that leg did not find it (or did not run)."""
    lexical_rank: int | None
    lexical_score: float | None
    """The BM25 score."""
    fused_score: float | None
    """Hybrid only: the weighted RRF score."""


class SearchHit(msgspec.Struct, frozen=True, kw_only=True):
    id: str
    score: float
    """Dense: cosine similarity; lexical: BM25 score; hybrid: fused score. Higher is better."""
    distance: float
    """Cosine distance between the hit's vector and the query vector, in every mode."""
    payload: dict[str, Any]
    """Only the properties asked for (missing ones are absent, not None)."""
    legs: Legs | None = None
    """Lexical and hybrid searches only: dense searches (kappi's hot path) build nothing extra."""


class SearchFilter(msgspec.Struct, frozen=True, kw_only=True):
    """Payload conditions, AND-ed. ``None`` means "no condition on that field"."""

    readable_by: frozenset[str] | None = None
    """Access filter on the chunk's own copy of ``groups``: keep chunks with no ``groups`` property (unless
    ``ungrouped_readable`` is false), or whose ``groups`` is a list naming one of these. A ``groups`` that is no
    list (null, a string) or an empty list names no group, so no one reads that chunk. An empty set keeps only
    chunks without groups. ``None`` = no filter (chonkit's admin test bench only; kappi always sets it)."""
    ungrouped_readable: bool = True
    """With ``readable_by``: whether a chunk without a ``groups`` copy is kept. Kappi sets it false for a
    collection whose identity has groups: a chunk there without the copy lost it (another application wrote it)
    and is readable by nobody, so the chunk filter holds even if the collection check did not."""
    document_ids: frozenset[str] | None = None
    """Keep only chunks of these documents."""
    tags: frozenset[str] | None = None
    """Keep chunks whose payload ``tags`` (a list of strings) holds at least one of these; empty keeps none."""
    labels: frozenset[str] | None = None
    """Keep chunks whose payload ``label`` (a string) is one of these; empty keeps none."""


class Search(msgspec.Struct, frozen=True, kw_only=True):
    """One search: what :meth:`VectorStore.search` takes, and each of :meth:`VectorStore.search_many`'s."""

    name: str
    vector: Vector
    limit: int
    properties: Sequence[str]
    max_distance: float | None = None
    where: SearchFilter | None = None
    text: str = ""
    """The question's words, for the lexical leg (lexical and hybrid modes)."""
    mode: RetrievalMode = "dense"
    dense_weight: float = DEFAULT_DENSE_WEIGHT
    """Hybrid only: the dense leg's share of weighted RRF, 0..1 (1 = the dense order, 0 = the lexical order)."""
    fusion: Fusion = DEFAULT_FUSION
    """Hybrid only: fuse per chunk, or credit each chunk (``document``) or the document's best chunk
    (``document_lead``) with its document's best rank in each leg."""


SearchResult: TypeAlias = list[SearchHit] | AppError
"""A search's hits, or the error that search alone met (a collection dropped meanwhile, say)."""


class CollectionAdmin(Protocol):
    """Collections and their identity records: chonkit's collection service and reconcile, kappi's identity
    reader."""

    @property
    def provider(self) -> str:
        """The identity's ``vectorProvider`` string this adapter serves (``pgvector``, ``qdrant``, ``weaviate``)."""
        ...

    async def create_collection(self, identity: Identity, dimension: int) -> None:
        """Create the collection (cosine distance, ``dimension``-d vectors, payload indexes on
        :data:`FILTERABLE`) and write its identity record. ``Conflict(code="collection_exists")`` if a
        collection of that name already exists in this store."""
        ...

    async def collection_exists(self, name: str) -> bool: ...

    async def read_identity(self, name: str) -> dict[str, Any] | None:
        """The identity record's properties as stored (unvalidated: callers validate and report), or
        ``None`` when the collection or its identity record does not exist."""
        ...

    async def write_identity(self, identity: Identity) -> None:
        """Replace the identity record (validated against ``schemas`` first; invalid → ``InvalidInput``)."""
        ...

    async def set_groups(self, name: str, groups: Sequence[str]) -> None:
        """Rewrite ``groups`` on the identity and on every chunk; an empty list removes the property
        (the schema requires at least one item when present). The identity is written first."""
        ...

    async def list_identities(self) -> list[Identity]:
        """Identities of every collection in this store that carries a *valid* Ragu identity record;
        collections without one (not ours) are skipped and never modified."""
        ...

    async def drop_collection(self, name: str) -> None:
        """Delete the collection and everything in it (idempotent)."""
        ...

    async def aclose(self) -> None:
        """Release the store's clients (a pool handed in stays the caller's)."""
        ...


class ChunkWriter(Protocol):
    """Chunks in and out: the ingest pipeline, document removals and metadata changes."""

    async def upsert(self, name: str, records: Sequence[VectorRecord]) -> None:
        """Insert or overwrite chunk records by id. Callers batch (a few hundred records per call);
        adapters may split further to respect their API limits."""
        ...

    async def delete_document(self, name: str, document_id: str) -> None:
        """Remove every chunk of a document (idempotent)."""
        ...

    async def update_document(
        self, name: str, document_id: str, *, document_name: str, tags: Sequence[str], label: str | None
    ) -> None:
        """Set ``document_name``, ``tags`` and ``label`` on every chunk of a document (idempotent; other chunks
        and the identity stay as they are), so filters and citations follow the document's metadata."""
        ...

    async def delete_ids(self, name: str, ids: Sequence[str]) -> None:
        """Remove chunks by id (idempotent; the identity id is refused with ``InvalidInput``)."""
        ...


class ChunkCounter(Protocol):
    """What reconciliation compares with chonkit's database."""

    async def count(self, name: str, *, document_id: str | None = None) -> int:
        """Chunks in the collection (or of one document); never counts the identity."""
        ...

    async def document_ids(self, name: str) -> dict[str, int]:
        """Chunk count per ``document_id`` (for reconciliation with chonkit's database)."""
        ...

    async def count_misgrouped(self, name: str, groups: Sequence[str]) -> int:
        """Chunks whose ``groups`` copy is not ``groups`` (when ``groups`` is empty: chunks carrying a copy at all),
        which :meth:`set_groups` would rewrite: written by another application, or left by a write that failed
        halfway. Such a chunk is readable by nobody or by the wrong groups (for reconciliation)."""
        ...


class Searcher(Protocol):
    """Retrieval: kappi's questions and the search test bench."""

    async def search(self, search: Search) -> list[SearchHit]:
        """Top-``limit`` chunks in ``mode`` (module docstring; dense: by cosine distance, closest first), ties
        broken by id ascending; only hits with ``distance <= max_distance`` when given; never the identity
        record."""
        ...

    async def search_many(self, searches: Sequence[Search]) -> list[SearchResult]:
        """Several searches at once — kappi's fan-out over an agent's collections — each answered exactly as
        :meth:`search` would answer it, in order; an error of one search is its result, not the call's."""
        ...


class LexicalIndexer(Protocol):
    """The lexical index hybrid and keyword searches need, for a collection made without it."""

    async def upgrade_lexical(self, name: str) -> int:
        """Give a collection made before lexical retrieval its lexical index (idempotent, resumable); returns how
        many chunks it indexed (0 when the collection had it: every collection created since has). Until then
        its hybrid searches answer from the dense leg alone."""
        ...


class Versioner(Protocol):
    """A collection's next version beside it, swapped in when complete (a change of embedding model)."""

    async def create_version(self, identity: Identity, dimension: int, version: str) -> None:
        """Create a new version of collection ``identity.name`` beside it, stored as ``version`` (a name no
        collection has, following the same rule): empty but for its identity record, ``identity`` — the collection's
        own name with the version's model. It is written like a collection (``upsert(version, …)``, ``count``,
        ``drop_collection(version)``) and listed by nobody: its identity names another collection, so
        :meth:`list_identities` skips it. ``Conflict("collection_exists")`` if ``version`` exists."""
        ...

    async def swap_version(self, name: str, version: str) -> None:
        """Make ``version`` (from :meth:`create_version`) what ``name`` is, in one step every reader sees whole, and
        drop what ``name`` was: a search or identity read of ``name`` answers from the old version or the new one,
        never from both, never from neither. ``NotFound("collection_not_found")`` if ``version`` does not exist.
        Callers make it idempotent by the identity: once ``name``'s identity is the version's, it has happened."""
        ...


class VectorStore(CollectionAdmin, ChunkWriter, ChunkCounter, Searcher, LexicalIndexer, Versioner, Protocol):
    """One provider's adapter, with every capability; a caller that needs one asks for that one.

    Collection names follow one rule in every store (:data:`records.NAME_RULE`): a name that breaks it is never
    looked up — ``collection_exists`` answers False, ``read_identity`` None, ``drop_collection`` nothing, and every
    other method ``InvalidInput("invalid_collection_name")``."""
