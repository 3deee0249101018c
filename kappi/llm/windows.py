"""Passages sized for a small model: the sentences of each passage that bear on the question, under a token budget.

A 0.5B model on two cores reads a prompt at a few hundred tokens a second, so whole parent passages (hundreds of
words each, nine of them) cost seconds before its first token, and the rest of a long passage distracts it. The
model therefore reads windows: each passage's sentences weighed by BM25 against the question (the shared analyser
of :mod:`common.vectors.lexical`, IDF over the sentences of all the passages given, so a word every passage repeats
weighs little), the best of each passage first, then the best of all, then their neighbours, while the budget
lasts; a passage's leading headings always, for its topic. The reader's citation keeps the whole passage, and
grounding checks the model's sentences against the whole passage too.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from typing import NamedTuple

import msgspec

from common.vectors.lexical import K1, B, analyse
from kappi.llm.base import Passage

CHARS_PER_TOKEN = 4
"""What a budget in tokens allows in characters: English prose runs about four characters a token in the GGUF
models' tokenisers (code and numbers run fewer, so a budget is a little generous there)."""
GAP = "\n…\n"
"""Between two windows of one passage: the model sees that text was left out."""

_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])")
_HEADING_WORDS = 10


class _Unit(NamedTuple):
    """A sentence, a heading, a table row or a line of code: where it is in its passage and its stems."""

    start: int
    end: int
    heading: bool
    terms: Counter[str]


def _is_heading(line: str) -> bool:
    text = line.strip().strip("#*\u00b6 \t")
    return (
        bool(text)
        and len(text.split()) <= _HEADING_WORDS
        and not text.endswith((".", "!", "?", ":", ",", ";"))
        and any(c.isalpha() for c in text)
        and not text[:1].islower()
        and " | " not in text
    )


def _units(text: str) -> list[_Unit]:
    """The passage cut into what a window is made of: prose at sentences' ends, other lines whole."""
    spans: list[tuple[int, int, bool]] = []
    paragraph: tuple[int, int] | None = None

    def flush() -> None:
        nonlocal paragraph
        if paragraph is not None:
            start, end = paragraph
            at = start
            for cut in _SENTENCE_END.finditer(text, start, end):
                spans.append((at, cut.start(), False))
                at = cut.end()
            spans.append((at, end, False))
            paragraph = None

    position = 0
    for line in text.splitlines(keepends=True):
        start, end = position, position + len(line.rstrip("\r\n"))
        position += len(line)
        stripped = line.strip()
        if not stripped:
            flush()
        elif _is_heading(line) or " | " in stripped or line[:1].isspace() or stripped.startswith(("-", "*", "$")):
            flush()
            spans.append((start + len(line) - len(line.lstrip()), end, _is_heading(line)))
        else:
            paragraph = (start if paragraph is None else paragraph[0], end)
    flush()
    return [_Unit(s, e, h, Counter(analyse(text[s:e]))) for s, e, h in spans if text[s:e].strip()]


def sized(passages: Sequence[Passage], question: str, budget_tokens: int) -> list[Passage]:
    """The passages as the model reads them: the same, numbered alike, each with only its best windows once all
    of them together would exceed ``budget_tokens``. Every passage keeps its leading headings and its best sentence
    (or, with none of the question's terms, its first), so each stays citable; then the best sentences of all,
    each with the sentence after and before it, while the budget lasts."""
    budget = budget_tokens * CHARS_PER_TOKEN
    if sum(len(p.text.strip()) for p in passages) <= budget:
        return list(passages)
    per = [_units(p.text) for p in passages]
    scores = _scores(per, set(analyse(question)))
    chosen: list[set[int]] = [set() for _ in passages]
    used = 0

    def take(p: int, i: int, *, always: bool = False) -> None:
        nonlocal used
        if i in chosen[p] or not 0 <= i < len(per[p]):
            return
        cost = per[p][i].end - per[p][i].start + 1
        if always or used + cost <= budget:
            chosen[p].add(i)
            used += cost

    for p, units in enumerate(per):
        for i in _kept_whole(units, scores[p]):
            take(p, i, always=True)
    ranked = sorted((-s, p, i) for p, row in enumerate(scores) for i, s in enumerate(row) if s > 0)
    for _, p, i in ranked:
        for at in (i, i + 1, i - 1):
            take(p, at)
    return [_render(passage, units, kept) for passage, units, kept in zip(passages, per, chosen, strict=True)]


def _kept_whole(units: Sequence[_Unit], scores: Sequence[float]) -> list[int]:
    """The units a passage keeps whatever the budget: its leading headings and its best sentence (the first
    with none of the question's terms), so that it stays citable."""
    kept = []
    for i, unit in enumerate(units):
        if not unit.heading:
            break
        kept.append(i)
    if units:
        kept.append(max(range(len(units)), key=lambda i: (scores[i], -i)))
    return kept


def _scores(per: Sequence[Sequence[_Unit]], asked: set[str]) -> list[list[float]]:
    """Each unit's BM25 for the question's terms (Lucene's variant, the lexical leg's k1 and b), its IDF over the
    units of all the passages."""
    units = [u for us in per for u in us]
    if not units:
        return [[] for _ in per]
    frequency = Counter(t for u in units for t in asked if u.terms[t])
    idf = {t: math.log(1 + (len(units) - n + 0.5) / (n + 0.5)) for t, n in frequency.items()}
    average = sum(sum(u.terms.values()) for u in units) / len(units) or 1.0

    def score(unit: _Unit) -> float:
        norm = K1 * (1 - B + B * sum(unit.terms.values()) / average)
        return sum(weight * unit.terms[t] / (unit.terms[t] + norm) for t, weight in idf.items() if unit.terms[t])

    return [[score(u) for u in us] for us in per]


def _render(passage: Passage, units: Sequence[_Unit], kept: set[int]) -> Passage:
    """The passage's kept units in their order, neighbours as written, a gap marked."""
    if len(kept) == len(units):
        return passage
    text = passage.text
    pieces: list[str] = []
    run: tuple[int, int] | None = None
    for i in sorted(kept):
        if run is not None and i == run[1] + 1:
            run = (run[0], i)
            continue
        if run is not None:
            pieces.append(text[units[run[0]].start : units[run[1]].end])
        run = (i, i)
    if run is not None:
        pieces.append(text[units[run[0]].start : units[run[1]].end])
    if 0 not in kept:
        pieces.insert(0, "")
    if len(units) - 1 not in kept:
        pieces.append("")
    return msgspec.structs.replace(passage, text=GAP.join(pieces).strip())
