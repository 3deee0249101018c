"""DOCX body text in reading order: headings (by style), paragraphs, lists and tables, via python-docx."""

from __future__ import annotations

import io
import re
import zipfile
from collections.abc import Iterable

import docx
from docx.opc.exceptions import OpcError
from docx.styles.style import CharacterStyle
from docx.table import Table
from docx.text.paragraph import Paragraph
from lxml import etree  # type: ignore[import-untyped]  # lxml ships no type information

from chonkit.document.parsing.blocks import BlockBuilder
from chonkit.document.parsing.docx_archive import check_zip_bomb, is_word_document, read_zip_directory
from common.errors import InvalidInput

_HEADING_STYLE = re.compile(r"Heading ([1-9])")
_MAX_STYLE_DEPTH = 10
"""Styles inherit from base styles; a malicious file could make that chain a cycle."""
# lxml's XMLSyntaxError is a SyntaxError; python-docx raises KeyError/ValueError on broken parts, and
# AttributeError when a part's root element is not the one it expects (a [Content_Types].xml without its namespace).
_BROKEN_DOCX = (OpcError, KeyError, ValueError, SyntaxError, AttributeError, zipfile.BadZipFile)
_INTERNAL_ENTITIES = etree.XMLParser(resolve_entities="internal", no_network=True)
"""Expands entities a part declares itself (libxml2 refuses exponential ones); external ones stay undefined."""


def parse_docx(data: bytes, builder: BlockBuilder) -> None:
    """Add the document body's blocks; the zip directory is vetted before anything is inflated.

    Raises:
        InvalidInput: ``document_zip_bomb`` or ``document_corrupt``.
    """
    entries = read_zip_directory(data)
    if not is_word_document(entries):
        raise _corrupt("word/document.xml is missing")
    check_zip_bomb(entries)
    try:
        document = docx.Document(io.BytesIO(_with_entities_expanded(data, entries)))
        _add_body(document.iter_inner_content(), builder)
    except _BROKEN_DOCX as exc:
        raise _corrupt(str(exc)) from exc


def _with_entities_expanded(data: bytes, entries: list[zipfile.ZipInfo]) -> bytes:
    """``data`` with the entities its XML parts declare in a DOCTYPE replaced by their text.

    python-docx parses with entities unresolved (a defence against XXE), and keeps a declared entity as a node
    that ends the text of its ``w:t``: everything after the reference was lost. Word never writes a DOCTYPE;
    some other producers do.
    """
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        declaring = {
            entry.filename: part
            for entry in entries
            if entry.filename.endswith((".xml", ".rels")) and b"<!DOCTYPE" in (part := archive.read(entry))
        }
        if not declaring:
            return data
        rebuilt = io.BytesIO()
        with zipfile.ZipFile(rebuilt, "w") as copy:
            for entry in entries:
                declared = declaring.get(entry.filename)
                copy.writestr(entry.filename, archive.read(entry) if declared is None else _expand_entities(declared))
    return rebuilt.getvalue()


def _expand_entities(part: bytes) -> bytes:
    return bytes(etree.tostring(etree.fromstring(part, _INTERNAL_ENTITIES), encoding="UTF-8"))


def _add_body(content: Iterable[Paragraph | Table], builder: BlockBuilder) -> None:
    """Consecutive list paragraphs become one ``list`` block, as a reader sees one list."""
    list_items: list[str] = []
    for item in content:
        style = item.style if isinstance(item, Paragraph) else None
        if isinstance(item, Paragraph) and style is not None and (style.name or "").startswith("List"):
            list_items.append(item.text)
            continue
        if list_items:
            builder.add("\n".join(list_items), "list")
            list_items = []
        if isinstance(item, Table):
            builder.add(_table_text(item), "table")
        elif (level := _heading_level(style)) is not None:
            builder.add_heading(item.text, level)
        else:
            builder.add(item.text, "paragraph")
    if list_items:
        builder.add("\n".join(list_items), "list")


def _heading_level(style: CharacterStyle | None) -> int | None:
    """1-9 for a paragraph style ``Heading N``, or one based (through any chain) on it."""
    for _ in range(_MAX_STYLE_DEPTH):
        if style is None:
            return None
        if match := _HEADING_STYLE.fullmatch(style.name or ""):
            return int(match[1])
        style = style.base_style
    return None


def _table_text(table: Table) -> str:
    """One line per row, cells joined by `` | ``; a merged cell is listed once per row."""
    rows = []
    for row in table.rows:
        cells: list[str] = []
        previous = None
        for cell in row.cells:
            if cell is not previous:  # python-docx repeats the same object for a horizontal merge
                cells.append(" ".join(cell.text.split()))
            previous = cell
        if any(cells):
            rows.append(" | ".join(cells))
    return "\n".join(rows)


def _corrupt(reason: str) -> InvalidInput:
    return InvalidInput(f"The DOCX could not be read: {reason}.", code="document_corrupt")
