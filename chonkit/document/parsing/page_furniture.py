"""Running headers, footers and page numbers: the lines a PDF repeats at the edge of its pages.

A page's text layer reads them as text, so without this they land inside the sentences a chunk quotes ("…the
file. Chapter 3: Getting Started 17 3.2 Requirements…"). They are found as what they are: a line at the
top or bottom of a page whose text, digits aside (``Page 3`` and ``Page 4`` are the same line), comes back at the
same edge of many pages (:data:`REPEAT_SHARE`). A bare page number is the same line on every page where it is the
page's own number plus the same offset (front matter's roman numerals too). A running header that names the current
chapter repeats only over that chapter, so the lines between a page's edge and a repeated line (the header above a
page number) go with it. The page numbers stay known: every block keeps its page.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping

REPEAT_SHARE = 0.3
"""Share of the pages on whose top (or bottom) edge a line must come back to be furniture. Page numbers are on
nearly every page, a book's title on every other one at most, less the pages that open a chapter; a body line that
merely recurs (a table's header, a "Notes" heading) seldom opens or closes even a tenth of them."""
EDGE_LINES = 3
"""Lines (not blank) at each edge of a page that may be furniture: a header, a page number, a rule of text."""
MIN_PAGES = 3
"""The fewest pages a line must come back on, however short the document: two pages that open alike (a table of
contents and the chapter it lists) are a coincidence. A letter or a two-page note is left as it is."""

_DIGITS = re.compile(r"\d+")
_ROMAN = re.compile(r"[ivxl]+")
"""A line of lower-case roman numerals only is a front matter's page number (an index's letters are capitals)."""
_ROMAN_VALUES = {"i": 1, "v": 5, "x": 10, "l": 50}


def strip_furniture(pages: Mapping[int, str]) -> dict[int, str]:
    """``pages`` (number -> text layer) with the running lines at each page's top and bottom removed; as they were
    when that would leave no text at all (a document of look-alike pages)."""
    if len(pages) < MIN_PAGES:
        return dict(pages)
    lines = {number: text.split("\n") for number, text in pages.items()}
    tops: dict[int, list[int]] = {}
    bottoms: dict[int, list[int]] = {}
    for number, page in lines.items():
        filled = [i for i, line in enumerate(page) if line.strip()]
        edge = min(EDGE_LINES, len(filled) // 2)  # a short page's lines are top or bottom, not both
        tops[number], bottoms[number] = filled[:edge], filled[len(filled) - edge :]
    needed = max(MIN_PAGES, math.ceil(REPEAT_SHARE * len(pages)))
    top = _repeated((_keys(lines[n], tops[n], n) for n in pages), needed)
    bottom = _repeated((_keys(lines[n], bottoms[n], n) for n in pages), needed)
    cleaned: dict[int, str] = {}
    for number, page in lines.items():
        start = max((i + 1 for i in tops[number] if _key(page[i], number) in top), default=0)
        end = min((i for i in bottoms[number] if _key(page[i], number) in bottom), default=len(page))
        cleaned[number] = "\n".join(page[start:end]) if (start, end) != (0, len(page)) else pages[number]
    if not any(text.strip() for text in cleaned.values()):
        return dict(pages)
    return cleaned


def _key(line: str, page: int) -> str:
    """What a line is the same as on other pages: its text with digits as ``#``; a page number, its offset from the
    page's own number (page 12 printed as "6"), so that a section's number that happens to open pages is not one."""
    line = " ".join(line.split())
    if line.isdecimal():
        return f"page{int(line) - page:+d}"
    if _ROMAN.fullmatch(line):
        return f"page{_roman(line) - page:+d}"
    return _DIGITS.sub("#", line.casefold())


def _keys(page: list[str], indices: list[int], number: int) -> set[str]:
    return {_key(page[i], number) for i in indices}


def _roman(numeral: str) -> int:
    values = [_ROMAN_VALUES[char] for char in numeral]
    return sum(-value if value < after else value for value, after in zip(values, [*values[1:], 0], strict=True))


def _repeated(keys_per_page: Iterable[set[str]], needed: int) -> set[str]:
    counts: Counter[str] = Counter()
    for keys in keys_per_page:
        counts.update(keys)
    return {key for key, count in counts.items() if count >= needed}
