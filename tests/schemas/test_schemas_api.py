"""The schema files and the loader/validator API around them."""

from __future__ import annotations

import ast
import json
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema_rs
import msgspec
import pytest
from jsonschema import Draft202012Validator

import schemas
from schemas import SCHEMA_NAMES, SchemaViolation, UnknownSchema, Violation, errors, load, schema_bytes, validate
from schemas.ecma import search, to_python
from schemas.validation import _json_pointer

DRAFT_2020_12 = "https://json-schema.org/draft/2020-12/schema"
IDENTITY: dict[str, Any] = {
    "collection_id": "2f6c1e0a-8b9e-4c1d-9a57-3c0f5e1b7d42",
    "name": "Hr_docs",
    "model": "text-embedding-3-small",
    "vectorProvider": "qdrant",
    "embeddingProvider": "openai",
}


@pytest.mark.parametrize("name", SCHEMA_NAMES)
def test_files_are_valid_2020_12_schemas_for_both_implementations(name: str) -> None:
    schema = load(name)

    assert schema["$schema"] == DRAFT_2020_12
    Draft202012Validator.check_schema(schema)
    assert jsonschema_rs.meta.is_valid(schema)


@pytest.mark.parametrize("name", SCHEMA_NAMES)
def test_files_carry_a_stable_id_named_after_the_file_and_a_title(name: str) -> None:
    schema = load(name)

    assert schema["$id"] == f"https://ragu.dev/schemas/{name}.schema.json"
    assert schema["title"]


def test_every_shipped_schema_file_is_listed_in_schema_names() -> None:
    shipped = {path.name for path in resources.files("schemas").iterdir() if path.name.endswith(".schema.json")}

    assert shipped == {f"{name}.schema.json" for name in SCHEMA_NAMES}


def test_identity_is_closed_and_text_payload_open_as_the_seed_defines_them() -> None:
    identity, payload = load("identity"), load("text-payload")

    assert identity["required"] == ["collection_id", "name", "model", "vectorProvider", "embeddingProvider"]
    assert identity["additionalProperties"] is False
    assert payload["required"] == ["content", "document_id"]
    assert "additionalProperties" not in payload


@pytest.mark.parametrize("name", SCHEMA_NAMES)
def test_schema_bytes_is_the_raw_file_and_load_its_parse(name: str) -> None:
    raw = schema_bytes(name)

    assert raw == resources.files("schemas").joinpath(f"{name}.schema.json").read_bytes()
    assert json.loads(raw) == load(name)


def test_editing_a_loaded_schema_changes_neither_later_loads_nor_validation() -> None:
    schema = load("identity")
    schema["required"].clear()
    schema["additionalProperties"] = True

    assert load("identity")["required"] == ["collection_id", "name", "model", "vectorProvider", "embeddingProvider"]
    assert [v.validator for v in errors("identity", {"extra": 1})] == ["additionalProperties"] + ["required"] * 5


@pytest.mark.parametrize(
    "call",
    [load, schema_bytes, lambda name: errors(name, {}), lambda name: validate(name, {})],
    ids=["load", "schema_bytes", "errors", "validate"],
)
def test_unknown_schema_name_is_a_clear_value_error(call: Any) -> None:
    known = "chunk, identity, text-payload"
    with pytest.raises(UnknownSchema, match=rf"unknown schema 'image-payload'; known schemas: {known}"):
        call("image-payload")
    assert issubclass(UnknownSchema, ValueError)


def test_valid_object_has_no_violations() -> None:
    assert errors("identity", IDENTITY) == []
    validate("identity", IDENTITY)


def test_three_problems_are_reported_as_three_violations() -> None:
    broken = {**IDENTITY, "name": "hr", "groups": ["hr", 7], "unexpected": True}

    with pytest.raises(SchemaViolation) as raised:
        validate("identity", broken)

    assert raised.value.schema_name == "identity"
    assert raised.value.violations == [
        Violation(
            path="",
            message="Additional properties are not allowed ('unexpected' was unexpected)",
            validator="additionalProperties",
        ),
        Violation(path="/groups/1", message="7 is not of type 'string'", validator="type"),
        Violation(path="/name", message="'hr' does not match '^[A-Z]{1}[a-zA-Z0-9_]*$'", validator="pattern"),
    ]
    assert str(raised.value).startswith("3 violation(s) of the 'identity' schema: /: Additional properties")
    assert isinstance(raised.value, ValueError)


def test_violations_are_sorted_with_array_indexes_in_numeric_order() -> None:
    violations = errors("identity", {**IDENTITY, "groups": list(range(12))})

    assert [v.path for v in violations] == [f"/groups/{index}" for index in range(12)]
    assert errors("identity", {**IDENTITY, "groups": list(range(12))}) == violations


def test_violation_is_a_frozen_struct_that_serialises_for_api_responses() -> None:
    violation = errors("text-payload", {"document_id": "d"})[0]

    assert msgspec.json.decode(msgspec.json.encode(violation)) == {
        "path": "",
        "message": "'content' is a required property",
        "validator": "required",
    }
    with pytest.raises(AttributeError):
        violation.path = "/content"  # type: ignore[misc]


def test_json_pointer_escapes_tilde_and_slash_per_rfc_6901() -> None:
    assert _json_pointer(["a/b", "m~n", 0]) == "/a~1b/m~0n/0"
    assert _json_pointer([]) == ""


@pytest.mark.parametrize(
    ("pattern", "python"),
    [
        ("^[A-Z]{1}[a-zA-Z0-9_]*$", r"^[A-Z]{1}[a-zA-Z0-9_]*\Z"),
        ("a$|^b$", r"a\Z|^b\Z"),
        ("[$]x", "[$]x"),
        (r"\$x", r"\$x"),
        (r"[\]$]$", r"[\]$]\Z"),
    ],
)
def test_only_dollar_anchors_are_rewritten(pattern: str, python: str) -> None:
    assert to_python(pattern) == python


@pytest.mark.parametrize("pattern", ["^[A-Z]{1}[a-zA-Z0-9_]*$", "a$|^b", "[$]", r"\$$", "^$"])
@pytest.mark.parametrize("text", ["Hr_docs", "Hr_docs\n", "a", "a\n", "b\n", "$", "$\n", "", "\n"])
def test_pattern_matching_agrees_with_jsonschema_rs(pattern: str, text: str) -> None:
    rust = jsonschema_rs.Draft202012Validator({"type": "string", "pattern": pattern})

    assert search(pattern, text) is rust.is_valid(text)


def test_schemas_package_imports_nothing_else_from_the_repository() -> None:
    forbidden = {"common", "chonkit", "kappi", "ragu"}
    package = Path(schemas.__file__).parent
    imported: set[str] = set()
    for module in package.glob("*.py"):
        for node in ast.walk(ast.parse(module.read_text("utf-8"))):
            if isinstance(node, ast.Import):
                imported.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                imported.add(node.module.split(".")[0])

    assert "schemas" in imported
    assert not imported & forbidden
