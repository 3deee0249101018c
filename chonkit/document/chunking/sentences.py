"""Where sentences and words end, found by one compiled regex pass over the text.

Snapping must be cheap enough to run on every upload, so the scanner only visits the few places a
sentence *could* end (terminal punctuation followed by whitespace, a CJK full stop, exclamation or
question mark, or a blank line) and rejects abbreviations there. Periods inside decimals
(``3.14``), URLs and e-mail addresses are never followed by whitespace, so they are never
candidates. When in doubt we keep the sentence whole: a missed boundary only makes a sentence
longer, a false one cuts a thought in half.
"""

from __future__ import annotations

import re

_CLOSERS = "\"'\u201d\u2019\u00bb)]"  # straight and curly quotes, guillemet, brackets
_OPENERS = "\"'\u201c\u2018\u00ab([{"

_WIDE_ENDS = "\u3002\uff01\uff1f"  # CJK full stop, full-width exclamation and question marks
_WIDE_CLOSERS = "\u300d\u300f\uff09\u3011\u3015\u3009\u300b\u201d\u2019"  # CJK brackets and quotes

# One leading character class lets the regex engine skip ahead in C to the next possible end.
_CANDIDATE = re.compile(
    rf"[.!?…\n{_WIDE_ENDS}](?:"
    rf"(?<=[.!?…])[.!?…]*[{re.escape(_CLOSERS)}]*(?P<stop>)\s+(?=(?P<next>\S))"  # punctuation, closers, space
    rf"|(?<=[{_WIDE_ENDS}])[{_WIDE_ENDS}]*[{_WIDE_CLOSERS}]*(?P<wide>)\s*(?=\S)"  # CJK: no space needed
    r"|(?<=\n)[^\S\n]*\n\s*(?=\S))"  # or a blank line, which ends whatever came before it
)
_BLANK_LINE = re.compile(r"\n[^\S\n]*\n")
"""After punctuation too, a blank line ends the sentence: "... a session.\n\nqueue_depth (integer)" is two."""
_WORD = re.compile(r"\S+")
_NON_SPACE = re.compile(r"\S")

# Words that a period follows without ending the sentence ("Dr. Smith", "et al. 2020"), matched
# case-insensitively right before the period.
_ABBREVIATIONS = (
    "mr|mrs|ms|mx|dr|prof|sr|jr|st|hon|gen|col|capt|lt|sgt|gov|"
    "vs|etc|cf|al|approx|ca|resp|viz|"
    "inc|ltd|co|corp|bros|dept|univ|assn|"
    "jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec|"
    "fig|figs|eq|eqs|vol|vols|pp|ch|sec|sect|ref|refs|suppl|ed|eds"
)
_WORD_START = rf"(?<![^\s{re.escape(_OPENERS)}])"
_BEFORE_PERIOD = re.compile(
    rf"{_WORD_START}(?:(?i:{_ABBREVIATIONS})"
    r"|(?i:[a-z]{1,2}\.)+(?i:[a-z]{1,2})"  # initialisms: e.g, i.e, U.S, Ph.D, a.m
    r"|[A-Z])\Z"  # an initial: "J. Smith"
)
_BEFORE_NUMBER = re.compile(rf"{_WORD_START}(?i:no|nos|nr|p)\Z")  # "No. 5" but "I said no. Then"
_LONGEST_ABBREVIATION = 12


def sentence_spans(text: str, start: int, end: int) -> tuple[list[int], list[int]]:
    """Sentences of ``text[start:end]`` as parallel lists of start and end offsets, whitespace excluded."""
    starts: list[int] = []
    ends: list[int] = []
    first = _NON_SPACE.search(text, start, end)
    if first is None:
        return starts, ends
    begin = first.start()
    for match in _CANDIDATE.finditer(text, begin, end):
        if (stop := match.end("stop")) >= 0:
            if not _ends_sentence(text, match.start(), stop, match.group("next")) and not _BLANK_LINE.search(
                text, stop, match.end()
            ):
                continue
        elif (stop := match.end("wide")) < 0:
            stop = match.start()
            while stop > begin and text[stop - 1].isspace():
                stop -= 1
        if stop > begin:
            starts.append(begin)
            ends.append(stop)
        begin = match.end()
    stop = end
    while stop > begin and text[stop - 1].isspace():
        stop -= 1
    if stop > begin:
        starts.append(begin)
        ends.append(stop)
    return starts, ends


def word_spans(text: str, start: int, end: int) -> tuple[list[int], list[int]]:
    """Whitespace-separated words of ``text[start:end]`` as parallel start and end offsets."""
    starts: list[int] = []
    ends: list[int] = []
    for match in _WORD.finditer(text, start, end):
        starts.append(match.start())
        ends.append(match.end())
    return starts, ends


def _ends_sentence(text: str, first: int, stop: int, following: str) -> bool:
    """Whether the punctuation at ``text[first:stop]``, followed by ``following``, ends a sentence."""
    if following.islower():  # "e.g. this", "Wait... what", "(see p. 4) and"
        return False
    if stop - first != 1 or text[first] != ".":
        return True
    floor = max(0, first - _LONGEST_ABBREVIATION)
    if _BEFORE_PERIOD.search(text, floor, first):
        return False
    return not (following.isdigit() and _BEFORE_NUMBER.search(text, floor, first))
