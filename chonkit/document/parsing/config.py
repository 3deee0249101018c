"""How a document is parsed: page range, line filters and PDF sections.

A :class:`ParseConfig` arrives in an API body, so it is validated twice over: its shape by msgspec
(unknown fields rejected) and its meaning by :meth:`ParseConfig.validate` when it is saved, so that a
bad regex or an inverted page range is reported then rather than when a document is parsed. Checks
that need the document (is page 40 inside it?) happen at parse time.
"""

from __future__ import annotations

import itertools
from typing import Any, Self

import msgspec

from chonkit.document.parsing.line_filters import LineFilter, compile_line_filter
from chonkit.document.parsing.ocr import OcrMode
from common.errors import InvalidInput

MAX_LINE_FILTERS = 50
MAX_PATTERN_LENGTH = 200
"""RE2 runs in linear time, but a short pattern still stays reviewable (and small to compile)."""


class PageRange(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Pages ``start`` to ``end``, 1-based and inclusive, as people number them."""

    start: int
    end: int

    def validate(self) -> None:
        """Reject ranges that cannot select anything, whatever the document."""
        if self.start < 1 or self.end < self.start:
            raise InvalidInput(
                f"Invalid page range {self.start}-{self.end}: pages start at 1 and the start may not exceed the end.",
                code="invalid_page_range",
                extra={"start": self.start, "end": self.end},
            )

    def check_within(self, page_count: int) -> None:
        """Reject a range that reaches past the last page of a parsed document."""
        if self.end > page_count:
            raise InvalidInput(
                f"Page range {self.start}-{self.end} is outside the document, which has {page_count} pages.",
                code="page_range_out_of_bounds",
                extra={"start": self.start, "end": self.end, "page_count": page_count},
            )

    def contains(self, other: PageRange) -> bool:
        return self.start <= other.start and other.end <= self.end


class ParseConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Options applied while parsing; ``page_range`` and ``sections`` only affect PDFs and multi-page TIFFs."""

    page_range: PageRange | None = None
    line_filters: list[str] = msgspec.field(default_factory=list)
    """RE2 regexes searched in every extracted line (as ``re.search`` would); a line matching any is dropped."""
    sections: list[PageRange] | None = None
    """PDF section mode: each page range becomes one :class:`Section`; pages outside them are skipped."""
    ocr: OcrMode = "auto"
    """Text recognition of page images: ``auto`` reads a PDF page without a text layer (and every image upload)
    from its image, ``force`` every page, ``off`` none (:mod:`chonkit.document.parsing.ocr`)."""

    def validate(self) -> Self:
        """Check everything that can be checked without the document; returns ``self`` for chaining.

        Raises:
            InvalidInput: ``invalid_page_range``, ``overlapping_sections``, ``invalid_regex`` or
                ``too_many_line_filters``.
        """
        if self.page_range is not None:
            self.page_range.validate()
        if self.sections is not None:
            self._validate_sections(self.sections)
        self.compile_line_filters()
        return self

    def compile_line_filters(self) -> tuple[LineFilter, ...]:
        """Compile the line filters once per parse; invalid ones raise ``invalid_regex`` naming the pattern."""
        if len(self.line_filters) > MAX_LINE_FILTERS:
            raise InvalidInput(
                f"At most {MAX_LINE_FILTERS} line filters are allowed, got {len(self.line_filters)}.",
                code="too_many_line_filters",
            )
        return tuple(_compile_line_filter(pattern) for pattern in self.line_filters)

    def _validate_sections(self, sections: list[PageRange]) -> None:
        if not sections:
            raise InvalidInput("Section mode needs at least one page range.", code="invalid_page_range")
        for section in sections:
            section.validate()
            if self.page_range is not None and not self.page_range.contains(section):
                raise InvalidInput(
                    f"Section {section.start}-{section.end} lies outside the page range "
                    f"{self.page_range.start}-{self.page_range.end}.",
                    code="invalid_page_range",
                )
        ordered = sorted(sections, key=lambda s: s.start)
        for before, after in itertools.pairwise(ordered):
            if after.start <= before.end:
                raise InvalidInput(
                    f"Sections {before.start}-{before.end} and {after.start}-{after.end} overlap.",
                    code="overlapping_sections",
                )


def validate_parse_config(obj: Any) -> ParseConfig:
    """Build a validated :class:`ParseConfig` from a decoded JSON body (or check an existing one).

    Raises:
        InvalidInput: ``unknown_field`` for a field we do not know, ``invalid_parse_config`` for a wrong
            type, or any code of :meth:`ParseConfig.validate`.
    """
    if isinstance(obj, ParseConfig):
        return obj.validate()
    try:
        config = msgspec.convert(obj, ParseConfig)
    except msgspec.ValidationError as exc:
        code = "unknown_field" if str(exc).startswith("Object contains unknown field") else "invalid_parse_config"
        raise InvalidInput(f"Invalid parse config: {exc}", code=code) from exc
    return config.validate()


def _compile_line_filter(pattern: str) -> LineFilter:
    if not pattern:
        raise InvalidInput("An empty line filter would remove every line.", code="invalid_regex", extra={"pattern": ""})
    if len(pattern) > MAX_PATTERN_LENGTH:
        raise InvalidInput(
            f"Line filter {pattern[:40]!r}... is longer than {MAX_PATTERN_LENGTH} characters.",
            code="invalid_regex",
            extra={"pattern": pattern},
        )
    return compile_line_filter(pattern)
