"""The record helpers every vector adapter shares: identity validation, chunk ids, vector conversion."""

from __future__ import annotations

import uuid
from typing import Any

import numpy as np
import pytest

from common.errors import InvalidInput
from common.vectors.base import IDENTITY_ID
from common.vectors.records import as_floats, checked_identity_payload, chunk_uuid, valid_identity
from schemas.models import Identity


def make_identity(**changes: Any) -> Identity:
    fields = {"name": "Handbook", "model": "m", "vectorProvider": "qdrant", "embeddingProvider": "local"}
    return Identity(collection_id=str(uuid.UUID(int=1)), **(fields | changes))


def test_identity_payload_is_exactly_the_identity_and_validated() -> None:
    assert checked_identity_payload(make_identity()) == make_identity().to_dict()
    assert "groups" not in checked_identity_payload(make_identity())
    # msgspec does not type-check constructor arguments; the schema catches what slips through.
    with pytest.raises(InvalidInput) as raised:
        checked_identity_payload(make_identity(groups=[7]))
    assert raised.value.code == "invalid_identity"
    assert raised.value.extra["violations"][0]["path"] == "/groups/0"


def test_a_stored_identity_is_valid_only_for_its_own_collection() -> None:
    stored = make_identity(groups=["hr"]).to_dict()

    assert valid_identity("Handbook", stored) == make_identity(groups=["hr"])
    assert valid_identity("Other", stored) is None


@pytest.mark.parametrize(
    "stored",
    [
        None,
        "Handbook",
        ["Handbook"],
        {"name": "Handbook"},
        make_identity().to_dict() | {"groups": []},
        make_identity().to_dict() | {"extra": 1},
    ],
    ids=["missing", "string", "list", "incomplete", "empty-groups", "unknown-field"],
)
def test_anything_but_a_valid_identity_is_none_never_an_error(stored: object) -> None:
    assert valid_identity("Handbook", stored) is None


def test_chunk_ids_are_uuids_and_the_identity_id_is_refused() -> None:
    chunk_id = "6F9619FF-8B86-D011-B42D-00C04FC964FF"
    assert chunk_uuid(chunk_id) == uuid.UUID(chunk_id)
    assert str(chunk_uuid(chunk_id)) == chunk_id.lower()
    for reserved in (IDENTITY_ID, "{00000000-0000-0000-0000-000000000000}", "0" * 32):
        with pytest.raises(InvalidInput) as nil:
            chunk_uuid(reserved)
        assert nil.value.code == "identity_id_reserved"
    for garbage in ("chunk-7", "", None, 7):
        with pytest.raises(InvalidInput) as invalid:
            chunk_uuid(garbage)  # type: ignore[arg-type]  # what untyped callers may send
        assert invalid.value.code == "invalid_vector_id"


def test_as_floats_passes_lists_through_and_converts_arrays_to_the_same_python_floats() -> None:
    values = [0.1, -2.5, 3.0]
    row = np.array(values, dtype=np.float32)

    assert as_floats(values) is values
    converted = as_floats(row)
    assert type(converted) is list
    assert all(type(x) is float for x in converted)
    assert converted == [float(x) for x in row]  # float32 values exactly, not their float64 neighbours
    assert as_floats(np.array(values, dtype=np.float64)) == values
    assert as_floats((1, 2.5)) == [1.0, 2.5]
