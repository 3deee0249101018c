"""Plain text, CSV and JSON: decoded with :func:`decode_text`, then split into simple blocks."""

from __future__ import annotations

import csv
import io
import re
import textwrap

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
    """The JSON pretty-printed (two-space indent) as one ``code`` block.

    Raises:
        InvalidInput: ``document_corrupt`` for invalid (or absurdly deeply nested) JSON.
    """
    text = decode_text(data)
    try:
        msgspec.json.decode(text)
    except (msgspec.DecodeError, RecursionError) as exc:
        raise InvalidInput(f"The JSON is invalid: {exc}.", code="document_corrupt") from exc
    builder.add(msgspec.json.format(text, indent=2), "code")


def _dialect(text: str) -> type[csv.Dialect] | csv.Dialect:
    sample = text[:CSV_SNIFF_CHARS]
    if len(text) > CSV_SNIFF_CHARS and "\n" in sample:
        sample = sample[: sample.rindex("\n")]  # whole lines only
    try:
        return csv.Sniffer().sniff(sample, delimiters=CSV_DELIMITERS)
    except csv.Error:
        return csv.excel
