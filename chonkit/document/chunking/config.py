"""How a collection cuts documents into chunks: a tagged union saved with the collection as JSON.

``strategy`` picks the variant (``fixed``, ``structure``, ``parent_child``). Sizes are in ``unit``:
``tokens`` of the collection's embedding model (what its context limit is measured in) or
``characters``. :func:`validate_chunk_config` is the one gate between a client's JSON and a stored
config, so every error names the offending field and carries a stable code.
"""

from __future__ import annotations

import re
from typing import Literal

import msgspec

from common.errors import InvalidInput

Unit = Literal["tokens", "characters"]

MAX_CHUNK_SIZE = 100_000
"""Larger sizes are a typo (or a units mix-up): no embedding model reads a chunk that long."""


class _Strategy(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, tag_field="strategy"):
    unit: Unit = "tokens"
    """What sizes count: the embedding model's tokens, or characters."""


class FixedChunking(_Strategy, frozen=True, kw_only=True, forbid_unknown_fields=True, tag="fixed"):
    """Windows of ``size`` units, consecutive windows sharing ``overlap`` units.

    With ``snap_to_sentences`` a window never ends inside a sentence unless that sentence alone is
    larger than ``size`` (then it is cut between words, and a word larger than ``size`` between
    characters or tokens), and the overlap is whole sentences.

    With ``repeat_headings`` (a contextual chunk header) each chunk's embedded and keyword-indexed text starts
    with the headings above its first line, one a line, as the document shows them: a chunk that continues a
    section ("The default is eight megabytes.") is found by the section's name (``temp_buffers (integer)``) in
    both retrieval legs; a chunk that starts inside a table below its first row repeats that row (the columns'
    names) after them. ``size`` includes them; outer headings are left out when they would fill more than half
    of it. With ``snap_to_headings`` a window that would run past a heading ends before it instead, when at least
    half of it comes before, and the next one starts at the heading (with no overlap): a section's opening lines
    are not left at the end of a chunk that belongs to the section before. A document without headings is chunked
    exactly as without either option.
    """

    size: int = 250
    overlap: int = 25
    snap_to_sentences: bool = True
    repeat_headings: bool = True
    snap_to_headings: bool = True


class StructureChunking(_Strategy, frozen=True, kw_only=True, forbid_unknown_fields=True, tag="structure"):
    """One chunk per heading section, its heading path repeated at the top of the embedded text.

    Sections larger than ``size`` are sub-split like ``fixed`` with sentence snapping; ``size``
    includes the repeated heading path, since that is what the model reads (a path longer than half
    of ``size`` loses its outermost headings). Headings with no text of their own yield no chunk:
    they live on in the paths of the sections below them.
    """

    size: int = 250
    overlap: int = 25


class ParentChildChunking(_Strategy, frozen=True, kw_only=True, forbid_unknown_fields=True, tag="parent_child"):
    """Small children are embedded for precise matches; their larger parent is what the agent reads.

    Parents (``parent_size``, no overlap) and children (``child_size``, sharing ``child_overlap``)
    both snap to sentences; children are cut inside one parent, so each has exactly one.
    """

    parent_size: int = 1000
    child_size: int = 250
    child_overlap: int = 25


ChunkConfig = FixedChunking | StructureChunking | ParentChildChunking
_VARIANTS = (FixedChunking, StructureChunking, ParentChildChunking)

_SIZE_FIELDS = frozenset({"size", "parent_size", "child_size"})
_OVERLAP_FIELDS = frozenset({"overlap", "child_overlap"})
_UNKNOWN_FIELD = re.compile(r"unknown field `([^`]*)`")
_MISSING_FIELD = re.compile(r"missing required field `([^`]*)`")
_AT_PATH = re.compile(r"at `\$\.?([^`]*)`")


def default_chunk_config() -> ChunkConfig:
    """The config of a collection created without one.

    250 tokens fit the smallest common embedding window (256 for all-MiniLM-L6-v2, special tokens
    included); 10 % overlap keeps a fact that straddles a cut findable from either side; repeated headings
    let a chunk that continues a section be found by its name (docs/benchmarks.md, "Contextual chunk headers").
    """
    return FixedChunking()


def validate_chunk_config(obj: object) -> ChunkConfig:
    """Turn decoded JSON (or an already built config) into a checked :data:`ChunkConfig`.

    Raises:
        InvalidInput: ``unknown_field``, ``invalid_chunk_size``, ``invalid_overlap`` or
            ``invalid_chunk_config``, with the field in the message and in ``extra["field"]``.
    """
    if isinstance(obj, _VARIANTS):
        config: ChunkConfig = obj
    else:
        try:
            config = msgspec.convert(obj, ChunkConfig)
        except msgspec.ValidationError as exc:
            raise _translate(exc) from exc
    match config:
        case FixedChunking() | StructureChunking():
            _check_size("size", config.size)
            _check_overlap("overlap", config.overlap, "size", config.size)
        case ParentChildChunking():
            _check_size("parent_size", config.parent_size)
            _check_size("child_size", config.child_size)
            if config.child_size >= config.parent_size:
                raise _invalid(
                    "invalid_chunk_config",
                    "child_size",
                    f"child_size ({config.child_size}) must be smaller than parent_size ({config.parent_size})",
                )
            _check_overlap("child_overlap", config.child_overlap, "child_size", config.child_size)
    return config


def _check_size(field: str, value: int) -> None:
    if not 0 < value <= MAX_CHUNK_SIZE:
        raise _invalid("invalid_chunk_size", field, f"{field} must be between 1 and {MAX_CHUNK_SIZE} (got {value})")


def _check_overlap(field: str, value: int, size_field: str, size: int) -> None:
    if not 0 <= value < size:
        raise _invalid(
            "invalid_overlap", field, f"{field} must be at least 0 and below {size_field} ({size}), got {value}"
        )


def _translate(exc: msgspec.ValidationError) -> InvalidInput:
    message = str(exc)
    if unknown := _UNKNOWN_FIELD.search(message):
        return _invalid("unknown_field", unknown.group(1), f"Unknown chunk config field `{unknown.group(1)}`")
    if missing := _MISSING_FIELD.search(message):
        field = missing.group(1)
    else:
        path = _AT_PATH.search(message)
        if path is None:
            return _invalid("invalid_chunk_config", "", f"Invalid chunk config: {message}")
        field = path.group(1).rsplit(".", 1)[-1]
    if field in _SIZE_FIELDS:
        code = "invalid_chunk_size"
    elif field in _OVERLAP_FIELDS:
        code = "invalid_overlap"
    else:
        code = "invalid_chunk_config"
    return _invalid(code, field, f"Invalid chunk config field `{field}`: {message}")


def _invalid(code: str, field: str, detail: str) -> InvalidInput:
    return InvalidInput(detail, code=code, extra={"field": field})
