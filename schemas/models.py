"""Typed msgspec views of the schema files, for code that reads or writes identities and payloads.

The JSON Schema files stay the contract; these Structs must agree with them field for field, which
``tests/schemas`` checks by comparing ``msgspec.json.schema`` output with the files. Field names keep
the wire spelling (``vectorProvider``) because renaming would change the contract.
"""

from __future__ import annotations

from typing import Annotated, Any, Final

import msgspec

from schemas import ecma
from schemas.validation import validate

NAME_PATTERN: Final = "^[A-Z]{1}[a-zA-Z0-9_]*$"
"""Collection names: a capital ASCII letter, then ASCII letters, digits and underscores."""


class Identity(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The identity vector that describes a collection inside the vector database.

    Decoding (``msgspec.convert``/``msgspec.json.decode``) checks every constraint. ``__post_init__``
    re-checks the two value rules so an Identity built in code cannot break them either, and so the
    name is matched with ECMA-262 ``$`` semantics, which msgspec's own pattern check does not use.
    """

    collection_id: Annotated[str, msgspec.Meta(description="The UUID of the collection. Relevant to Chonkit.")]
    name: Annotated[
        str,
        msgspec.Meta(
            pattern=NAME_PATTERN,
            min_length=1,
            description=(
                "Collection name. Cannot contain special characters. Must begin with a capital ASCII letter"
                " and contain only alphanumeric characters and underscores."
            ),
        ),
    ]
    model: Annotated[str, msgspec.Meta(description="Collection embedding model.")]
    vectorProvider: Annotated[str, msgspec.Meta(description="Vector database provider.")]  # noqa: N815
    embeddingProvider: Annotated[str, msgspec.Meta(description="Embeddings provider.")]  # noqa: N815
    groups: (
        Annotated[
            list[str],
            msgspec.Meta(
                min_length=1,
                description=(
                    "Optional collection groups that indicate which user groups can use it."
                    " If this is not defined, the collection is visible to everyone."
                ),
            ),
        ]
        | msgspec.UnsetType
    ) = msgspec.UNSET

    def __post_init__(self) -> None:
        if not ecma.search(NAME_PATTERN, self.name):
            raise ValueError(f"collection name {self.name!r} does not match {NAME_PATTERN!r}")
        if self.groups is not msgspec.UNSET and not self.groups:
            raise ValueError("groups must hold at least one group, or be left unset to make the collection public")

    def to_dict(self) -> dict[str, Any]:
        """The identity as a JSON-ready dict; ``groups`` is omitted when unset, as the schema expects."""
        as_dict: dict[str, Any] = msgspec.to_builtins(self)
        return as_dict


class TextPayload(msgspec.Struct, frozen=True, kw_only=True):
    """The payload of a vector embedded from text.

    Unknown fields are ignored rather than forbidden: every vector also carries the identity
    properties, and vector adapters may store extras of their own.
    """

    content: Annotated[str, msgspec.Meta(description="The original text of the embedding (vector).")]
    document_id: Annotated[str, msgspec.Meta(description="The UUID of the document. Relevant to Chonkit.")]


class Chunk(Identity, frozen=True, kw_only=True, forbid_unknown_fields=False):
    """The payload of a chunk vector as a writer stores it: its collection's identity properties (checked as an
    Identity's are) and the text payload. Unknown fields are ignored, as in :class:`TextPayload`."""

    content: Annotated[str, msgspec.Meta(description="The original text of the embedding (vector).")]
    document_id: Annotated[str, msgspec.Meta(description="The UUID of the document. Relevant to Chonkit.")]


def parse_identity(obj: object) -> Identity:
    """Turn a decoded JSON value into an :class:`Identity`, reporting every schema violation at once.

    Raises:
        SchemaViolation: ``obj`` breaks the identity schema.
    """
    validate("identity", obj)
    return msgspec.convert(obj, Identity)


def parse_chunk(obj: object) -> Chunk:
    """Turn a decoded JSON value into a :class:`Chunk`, dropping the extra properties it may carry.

    Raises:
        SchemaViolation: ``obj`` breaks the chunk schema.
    """
    validate("chunk", obj)
    return msgspec.convert(obj, Chunk)


def parse_text_payload(obj: object) -> TextPayload:
    """Turn a decoded JSON value into a :class:`TextPayload`, dropping the extra properties it may carry.

    Raises:
        SchemaViolation: ``obj`` breaks the text-payload schema.
    """
    validate("text-payload", obj)
    return msgspec.convert(obj, TextPayload)
