"""Validate JSON values against the published schemas and report every violation, not just the first.

Validation follows JSON Schema 2020-12 through ``jsonschema``, with one correction: ``pattern`` uses
ECMA-262 semantics for ``$`` (see :mod:`schemas.ecma`), so that we reject exactly what other
2020-12 implementations reject.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator
from typing import Any, cast

import msgspec
from jsonschema import Draft202012Validator, ValidationError, validators
from jsonschema.protocols import Validator

from schemas import ecma
from schemas.loader import parsed


class Violation(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One way in which a value breaks a schema.

    Attributes:
        path: JSON pointer (RFC 6901) to the offending value inside the validated object; ``""`` is the
            object itself, which is where missing and unexpected properties are reported.
        message: Human-readable explanation, as worded by the validator.
        validator: The JSON Schema keyword that failed (``required``, ``pattern``, ``minItems`` ...),
            for callers that branch on the kind of problem.
    """

    path: str
    message: str
    validator: str


class SchemaViolation(ValueError):
    """Raised when a value does not satisfy a schema; carries every violation, sorted by path.

    A plain ``ValueError`` because this package depends on nothing else in the repository; services
    translate it into their own error type at their boundary.
    """

    def __init__(self, schema_name: str, violations: list[Violation]) -> None:
        self.schema_name = schema_name
        self.violations = violations
        listed = "; ".join(f"{v.path or '/'}: {v.message}" for v in violations)
        super().__init__(f"{len(violations)} violation(s) of the {schema_name!r} schema: {listed}")


def errors(name: str, obj: object) -> list[Violation]:
    """Every violation of schema ``name`` by ``obj`` (an already decoded JSON value); empty when valid.

    The order is deterministic: by path (array indexes numerically), then keyword, then message.

    Raises:
        UnknownSchema: ``name`` is not one of :data:`schemas.SCHEMA_NAMES`.
    """
    # The stubs want a JSON-typed value; anything else is simply reported as a violation.
    found = sorted(_validator(name).iter_errors(cast("Any", obj)), key=_sort_key)
    return [
        Violation(path=_json_pointer(error.absolute_path), message=error.message, validator=str(error.validator))
        for error in found
    ]


def validate(name: str, obj: object) -> None:
    """Check ``obj`` against schema ``name``.

    Raises:
        SchemaViolation: ``obj`` breaks the schema; ``.violations`` lists every problem.
        UnknownSchema: ``name`` is not one of :data:`schemas.SCHEMA_NAMES`.
    """
    violations = errors(name, obj)
    if violations:
        raise SchemaViolation(name, violations)


def _ecma_pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if validator.is_type(instance, "string") and not ecma.search(pattern, instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


# Untyped in the jsonschema stubs; ``create`` would work too but must repeat every Draft 2020-12 default.
_RaguValidator = validators.extend(Draft202012Validator, {"pattern": _ecma_pattern})  # type: ignore[no-untyped-call]


@functools.cache
def _validator(name: str) -> Validator:
    validator: Validator = _RaguValidator(parsed(name), format_checker=Draft202012Validator.FORMAT_CHECKER)
    return validator


def _sort_key(error: ValidationError) -> tuple[tuple[tuple[int, int, str], ...], str, str]:
    path = tuple((0, part, "") if isinstance(part, int) else (1, 0, part) for part in error.absolute_path)
    return path, str(error.validator), error.message


def _json_pointer(parts: Iterable[str | int]) -> str:
    return "".join("/" + str(part).replace("~", "~0").replace("/", "~1") for part in parts)
