"""Cutting one stretch of text into windows of at most ``budget`` units sharing ``overlap`` units.

The text is first divided into *atoms*: sentences when snapping (a sentence larger than the budget
becomes words, a word larger than the budget becomes characters or tokens), else words or tokens.
Atoms are measured in one batched tokenizer call, and windows are packed greedily with binary
searches over cumulative sizes, so the Python work is per atom, never per character. A window may give up
part of its budget to text put before it (``reserve``: a chunk's repeated headings), by where it starts, and may
end early at a *break* (a heading), so that the next window starts there.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Sequence
from itertools import accumulate

from chonkit.document.chunking.config import Unit
from chonkit.document.chunking.sentences import sentence_spans, word_spans
from chonkit.document.chunking.tokens import TokenCounter, TokenOffsets

Spans = tuple[list[int], list[int]]

_NON_SPACE = re.compile(r"\S")
_LINE = re.compile(r"\S(?:[^\n]*\S)?")


class Meter:
    """Measures text in a config's unit; in tokens it remembers every count it has paid for."""

    def __init__(self, unit: Unit, tokenizer: TokenCounter) -> None:
        self.in_characters = unit == "characters"
        self._tokenizer = tokenizer
        self._offsets = tokenizer if isinstance(tokenizer, TokenOffsets) and not self.in_characters else None
        self._counts: dict[str, int] = {}

    def measure(self, texts: list[str]) -> list[int]:
        return [len(text) for text in texts] if self.in_characters else self._count(texts)

    def costs(self, text: str, starts: Sequence[int], ends: Sequence[int]) -> list[int]:
        if self.in_characters:
            return [end - start for start, end in zip(starts, ends, strict=True)]
        return self._count([text[start:end] for start, end in zip(starts, ends, strict=True)])

    def token_spans(self, text: str, start: int, end: int) -> Spans | None:
        """Token atoms of ``text[start:end]``, each running up to the next token; None without offsets."""
        if self._offsets is None:
            return None
        token_starts = list(
            accumulate((start + first for first, _ in self._offsets.offsets([text[start:end]])[0]), max)
        )
        if not token_starts:
            return [start], [end]
        token_starts[0] = start  # anything the tokenizer dropped before the first token stays in the chunk
        return token_starts, [*token_starts[1:], end]

    def _count(self, texts: list[str]) -> list[int]:
        known = self._counts
        missing = [text for text in dict.fromkeys(texts) if text not in known]
        if missing:
            known.update(zip(missing, self._tokenizer.count(missing), strict=True))
        return [known[text] for text in texts]


Reserve = Callable[[int], int]
"""Units a window starting at this offset leaves to what goes before it (at least 0, below the budget)."""


def split_region(
    text: str,
    start: int,
    end: int,
    *,
    budget: int,
    overlap: int,
    snap: bool,
    meter: Meter,
    reserve: Reserve | None = None,
    breaks: Sequence[int] = (),
) -> Spans:
    """Windows over ``text[start:end]`` as parallel start and end offsets (edges may hold whitespace).

    With ``reserve``, a window starting at offset ``s`` holds at most ``budget - reserve(s)`` units. A window
    that would run past one of ``breaks`` (sorted offsets) ends before the last such break instead, when what it
    holds before it fills at least half the window; the next window starts at that break, with no overlap.
    """
    if not snap and meter.in_characters:
        return _character_windows(text, start, end, budget, overlap, reserve=reserve, breaks=breaks)
    if snap:
        starts, ends = sentence_spans(text, start, end)
        atom_budget = budget - max(map(reserve, starts), default=0) if reserve else budget
        starts, ends, costs = _refine(text, starts, ends, atom_budget, meter, into_words=True)
    elif tokens := meter.token_spans(text, start, end):
        starts, ends = tokens
        costs = [1] * len(starts)
    else:
        starts, ends = word_spans(text, start, end)
        atom_budget = budget - max(map(reserve, starts), default=0) if reserve else budget
        starts, ends, costs = _refine(text, starts, ends, atom_budget, meter, into_words=False)
    if meter.in_characters:
        lo, hi = starts, ends  # a window's size is its span, whitespace between atoms included
    else:
        hi = list(accumulate(costs))
        lo = [total - cost for total, cost in zip(hi, costs, strict=True)]
    budgets = [budget - reserve(first) for first in starts] if reserve else [budget] * len(starts)
    wanted = set(breaks)
    first_last = _windows(lo, hi, budgets, overlap, [first in wanted for first in starts])
    return [starts[first] for first, _ in first_last], [ends[last] for _, last in first_last]


def line_spans(text: str, start: int, end: int) -> Spans:
    """The lines of ``text[start:end]`` that hold text, from their first to their last non-space character."""
    starts: list[int] = []
    ends: list[int] = []
    for match in _LINE.finditer(text, start, end):
        starts.append(match.start())
        ends.append(match.end())
    return starts, ends


def _character_windows(
    text: str, start: int, end: int, size: int, overlap: int, *, reserve: Reserve | None, breaks: Sequence[int]
) -> Spans:
    """Exact windows of ``size`` characters, each starting on a non-space so none repeats the last."""
    while end > start and text[end - 1].isspace():
        end -= 1
    starts: list[int] = []
    ends: list[int] = []
    while first := _NON_SPACE.search(text, start, end):
        at = first.start()
        window = size - reserve(at) if reserve else size
        if ends and at + window < ends[-1]:  # a longer header here: start later, or it ends inside the last
            start = ends[-1] - window
            continue
        starts.append(at)
        ends.append(min(at + window, end))
        if ends[-1] == end:
            break
        cut = bisect_left(breaks, ends[-1]) - 1
        if cut >= 0 and breaks[cut] - at >= window // 2 and breaks[cut] > at:
            ends[-1] = start = breaks[cut]
            continue
        start = max(ends[-1] - min(overlap, window - 1), at + 1)
    return starts, ends


def _windows(
    lo: list[int], hi: list[int], budgets: list[int], overlap: int, breaks: list[bool]
) -> list[tuple[int, int]]:
    """Greedy ``(first, last)`` atom ranges: atom ``i`` spans ``lo[i]..hi[i]`` on a cumulative scale, a window
    starting at atom ``i`` holds ``budgets[i]``, and one that would hold an atom with ``breaks[i]`` after its first
    ends before the last of them if at least half of it comes before."""
    found: list[tuple[int, int]] = []
    count = len(lo)
    first = 0
    while first < count:
        last = max(first, bisect_right(hi, lo[first] + budgets[first], first) - 1)  # an oversized atom stands alone
        cut = next((b for b in range(last, first, -1) if breaks[b]), None) if last < count - 1 else None
        if cut is not None and hi[cut - 1] - lo[first] >= budgets[first] // 2:
            found.append((first, cut - 1))
            first = cut  # no overlap: what comes before a break belongs to another section
            continue
        found.append((first, last))
        if last == count - 1:
            break
        nxt = bisect_left(lo, hi[last] - overlap, first + 1, last + 1)
        while nxt <= last and hi[last + 1] - lo[nxt] > budgets[nxt]:  # that much overlap would repeat this window
            nxt += 1
        first = nxt
    return found


def _refine(
    text: str, starts: list[int], ends: list[int], budget: int, meter: Meter, *, into_words: bool
) -> tuple[list[int], list[int], list[int]]:
    """Replace atoms larger than ``budget`` by their lines, then words (``into_words``), or by pieces of a word.

    Lines before words: a block of code has no sentences, and a window that starts mid-line loses the line's
    indentation and its start."""
    costs = meter.costs(text, starts, ends)
    if not costs or max(costs) <= budget:
        return starts, ends, costs
    out_starts: list[int] = []
    out_ends: list[int] = []
    out_costs: list[int] = []
    for first, last, cost in zip(starts, ends, costs, strict=True):
        if cost <= budget:
            out_starts.append(first)
            out_ends.append(last)
            out_costs.append(cost)
            continue
        if into_words and len((lines := line_spans(text, first, last))[0]) > 1:
            pieces = _refine(text, *lines, budget, meter, into_words=True)
        elif into_words:
            words = word_spans(text, first, last)
            pieces = _refine(text, *words, budget, meter, into_words=False)
        else:
            pieces = _split_word(text, first, last, cost=cost, budget=budget, meter=meter)
        out_starts += pieces[0]
        out_ends += pieces[1]
        out_costs += pieces[2]
    return out_starts, out_ends, out_costs


def _split_word(
    text: str, start: int, end: int, *, cost: int, budget: int, meter: Meter
) -> tuple[list[int], list[int], list[int]]:
    """Cut a word larger than a whole window: at tokens when we know them, else in proportional slices."""
    if meter.in_characters:
        starts = list(range(start, end, budget))
        ends = [*starts[1:], end]
        return starts, ends, [last - first for first, last in zip(starts, ends, strict=True)]
    if tokens := meter.token_spans(text, start, end):
        return tokens[0], tokens[1], [1] * len(tokens[0])
    length = end - start
    if length == 1:
        return [start], [end], [cost]  # one character worth several tokens cannot be cut further
    step = max(1, min(length // 2, length * budget // cost))
    starts = list(range(start, end, step))
    ends = [*starts[1:], end]
    out: tuple[list[int], list[int], list[int]] = ([], [], [])
    for first, last, piece_cost in zip(starts, ends, meter.costs(text, starts, ends), strict=True):
        if piece_cost <= budget:
            pieces: tuple[list[int], list[int], list[int]] = ([first], [last], [piece_cost])
        else:
            pieces = _split_word(text, first, last, cost=piece_cost, budget=budget, meter=meter)
        for bucket, part in zip(out, pieces, strict=True):
            bucket.extend(part)
    return out
