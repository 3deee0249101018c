"""ECMA-262 meaning for ``$``, the one regex feature where Python's ``re`` disagrees with JSON Schema.

JSON Schema patterns are ECMA-262 regular expressions. Python reads our patterns the same way except
for ``$``: outside MULTILINE mode Python also matches it just *before a trailing newline*, so
``re.search("^[A-Z][a-z]*$", "Hr\\n")`` succeeds where ECMA engines (jsonschema-rs, ajv, ...) fail.
Collection names travel between Ragu applications written against other validators, so we translate
``$`` to ``\\Z`` (true end of input) before matching and every application agrees on which names exist.
"""

from __future__ import annotations

import functools
import re


def search(pattern: str, text: str) -> bool:
    """Whether the ECMA-262 ``pattern`` matches anywhere in ``text``, as JSON Schema's ``pattern`` asks."""
    return _compile(pattern).search(text) is not None


def to_python(pattern: str) -> str:
    """Rewrite every ``$`` anchor (not escaped, not inside a ``[...]`` class) as Python's ``\\Z``."""
    out: list[str] = []
    escaped = in_class = False
    for char in pattern:
        is_anchor = False
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif in_class:
            in_class = char != "]"
        elif char == "[":
            in_class = True
        else:
            is_anchor = char == "$"
        out.append(r"\Z" if is_anchor else char)
    return "".join(out)


@functools.lru_cache(maxsize=256)
def _compile(pattern: str) -> re.Pattern[str]:
    return re.compile(to_python(pattern))
