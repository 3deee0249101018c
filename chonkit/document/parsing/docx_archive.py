"""Look inside a DOCX's zip directory before anything decompresses it.

A DOCX is a zip; a zip bomb (a few KB that inflate to gigabytes) would exhaust memory inside
python-docx. The central directory lists every entry's sizes, so we can refuse such a file after
reading only its directory. Python's ``zipfile`` stops reading an entry at its declared size, so a
directory that lies about sizes cannot make the later parse inflate more than we checked here.
"""

from __future__ import annotations

import io
import zipfile

from common.errors import InvalidInput

ZIP_MAGIC = b"PK\x03\x04"
REQUIRED_PARTS = ("[Content_Types].xml", "word/document.xml")
MAX_ENTRIES = 10_000
MAX_UNCOMPRESSED_BYTES = 200 * 1024 * 1024
MAX_COMPRESSION_RATIO = 100
RATIO_CHECK_FLOOR = 1024 * 1024
"""Entries smaller than this are never a threat, and tiny repetitive XML parts compress very well."""


def read_zip_directory(data: bytes) -> list[zipfile.ZipInfo]:
    """The entries of the zip in ``data``; a broken zip is ``document_corrupt``."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            return archive.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, EOFError) as exc:
        raise InvalidInput(f"The file is not a readable zip archive: {exc}", code="document_corrupt") from exc


def is_word_document(entries: list[zipfile.ZipInfo]) -> bool:
    names = {entry.filename for entry in entries}
    return all(part in names for part in REQUIRED_PARTS)


def check_zip_bomb(
    entries: list[zipfile.ZipInfo],
    *,
    max_entries: int = MAX_ENTRIES,
    max_uncompressed_bytes: int = MAX_UNCOMPRESSED_BYTES,
    max_ratio: int = MAX_COMPRESSION_RATIO,
) -> None:
    """Raise ``document_zip_bomb`` if unpacking ``entries`` would be unreasonably large."""
    if len(entries) > max_entries:
        raise _bomb(f"it has {len(entries)} entries (limit {max_entries})")
    total = sum(entry.file_size for entry in entries)
    if total > max_uncompressed_bytes:
        raise _bomb(f"it unpacks to {total} bytes (limit {max_uncompressed_bytes})")
    for entry in entries:
        if entry.file_size > RATIO_CHECK_FLOOR and entry.file_size > entry.compress_size * max_ratio:
            raise _bomb(f"{entry.filename!r} is compressed more than {max_ratio}:1")


def _bomb(reason: str) -> InvalidInput:
    return InvalidInput(f"The document was rejected as a zip bomb: {reason}.", code="document_zip_bomb")
