"""Plain text, CSV and JSON: decoded with :func:`decode_text`, then split into simple blocks."""

from __future__ import annotations

import csv
import io
import re
import textwrap
from typing import TypeGuard

import msgspec

from chonkit.document.parsing.blocks import BlockBuilder
from chonkit.document.parsing.textcodec import decode_text
from common.errors import InvalidInput

_BLANK_LINES = re.compile(r"\n(?:[^\S\n]*\n)+")
CSV_SNIFF_CHARS = 8192
"""``csv.Sniffer`` backtracks heavily; a few KB are plenty to see the delimiter."""
CSV_DELIMITERS = ",;\t|"


def parse_text(data: bytes, builder: BlockBuilder) -> None:
    """One ``paragraph`` block per run of lines between blank lines.

    The indentation the lines share goes, the rest stays: the block's trimming would otherwise dedent an indented
    block's first line alone and leave the lines after it (code, a shell session) out of line with it.
    """
    for paragraph in _BLANK_LINES.split(decode_text(data)):
        builder.add(textwrap.dedent(paragraph), "paragraph")


def parse_csv(data: bytes, builder: BlockBuilder) -> None:
    """The whole CSV as one ``table`` block: a line per row, cells joined by `` | ``.

    Raises:
        InvalidInput: ``document_corrupt`` when the csv module rejects a row (e.g. a huge field).
    """
    text = decode_text(data)
    rows: list[str] = []
    try:
        for row in csv.reader(io.StringIO(text, newline=""), _dialect(text)):
            cells = [" ".join(cell.split()) for cell in row]
            if any(cells):
                rows.append(" | ".join(cells))
    except csv.Error as exc:
        raise InvalidInput(f"The CSV could not be read: {exc}.", code="document_corrupt") from exc
    builder.add("\n".join(rows), "table")


def parse_json(data: bytes, builder: BlockBuilder) -> None:
    """Records (an array of flat objects, alone or as an object's only member, whose key heads it) as one
    ``table`` block like a CSV's, a row per record under a row of their keys; any other JSON pretty-printed
    (two-space indent) as one ``code`` block.

    Raises:
        InvalidInput: ``document_corrupt`` for invalid (or absurdly deeply nested) JSON.
    """
    text = decode_text(data)
    try:
        value = msgspec.json.decode(text)
    except (msgspec.DecodeError, RecursionError) as exc:
        raise InvalidInput(f"The JSON is invalid: {exc}.", code="document_corrupt") from exc
    name, records = next(iter(value.items())) if isinstance(value, dict) and len(value) == 1 else (None, value)
    if not _are_records(records):
        builder.add(msgspec.json.format(text, indent=2), "code")
        return
    if name:
        builder.add_heading(name, 1)
    keys = list(dict.fromkeys(key for record in records for key in record))
    rows = [[_cell(record.get(key)) for key in keys] for record in records]
    builder.add("\n".join(" | ".join(row) for row in [keys, *rows]), "table")


def _are_records(value: object) -> TypeGuard[list[dict[str, object]]]:
    """At least two objects, every member a string, number, boolean or null."""
    return (
        isinstance(value, list)
        and len(value) > 1
        and all(isinstance(item, dict) and all(isinstance(v, _SCALARS) for v in item.values()) for item in value)
    )


_SCALARS = (str, int, float, bool, type(None))


def _cell(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return " ".join(str(value).split())


def _dialect(text: str) -> type[csv.Dialect] | csv.Dialect:
    sample = text[:CSV_SNIFF_CHARS]
    if len(text) > CSV_SNIFF_CHARS and "\n" in sample:
        sample = sample[: sample.rindex("\n")]  # whole lines only
    try:
        return csv.Sniffer().sniff(sample, delimiters=CSV_DELIMITERS)
    except csv.Error:
        return csv.excel
