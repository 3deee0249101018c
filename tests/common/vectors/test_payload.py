"""A chunk's payload is one typed Struct from the worker to the readers, stored under the keys it always had."""

from __future__ import annotations

import uuid

import msgspec
import pytest

from chonkit.collection.service import SEARCH_PROPERTIES
from chonkit.document.chunking import Chunk, ChunkResult
from chonkit.embedding.worker import chunk_records
from common.vectors import (
    CHUNK_EXTRAS,
    IDENTITY_PROPERTIES,
    TEXT_PROPERTIES,
    ChunkFields,
    ChunkPayload,
    read_chunk,
)
from kappi.retrieval.service import PASSAGE_PROPERTIES
from schemas import validate
from schemas.models import Identity

STORED_KEYS = {*IDENTITY_PROPERTIES, *TEXT_PROPERTIES, *CHUNK_EXTRAS}


def identity(groups: list[str] | None) -> Identity:
    return Identity(
        collection_id=str(uuid.UUID(int=7)),
        name="Handbook",
        model="all-MiniLM-L6-v2",
        vectorProvider="pgvector",
        embeddingProvider="local",
        groups=groups if groups is not None else msgspec.UNSET,
    )


def piece(index: int, *, parent: int | None = None) -> Chunk:
    return Chunk(
        index=index,
        text=f"Leave\n\nchunk {index}",
        content=f"chunk {index}",
        char_start=10 * index,
        char_end=10 * index + 7,
        page_start=index + 1,
        page_end=None,
        heading_path=("Leave",),
        token_count=4,
        parent_index=parent,
    )


def records(groups: list[str] | None) -> list[dict[str, object]]:
    parent = Chunk(**{**msgspec.structs.asdict(piece(0)), "content": "the whole parent", "index": 0})
    result = ChunkResult(chunks=[piece(0), piece(1, parent=0)], parents=[parent])
    written = chunk_records(
        collection_id=uuid.UUID(int=7),
        identity=identity(groups),
        document_id=uuid.UUID(int=9),
        document_name="handbook.pdf",
        document_sha256="ab" * 32,
        result=result,
        vectors=[[1.0, 0.0], [0.0, 1.0]],
    )
    assert all(isinstance(record.payload, ChunkPayload) for record in written)
    return [msgspec.to_builtins(record.payload) for record in written]


@pytest.mark.parametrize("groups", [["hr", "legal"], None], ids=["groups", "public"])
def test_the_worker_writes_the_keys_collections_always_held(groups: list[str] | None) -> None:
    first, second = records(groups)
    assert first == {
        **identity(groups).to_dict(),
        "content": "Leave\n\nchunk 0",
        "document_id": str(uuid.UUID(int=9)),
        "document_name": "handbook.pdf",
        "document_sha256": "ab" * 32,
        "chunk_index": 0,
        "char_start": 0,
        "char_end": 7,
        "page_start": 1,
        "page_end": None,
        "heading_path": ["Leave"],
        "token_count": 4,
        "content_hash": first["content_hash"],
        "parent_index": None,
        "parent_content": None,
        "tags": [],
        "label": None,
        "ocr": False,
    }
    assert set(first) == (STORED_KEYS if groups else STORED_KEYS - {"groups"})
    assert (second["parent_index"], second["parent_content"]) == (0, "the whole parent")
    validate("text-payload", first)


def test_the_payload_struct_names_every_stored_property_and_readers_ask_for_typed_ones() -> None:
    assert set(ChunkPayload.__struct_fields__) == STORED_KEYS
    assert set(PASSAGE_PROPERTIES) <= set(ChunkFields.__struct_fields__)
    assert set(SEARCH_PROPERTIES) <= set(ChunkFields.__struct_fields__)


def test_a_hit_reads_typed_with_what_was_not_asked_for_left_at_its_default() -> None:
    found = read_chunk({"content": "Leave is 25 days.", "document_id": "d1", "page_start": 3})
    assert found == ChunkFields(content="Leave is 25 days.", document_id="d1", page_start=3)
    assert (found.document_name, found.heading_path, found.parent_content) == (None, [], None)


def test_a_property_of_another_type_reads_as_absent_and_the_rest_still_reads() -> None:
    """Another application's chunk in a Ragu collection: one odd property must not cost the whole question."""
    found = read_chunk({"content": "Leave", "document_id": "d1", "page_start": "three", "heading_path": None})
    assert found == ChunkFields(content="Leave", document_id="d1")
