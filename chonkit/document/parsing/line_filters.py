"""Line filters as RE2 regular expressions, which run in time linear in the line, whatever the pattern.

Python's ``re`` backtracks: ``(a+)+$`` takes seconds on a line of 30 ``a``, doubling with each more. RE2
never backtracks, and so has no backreferences or lookaround. Filters were written for ``re`` and are still
searched anywhere in a line (``re.search``), so what an ordinary pattern means is kept: Python's Unicode
``\\d``, ``\\s`` and ``\\w`` (RE2's are ASCII-only), ``\\Z`` and ``{,n}`` are spelled in RE2 syntax before
compiling. Only ``\\b`` keeps RE2's meaning: a boundary between an ASCII word character and anything else.
"""

from __future__ import annotations

import re
import warnings
from typing import Protocol

import re2  # type: ignore[import-untyped]  # google-re2 ships no type information

from common.errors import InvalidInput

UNICODE_CLASSES = {"d": r"\p{Nd}", "s": r"\t\n\x0b\f\r\x1c-\x1f\x85\p{Z}", "w": r"\p{L}\p{N}_"}
"""The members of Python's ``\\d``, ``\\s`` and ``\\w`` in text, as the inside of an RE2 character class."""
UNSUPPORTED = (
    "Line filters are RE2 regular expressions, which always run in linear time and so have no backreferences "
    r"(\1, (?P=name)), lookahead or lookbehind ((?=...), (?!...), (?<=...), (?<!...)), atomic groups ((?>...)), "
    "possessive quantifiers (a++) or verbose mode ((?x))."
)
_OMITTED_MINIMUM = re.compile(r"\{,\d+\}")
_POSIX_CLASS = re.compile(r"\[:\^?[a-z]+:\]")
_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # RE2 would print every refused pattern to stderr
_OPTIONS.never_capture = True  # a filter only decides whether a line matches


class LineFilter(Protocol):
    """A compiled filter: whether it is found in a line (UTF-8 encoded)."""

    def search(self, text: bytes) -> object | None: ...


def compile_line_filter(pattern: str) -> LineFilter:
    """Compile ``pattern`` with RE2; a pattern it cannot run is ``invalid_regex``, saying why in words.

    Lines are searched as UTF-8 bytes: RE2 works on them anyway, and the binding's conversion of ``str``
    costs more than the search.
    """
    try:
        compiled: LineFilter = re2.compile(to_re2(pattern), _OPTIONS)
    except re2.error as exc:
        reason = exc.args[0].decode(errors="replace") if isinstance(exc.args[0], bytes) else str(exc)
        if _python_accepts(pattern):
            detail = f"Line filter '{pattern}' cannot be used ({reason}). {UNSUPPORTED}"
        else:
            detail = f"Line filter '{pattern}' is not a valid regular expression: {reason}."
        raise InvalidInput(detail, code="invalid_regex", extra={"pattern": pattern, "reason": reason}) from exc
    return compiled


def to_re2(pattern: str) -> str:
    """``pattern`` with the escapes and repeats whose meaning differs between Python and RE2 rewritten."""
    out: list[str] = []
    in_class = False
    index = 0
    while index < len(pattern):
        piece = pattern[index]
        if piece == "\\" and index + 1 < len(pattern):
            out.append(_escape(pattern, pattern[index + 1], in_class=in_class))
            index += 2
            continue
        if in_class:
            if posix := _POSIX_CLASS.match(pattern, index):
                piece = posix[0]
            else:
                in_class = piece != "]"
        elif piece == "[":
            in_class = True
            # "]" right after "[" or "[^" is a member of the class, in Python as in RE2.
            start = index + 1 + pattern.startswith("^", index + 1)
            piece = pattern[index : start + pattern.startswith("]", start)]
        elif piece == "{" and _OMITTED_MINIMUM.match(pattern, index):
            out.append("{0")
            index += 1
            continue
        out.append(piece)
        index += len(piece)
    return "".join(out)


def _escape(pattern: str, letter: str, *, in_class: bool) -> str:
    members = UNICODE_CLASSES.get(letter.lower())
    if members is None:
        return r"\z" if letter == "Z" and not in_class else "\\" + letter
    if not in_class:
        return f"[^{members}]" if letter.isupper() else f"[{members}]"
    if letter.islower():
        return members
    if letter == "D":
        return r"\P{Nd}"
    raise InvalidInput(
        f"Line filter '{pattern}' uses \\{letter} inside [...], which line filters do not support; "
        f"write it outside the brackets, e.g. (?:\\{letter}|[...]).",
        code="invalid_regex",
        extra={"pattern": pattern},
    )


def _python_accepts(pattern: str) -> bool:
    with warnings.catch_warnings(action="ignore"):
        try:
            re.compile(pattern)
        except re.error:
            return False
    return True
