"""Turn the bytes of a text upload into ``str`` without ever failing on an unknown encoding.

UTF-8 is tried first because it is both the most common encoding and self-validating. A file that is
mostly valid UTF-8 with a few broken bytes stays UTF-8 (with replacement characters); otherwise
``charset-normalizer`` guesses a legacy code page.
"""

from __future__ import annotations

import codecs
import re

import charset_normalizer

_BOMS: tuple[tuple[bytes, str], ...] = (
    # UTF-32 first: its little-endian BOM starts with UTF-16's.
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)
_ASCII_BYTES = bytes(range(128))
_WESTERN_SINGLE_BYTE = frozenset({"cp1252", "latin_1", "iso8859_15"})
_NEWLINES = re.compile(r"\r\n?")
DETECTION_SAMPLE_BYTES = 64 * 1024
"""Detection decodes its input once per candidate encoding; a sample keeps big files fast and is plenty."""
MAX_LOW_ZEROS = 0.01
"""A zero low byte is a character such as U+0100 or U+2000; in real UTF-16 text they are rare."""


def bom_encoding(data: bytes) -> str | None:
    """The encoding announced by a byte-order mark at the start of ``data``, if any."""
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            return encoding
    return None


def unicode_encoding(data: bytes) -> str | None:
    """The Unicode encoding that a byte-order mark, or for UTF-16 the zero bytes, show ``data`` to be in."""
    return bom_encoding(data) or utf16_without_bom(data[:DETECTION_SAMPLE_BYTES])


def utf16_without_bom(sample: bytes) -> str | None:
    """``utf-16-le`` or ``utf-16-be`` for UTF-16 text without a byte-order mark (Windows tools write such files).

    Text in Latin script is mostly ASCII, whose UTF-16 code units have a zero high byte: at least every other
    pair of bytes has a zero on the same side, and the other side is practically never zero. Binary data has
    zeros on both sides; UTF-8 and legacy encodings have none.
    """
    pairs = len(sample) // 2
    if pairs < 2:
        return None
    even_zeros, odd_zeros = sample[0 : 2 * pairs : 2].count(0), sample[1 : 2 * pairs : 2].count(0)
    if odd_zeros * 2 >= pairs and even_zeros <= pairs * MAX_LOW_ZEROS:
        return "utf-16-le"
    if even_zeros * 2 >= pairs and odd_zeros <= pairs * MAX_LOW_ZEROS:
        return "utf-16-be"
    return None


def decode_text(data: bytes) -> str:
    """Decode ``data`` and normalise line endings to ``\\n``; never raises on bad bytes."""
    encoding = unicode_encoding(data)
    if encoding is not None:
        text = data.decode(encoding, errors="replace")
    else:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            text = _decode_unknown(data, first_error=exc.start)
    return _NEWLINES.sub("\n", text) if "\r" in text else text


def is_mostly_utf8(data: bytes) -> bool:
    """Whether ``data`` has more valid multi-byte UTF-8 characters than broken byte sequences."""
    lossy = data.decode("utf-8", errors="replace")
    broken = lossy.count("\ufffd")
    ascii_bytes = len(data) - len(data.translate(None, _ASCII_BYTES))
    multibyte_chars = len(lossy) - ascii_bytes - broken
    return multibyte_chars > broken


def guess_encoding(data: bytes, *, start: int = 0) -> str | None:
    """A legacy encoding that decodes ``data`` to plausible text, or ``None`` for binary data.

    Only a sample from ``start`` on is examined; callers start it near the first non-UTF-8 byte, since
    a sample of pure ASCII would say nothing about the code page.

    Statistics cannot tell single-byte Latin code pages apart on short texts, so when cp1252 (what
    Windows and most files labelled latin-1 really use) is a plausible candidate it wins.
    """
    matches = charset_normalizer.from_bytes(data[start : start + DETECTION_SAMPLE_BYTES])
    best = matches.best()
    if best is None:
        return None
    if any(match.encoding in _WESTERN_SINGLE_BYTE for match in matches):
        return "cp1252"
    return best.encoding


def _decode_unknown(data: bytes, *, first_error: int) -> str:
    if not is_mostly_utf8(data):
        encoding = guess_encoding(data, start=max(0, first_error - DETECTION_SAMPLE_BYTES // 2))
        if encoding is not None:
            return data.decode(encoding, errors="replace")
    return data.decode("utf-8", errors="replace")
