"""The schema files themselves, read from the installed package so that code and contract ship together."""

from __future__ import annotations

import copy
import functools
import json
from importlib import resources
from typing import Any, Final

SCHEMA_NAMES: Final = ("chunk", "identity", "text-payload")
"""Every published schema, sorted; ``<name>.schema.json`` is its file and the last segment of its ``$id``.
``identity`` and ``text-payload`` are the seed's, unchanged; ``chunk`` restates both for a whole chunk."""

MEDIA_TYPE: Final = "application/schema+json"
"""The media type to serve the files with (JSON Schema 2020-12, section 14)."""


class UnknownSchema(ValueError):
    """Raised for a schema name that is not in :data:`SCHEMA_NAMES`; the message lists the known ones."""

    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(f"unknown schema {name!r}; known schemas: {', '.join(SCHEMA_NAMES)}")


def schema_bytes(name: str) -> bytes:
    """The schema file exactly as published, for serving over HTTP without re-encoding.

    Raises:
        UnknownSchema: ``name`` is not one of :data:`SCHEMA_NAMES`.
    """
    return _raw(name)


def load(name: str) -> dict[str, Any]:
    """The parsed schema file.

    The file is read and parsed once; each call returns a fresh copy so that a caller who edits the
    result cannot change what the validators (which share the cached parse) enforce.

    Raises:
        UnknownSchema: ``name`` is not one of :data:`SCHEMA_NAMES`.
    """
    return copy.deepcopy(parsed(name))


@functools.cache
def parsed(name: str) -> dict[str, Any]:
    """The cached parse shared by the validators. Callers outside this package must not mutate it."""
    schema: dict[str, Any] = json.loads(_raw(name))
    return schema


@functools.cache
def _raw(name: str) -> bytes:
    if name not in SCHEMA_NAMES:
        raise UnknownSchema(name)
    return resources.files("schemas").joinpath(f"{name}.schema.json").read_bytes()
