"""The published contract shared by every Ragu application: JSON Schema files plus a small validator.

``identity.schema.json`` describes the identity vector that each collection carries;
``text-payload.schema.json`` the payload of each text vector. Typed msgspec models live in
:mod:`schemas.models`, the ``ragu schemas`` command in :mod:`schemas.cli`. This package imports
nothing else from the repository so that it can be published and used on its own.

Errors (both ``ValueError``)::

    SchemaViolation   a value breaks a schema; ``.violations`` lists every problem
    UnknownSchema     a schema name that is not in SCHEMA_NAMES
"""

from schemas.loader import MEDIA_TYPE, SCHEMA_NAMES, UnknownSchema, load, schema_bytes
from schemas.validation import SchemaViolation, Violation, errors, validate

__all__ = [
    "MEDIA_TYPE",
    "SCHEMA_NAMES",
    "SchemaViolation",
    "UnknownSchema",
    "Violation",
    "errors",
    "load",
    "schema_bytes",
    "validate",
]
