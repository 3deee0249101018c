"""The msgspec models agree with the schema files and with the validator."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest

from schemas import SchemaViolation, load, validate
from schemas.models import NAME_PATTERN, Chunk, Identity, TextPayload, parse_chunk, parse_identity, parse_text_payload

GOLDEN = Path(__file__).parent / "golden"
IDENTITY: dict[str, Any] = {
    "collection_id": "2f6c1e0a-8b9e-4c1d-9a57-3c0f5e1b7d42",
    "name": "Hr_docs",
    "model": "text-embedding-3-small",
    "vectorProvider": "qdrant",
    "embeddingProvider": "openai",
}


def _golden(name: str, *, valid: bool) -> list[Any]:
    cases = json.loads((GOLDEN / f"{name}.json").read_text("utf-8"))
    return [pytest.param(case["data"], id=case["description"]) for case in cases if case["valid"] is valid]


@pytest.mark.parametrize(("model", "name"), [(Chunk, "chunk"), (Identity, "identity"), (TextPayload, "text-payload")])
def test_msgspec_schema_of_the_model_matches_the_file(model: type[msgspec.Struct], name: str) -> None:
    generated = msgspec.json.schema(model)["$defs"][model.__name__]
    published = load(name)

    assert generated["type"] == published["type"]
    assert generated["properties"] == published["properties"]
    assert generated["required"] == published["required"]
    assert generated.get("additionalProperties") == published.get("additionalProperties")


def test_name_pattern_constant_is_the_published_pattern() -> None:
    assert load("identity")["properties"]["name"]["pattern"] == NAME_PATTERN


@pytest.mark.parametrize("data", _golden("identity", valid=True))
def test_valid_identities_round_trip_unchanged(data: dict[str, Any]) -> None:
    identity = parse_identity(data)

    assert identity.to_dict() == data
    validate("identity", identity.to_dict())
    assert msgspec.json.decode(msgspec.json.encode(identity), type=Identity) == identity


@pytest.mark.parametrize("data", _golden("identity", valid=False))
def test_parse_identity_rejects_invalid_identities_with_every_violation(data: Any) -> None:
    with pytest.raises(SchemaViolation) as raised:
        parse_identity(data)

    assert raised.value.violations
    assert raised.value.schema_name == "identity"


def test_to_dict_omits_unset_groups_and_keeps_given_ones() -> None:
    public = Identity(**IDENTITY)
    restricted = Identity(**IDENTITY, groups=["hr"])

    assert "groups" not in public.to_dict()
    assert restricted.to_dict()["groups"] == ["hr"]


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"name": "hr"}, "does not match"),
        ({"name": "Hr_docs\n"}, "does not match"),
        ({"groups": []}, "at least one group"),
    ],
)
def test_identity_built_in_code_cannot_break_the_value_rules(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Identity(**{**IDENTITY, **changes})


def test_identity_is_frozen_and_forbids_unknown_fields_when_decoded() -> None:
    identity = Identity(**IDENTITY)

    with pytest.raises(AttributeError):
        identity.name = "Other"  # type: ignore[misc]
    with pytest.raises(msgspec.ValidationError, match="unknown field `owner`"):
        msgspec.convert({**IDENTITY, "owner": "alice"}, Identity)


def test_parse_text_payload_keeps_content_and_document_id_and_drops_extras() -> None:
    chunk = {"content": "Leave is 25 days.", "document_id": "9b1d", **IDENTITY, "page": 3}

    assert parse_text_payload(chunk) == TextPayload(content="Leave is 25 days.", document_id="9b1d")
    with pytest.raises(SchemaViolation, match="'content' is a required property"):
        parse_text_payload({"document_id": "9b1d"})


def test_the_chunk_schema_restates_the_identity_and_text_payload_schemas_exactly() -> None:
    """The chunk file stands alone (no $ref to resolve), so nothing but this test keeps it equal to the seed's."""
    chunk, identity, text = load("chunk"), load("identity"), load("text-payload")

    assert chunk["properties"] == {**identity["properties"], **text["properties"]}
    assert chunk["required"] == [*identity["required"], *text["required"]]
    assert "additionalProperties" not in chunk  # open, like the text payload


def test_parse_chunk_checks_the_identity_rules_and_drops_extras() -> None:
    data = {**IDENTITY, "groups": ["hr"], "content": "Leave is 25 days.", "document_id": "d1", "chunk_index": 3}

    chunk = parse_chunk(data)

    assert (chunk.name, chunk.groups, chunk.content) == ("Hr_docs", ["hr"], "Leave is 25 days.")
    with pytest.raises(SchemaViolation):
        parse_chunk({**data, "groups": []})
    with pytest.raises(ValueError, match="groups"):
        Chunk(**{**IDENTITY, "groups": [], "content": "x", "document_id": "d1"})
