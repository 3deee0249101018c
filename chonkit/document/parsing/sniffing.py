"""Decide what an upload is from its extension, then check that its bytes agree.

The extension says what the user claims; the content must not contradict it, so that a renamed
binary never reaches a text parser and a text file never reaches pymupdf. Only the extension of the
filename is used: it is user-controlled and never treated as a path.
"""

from __future__ import annotations

import codecs
import re
from pathlib import PurePosixPath

from chonkit.document.parsing.doctype import EXTENSIONS, DocumentType
from chonkit.document.parsing.docx_archive import ZIP_MAGIC, check_zip_bomb, is_word_document, read_zip_directory
from chonkit.document.parsing.textcodec import DETECTION_SAMPLE_BYTES, guess_encoding, is_mostly_utf8, unicode_encoding
from common.errors import InvalidInput, UnsupportedMediaType

PDF_MAGIC = b"%PDF-"
PDF_HEADER_WINDOW = 1024
"""Readers accept a PDF header anywhere in the first KiB (some producers prepend junk)."""
OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
"""Legacy Office files, and also password-protected DOCX (an encrypted package inside OLE)."""
BINARY_MAGICS = (PDF_MAGIC, ZIP_MAGIC, OLE_MAGIC, b"\x89PNG", b"\xff\xd8\xff", b"GIF8", b"\x1f\x8b")
IMAGE_MAGICS: dict[DocumentType, tuple[bytes, ...]] = {
    DocumentType.PNG: (b"\x89PNG\r\n\x1a\n",),
    DocumentType.JPEG: (b"\xff\xd8\xff",),
    DocumentType.TIFF: (b"II*\x00", b"MM\x00*"),
}
MAX_CONTROL_CHAR_RATIO = 0.01
_CONTROL_CHARS = re.compile(r"[\x00-\x08\x0b\x0e-\x1f\x7f]")


def sniff(filename: str, data: bytes) -> DocumentType:
    """The :class:`DocumentType` of an upload named ``filename`` with content ``data``.

    Raises:
        UnsupportedMediaType: ``unsupported_type`` for an extension we do not parse, ``type_mismatch``
            when the content is not what the extension claims.
        InvalidInput: ``empty_file``; for a DOCX also ``document_corrupt``, ``document_encrypted`` or
            ``document_zip_bomb``, which the zip directory already tells.
    """
    doc_type = type_from_filename(filename)
    if not data:
        raise InvalidInput("The file is empty.", code="empty_file")
    if doc_type is DocumentType.PDF:
        if PDF_MAGIC not in data[:PDF_HEADER_WINDOW]:
            raise _mismatch(doc_type, "it has no PDF header")
    elif doc_type is DocumentType.DOCX:
        _check_docx(data)
    elif doc_type.is_image:
        if not data.startswith(IMAGE_MAGICS[doc_type]):
            raise _mismatch(doc_type, f"it is not a {doc_type.value.upper()} image")
    elif not looks_like_text(data):
        raise _mismatch(doc_type, "it is binary, not text")
    return doc_type


def type_from_filename(filename: str) -> DocumentType:
    """The type named by the extension of ``filename`` (case-insensitive)."""
    suffix = PurePosixPath(filename.strip().replace("\\", "/")).suffix.lower()
    try:
        return EXTENSIONS[suffix]
    except KeyError:
        supported = ", ".join(sorted(EXTENSIONS))
        raise UnsupportedMediaType(
            f"Files of type {suffix or '(no extension)'!r} are not supported; use one of {supported}.",
            code="unsupported_type",
        ) from None


def looks_like_text(data: bytes) -> bool:
    """Whether ``data`` decodes to text with hardly any control characters."""
    sample = data[:DETECTION_SAMPLE_BYTES]
    encoding = unicode_encoding(sample)
    if encoding is None:
        if b"\x00" in data or data.startswith(BINARY_MAGICS):
            return False
        encoding = _sample_encoding(sample)
        if encoding is None:
            return False
    # Incremental, so a character cut in half at the end of the sample is not an error.
    text = codecs.getincrementaldecoder(encoding)(errors="replace").decode(sample)
    return len(_CONTROL_CHARS.findall(text)) <= MAX_CONTROL_CHAR_RATIO * len(text)


def _sample_encoding(sample: bytes) -> str | None:
    try:
        codecs.getincrementaldecoder("utf-8")().decode(sample)
    except UnicodeDecodeError:
        return "utf-8" if is_mostly_utf8(sample) else guess_encoding(sample)
    return "utf-8"


def _check_docx(data: bytes) -> None:
    if data.startswith(OLE_MAGIC):
        if "EncryptionInfo".encode("utf-16-le") in data:
            raise InvalidInput("The document is password-protected.", code="document_encrypted")
        raise _mismatch(DocumentType.DOCX, "it is a legacy .doc (OLE) file, not DOCX")
    if not data.startswith(ZIP_MAGIC):
        raise _mismatch(DocumentType.DOCX, "it is not a zip archive")
    entries = read_zip_directory(data)
    if not is_word_document(entries):
        raise _mismatch(DocumentType.DOCX, "the zip archive is not a Word document")
    check_zip_bomb(entries)


def _mismatch(doc_type: DocumentType, reason: str) -> UnsupportedMediaType:
    return UnsupportedMediaType(
        f"The file's content does not match its extension ({doc_type.value}): {reason}.",
        code="type_mismatch",
        extra={"claimed_type": doc_type.value},
    )
