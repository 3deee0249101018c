"""A PDF page's text, as MuPDF's plain text output would give it, repaired where that output misreads the page.

TeX and others draw an underscore outside a typewriter font as a short rule, not a glyph: MuPDF reads it as a gap
(a space, or a line break where the rule splits the line), so ``read_file`` came out as ``read file``. The text page
is therefore built with the vectors collected, and a short rule at the baseline between two words becomes ``_``.
A spacing accent drawn over its letter is put back on it, and a word hyphenated at a line's end is joined.
MuPDF also splits a line at a wide gap, so a justified line could come out a word per line: lines on one
baseline, close after each other, are joined. A page with no such rule and no line beside another keeps MuPDF's
own text: the geometry (the page's dict, about twice as slow) is read only for the pages that need it.
"""

from __future__ import annotations

import bisect
import re
import statistics
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import pymupdf

_FLAGS = pymupdf.TEXTFLAGS_TEXT | pymupdf.TEXT_COLLECT_VECTORS
_TEXT_BLOCK, _VECTOR_BLOCK = 0, 3
_MAX_GAP = 1.25
"""Ems: a wider gap between two lines on one baseline is a column's or a table cell's, not a word space stretched
to justify the line or a sentence's wider space (up to about one em), which MuPDF also splits lines at."""
_SECTION_LABEL = re.compile(r"(?:\d+|[A-Z])(?:\.\d+)*\.?")
_CROWDED = 0.75
"""A block whose height per line is under this share of the page's usual one has lines side by side."""
_RULE_MAX_HEIGHT = 2.0
_RULE_MAX_WIDTH = 20.0
"""Points, for the cheap first look at a page's vectors; a rule is then checked against its line's font size."""


@dataclass(frozen=True)
class _Line:
    x0: float
    y0: float
    x1: float
    y1: float
    size: float
    baseline: float
    text: str
    horizontal: bool


def page_text(page: pymupdf.Page) -> str:
    """The page's text, a line per line and each followed by a newline, like ``page.get_text()``."""
    textpage = page.get_textpage(flags=_FLAGS)
    blocks = textpage.extractBLOCKS()  # type: ignore[no-untyped-call]  # pymupdf is untyped
    if not _needs_layout(blocks):
        return dehyphenate(combine_accents("".join(block[4] for block in blocks if block[6] == _TEXT_BLOCK)))
    return dehyphenate(combine_accents(_layout_text(textpage.extractDICT())))


def combine_accents(text: str) -> str:
    """Put a spacing accent back on the letter it was drawn over, then compose (NFC): ``E\\u00b4en`` is ``Eén``.

    TeX and others draw an accent as a glyph of its own before its letter, which MuPDF reads as a spacing accent
    (U+00B4, U+00A8, U+02C6...) followed by the letter. Only the non-ASCII spacing accents count: the ASCII
    circumflex, tilde and grave are code.
    """
    if _SPACING_ACCENTS.keys().isdisjoint(text):
        return text

    def combine(match: re.Match[str]) -> str:
        accent, letter = match.group(1, 2)
        if letter in _DOTLESS and accent not in _BELOW:
            letter = _DOTLESS[letter]
        return unicodedata.normalize("NFC", letter + _SPACING_ACCENTS[accent])

    return _ACCENT_LETTER.sub(combine, text)


_SPACING_ACCENTS = {
    "\u00b4": "\u0301",  # acute
    "\u02dd": "\u030b",  # double acute
    "\u02cb": "\u0300",  # modifier grave
    "\u00a8": "\u0308",  # diaeresis
    "\u02c6": "\u0302",  # circumflex
    "\u02dc": "\u0303",  # tilde
    "\u00af": "\u0304",  # macron
    "\u02c9": "\u0304",  # modifier macron
    "\u02d8": "\u0306",  # breve
    "\u02d9": "\u0307",  # dot above
    "\u02da": "\u030a",  # ring above
    "\u02c7": "\u030c",  # caron
    "\u00b8": "\u0327",  # cedilla
    "\u02db": "\u0328",  # ogonek
}
_BELOW = frozenset("\u00b8\u02db")
_DOTLESS = {"\u0131": "i", "\u0237": "j"}
"""TeX accents a dotless i or j; with an accent above it is the plain letter that composes."""
_ACCENT_LETTER = re.compile(f"([{''.join(_SPACING_ACCENTS)}])([^\\W\\d_])")


def dehyphenate(text: str) -> str:
    """Join a word hyphenated at a line's end: its second part moves up to the first, the line break stays.

    Only a lower-case letter before the hyphen and one after make a join (``di-``/``agonal``); a soft hyphen always
    does. A compound the page also writes hyphenated within a line keeps its hyphen, as does anything else (``TCP-``
    /``IP``, ``x-``/``2``): a broken word reads better than a wrong one. MuPDF's own ``TEXT_DEHYPHENATE`` joins at
    every hyphen.
    """
    if "-\n" not in text and "\u2010\n" not in text and "\u00ad\n" not in text:
        return text
    compounds = {match.group().casefold() for match in _COMPOUND.finditer(text)}

    def join(match: re.Match[str]) -> str:
        first, hyphen, second, tail, space = match.group(1, 2, 3, 4, 5)
        if hyphen != "\u00ad" and (
            not (first[-1].islower() and second[0].islower()) or f"{first}-{second}".casefold() in compounds
        ):
            return match.group()
        return first + second + tail + ("\n" if space else "")

    return _LINE_END_HYPHEN.sub(join, text)


_LINE_END_HYPHEN = re.compile(r"([^\W\d_]+)([-\u2010\u00ad])\n([^\W\d_]+)(\S*)(?:([ \t]+)|$)", re.MULTILINE)
"""A word, a hyphen ending the line, the word the next line starts with, what sticks to it (punctuation) and the
space after (none at the line's end)."""
_COMPOUND = re.compile(r"[^\W\d_]+[-\u2010][^\W\d_]+")


def _needs_layout(blocks: list[tuple[Any, ...]]) -> bool:
    """Whether the page has a short horizontal rule (a drawn underscore, or a split it caused) or lines MuPDF may
    have split on one baseline: a block with more lines than its height holds, or a block beside the one before."""
    if any(
        block[6] == _VECTOR_BLOCK
        and block[3] - block[1] <= _RULE_MAX_HEIGHT
        and 0 < block[2] - block[0] <= _RULE_MAX_WIDTH
        for block in blocks
    ):
        return True
    texts = [block for block in blocks if block[6] == _TEXT_BLOCK and block[4].count("\n")]
    if not texts:
        return False
    pitch = statistics.median((block[3] - block[1]) / block[4].count("\n") for block in texts)
    previous = None
    for block in texts:
        lines = block[4].count("\n")
        if lines > 1 and (block[3] - block[1]) / lines < _CROWDED * pitch:
            return True
        if previous is not None and _beside(previous[:4], block[:4]):
            return True
        previous = block
    return False


def _beside(left: tuple[float, ...], right: tuple[float, ...]) -> bool:
    """Whether box ``right`` starts to the right of box ``left`` with most of the lower one's height shared."""
    overlap = min(left[3], right[3]) - max(left[1], right[1])
    return overlap >= 0.5 * min(left[3] - left[1], right[3] - right[1]) > 0 and right[0] >= left[2] - 1


def _layout_text(page: dict[str, Any]) -> str:
    rules = _Rules(
        block["bbox"]
        for block in page["blocks"]
        if block["type"] == _VECTOR_BLOCK
        and block["bbox"][3] - block["bbox"][1] <= _RULE_MAX_HEIGHT
        and 0 < block["bbox"][2] - block["bbox"][0] <= _RULE_MAX_WIDTH
    )
    lines = [
        _read_line(line, rules) for block in page["blocks"] if block["type"] == _TEXT_BLOCK for line in block["lines"]
    ]
    out: list[str] = []
    previous: _Line | None = None
    for line in lines:
        joint = _joint(previous, line, rules) if previous is not None else None
        if joint is None or not out:
            out.append(line.text)
        else:
            out[-1] += joint + line.text
        previous = line
    return "".join(text + "\n" for text in out)


def _read_line(line: dict[str, Any], rules: _Rules) -> _Line:
    spans = line["spans"]
    x0, y0, x1, y1 = line["bbox"]
    if not spans:
        return _Line(x0, y0, x1, y1, 0.0, y1, "", horizontal=False)
    main = max(spans, key=lambda span: span["size"])
    size, baseline = float(main["size"]), float(main["origin"][1])
    parts: list[str] = []
    for span in spans:
        text = span["text"]
        if (
            rules
            and text
            and not text.strip()
            and _rule_between(span["bbox"][0], span["bbox"][2], baseline, size, rules)
        ):
            text = "_"
        parts.append(text)
    horizontal = abs(line["dir"][1]) < 0.01 and line["dir"][0] > 0
    return _Line(x0, y0, x1, y1, size, baseline, "".join(parts), horizontal=horizontal)


def _joint(left: _Line, right: _Line, rules: _Rules) -> str | None:
    """What joins two lines MuPDF split that sit on one baseline, the second close after the first (a justified
    line's wide word spaces, a drawn underscore): ``_`` over a rule, else a space unless they touch; ``None``
    keeps them apart."""
    size = max(left.size, right.size)
    if size <= 0 or not left.text or not right.text or not (left.horizontal and right.horizontal):
        return None
    if _SECTION_LABEL.fullmatch(left.text.strip()):
        return None  # a section number set a quad before its title: the outline's titles are matched without it
    gap = right.x0 - left.x1
    if not _beside((left.x0, left.y0, left.x1, left.y1), (right.x0, right.y0, right.x1, right.y1)) or not (
        -0.2 * size <= gap <= _MAX_GAP * size
    ):
        return None
    if _rule_between(left.x1, right.x0, statistics.fmean((left.baseline, right.baseline)), size, rules):
        return "" if left.text.endswith("_") or right.text.startswith("_") else "_"
    if left.text[-1].isspace() or right.text[0].isspace() or gap < 0.1 * size:
        return ""
    return " "


def _rule_between(x0: float, x1: float, baseline: float, size: float, rules: _Rules) -> bool:
    """Whether an underscore-like rule (about a third of an em wide, at the baseline) lies in the gap ``x0..x1``."""
    slack = 0.2 * size
    for _middle_y, rx0, ry0, rx1, ry1 in rules.near(baseline - 0.25 * size, baseline + 0.3 * size):
        middle_x = (rx0 + rx1) / 2
        if ry1 - ry0 <= 0.2 * size and 0.15 * size <= rx1 - rx0 <= 0.8 * size and x0 - slack <= middle_x <= x1 + slack:
            return True
    return False


class _Rules:
    """A page's short horizontal rules, by the height of their middle, so a line looks only at those near it."""

    def __init__(self, boxes: Iterable[tuple[float, float, float, float]]) -> None:
        self._rules = sorted(((y0 + y1) / 2, x0, y0, x1, y1) for x0, y0, x1, y1 in boxes)
        self._middles = [rule[0] for rule in self._rules]

    def __bool__(self) -> bool:
        return bool(self._rules)

    def near(self, top: float, bottom: float) -> list[tuple[float, float, float, float, float]]:
        return self._rules[bisect.bisect_left(self._middles, top) : bisect.bisect_right(self._middles, bottom)]
