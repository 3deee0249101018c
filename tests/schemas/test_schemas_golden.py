"""Golden examples, judged by our validator, by an independent 2020-12 implementation and by the models.

Each ``golden/<schema>.json`` is a list of cases ``{"description", "valid", "data", "violations"?}``;
``violations`` lists the ``{"path", "validator"}`` pairs our validator must report, in its order.
jsonschema-rs (Rust) is the independent implementation: if it and we disagree on a case, one of us
is not implementing JSON Schema 2020-12 and the contract means different things to different apps.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import jsonschema_rs
import msgspec
import pytest

from schemas import SCHEMA_NAMES, SchemaViolation, errors, load, validate
from schemas.models import Chunk, Identity, TextPayload

GOLDEN = Path(__file__).parent / "golden"
MODELS: dict[str, type[msgspec.Struct]] = {"chunk": Chunk, "identity": Identity, "text-payload": TextPayload}


def _cases() -> list[Any]:
    params = []
    for name in SCHEMA_NAMES:
        for case in json.loads((GOLDEN / f"{name}.json").read_text("utf-8")):
            params.append(pytest.param(name, case, id=f"{name}: {case['description']}"))
    return params


CASES = _cases()


def _expected(case: dict[str, Any]) -> list[tuple[str, str]]:
    return [(v["path"], v["validator"]) for v in case.get("violations", [])]


@functools.cache
def _rust_validator(name: str) -> jsonschema_rs.Draft202012Validator:
    return jsonschema_rs.Draft202012Validator(load(name), validate_formats=True)


def test_golden_files_cover_both_verdicts_for_every_schema() -> None:
    for name in SCHEMA_NAMES:
        cases = json.loads((GOLDEN / f"{name}.json").read_text("utf-8"))
        assert {case["valid"] for case in cases} == {True, False}
        assert all(case["valid"] == ("violations" not in case) for case in cases)
        assert len({case["description"] for case in cases}) == len(cases)


@pytest.mark.parametrize(("name", "case"), CASES)
def test_our_validator_reports_exactly_the_golden_violations(name: str, case: dict[str, Any]) -> None:
    violations = errors(name, case["data"])

    assert [(v.path, v.validator) for v in violations] == _expected(case)
    if case["valid"]:
        validate(name, case["data"])
    else:
        with pytest.raises(SchemaViolation) as raised:
            validate(name, case["data"])
        assert raised.value.violations == violations


@pytest.mark.parametrize(("name", "case"), CASES)
def test_jsonschema_rs_reaches_the_same_verdict_and_violations(name: str, case: dict[str, Any]) -> None:
    validator = _rust_validator(name)
    found = [
        ("".join(f"/{part}" for part in error.instance_path), error.schema_path[-1])
        for error in validator.iter_errors(case["data"])
    ]

    assert validator.is_valid(case["data"]) is case["valid"]
    assert sorted(found) == sorted(_expected(case))


@pytest.mark.parametrize(("name", "case"), CASES)
def test_models_reach_the_same_verdict(name: str, case: dict[str, Any]) -> None:
    model = MODELS[name]
    encoded = json.dumps(case["data"]).encode()

    if case["valid"]:
        assert isinstance(msgspec.convert(case["data"], model), model)
        assert isinstance(msgspec.json.decode(encoded, type=model), model)
    else:
        with pytest.raises(msgspec.ValidationError):
            msgspec.convert(case["data"], model)
        with pytest.raises(msgspec.ValidationError):
            msgspec.json.decode(encoded, type=model)
