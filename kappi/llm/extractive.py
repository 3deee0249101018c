"""The offline provider: answers with the passage's own sentences that answer the question, cited, no model.

It is the fallback so Ragu answers usefully with no model, no API key and no network. It chooses by one measure,
not by rules for kinds of text: **the weighted share of the question's key terms a sentence window holds**. A
window is a sentence with its neighbours inside one section of one passage (a section: a heading and the
sentences under it); its heading counts as part of it, since manuals put a subject in a heading
("queue_depth (integer)") and its facts in the sentences below. Each key term (a question word minus stop and weak
words, crudely stemmed) weighs its inverse document frequency over the passages' sentences and headings, the BM25
statistic: "default" weighs little, "queue_depth" much, and a term no passage holds the most.

- The best window holds the largest share (ties: the one whose heading names the question's code-like name, then
  one stating a number when a quantity is asked for, the more concentrated, the shorter, the better retrieved);
  under :data:`MIN_COVERAGE` no window answers, and the answer says so plainly. A name the question spells like
  code must stand in the passage's document, and a section headed by another such name does not answer. When at
  least :data:`MISSING_NAMES` of what a question names (a capitalised word inside it, an acronym, a number, a code
  name) stands in no passage or source name, the passages are about something else: it is declined, and the
  answer pipeline asks no model (:func:`about_something_else`).
- With the embedder Ragu has loaded (:func:`checked_answer`), windows down to :data:`CHECKED_MIN_COVERAGE` may
  answer, and the chosen quote is declined when its window's coverage plus its embedding's cosine to the
  question's is under :data:`MIN_EVIDENCE`: the two together separate near misses (the topic is there, the asked
  fact is not) from answers better than either alone.
- The quote is the window's sentences that add weight, then what the question's type asks for: the sentence after
  one that announces rather than answers (it ends in ":" or "?", or has fewer than :data:`LEAD_IN_NEW_WORDS` words
  of its own) or that the next one points back to ("It works by …"), and, for a quantity, the section's sentence
  that states one. Whole sentences only (not a fragment a chunk boundary cut, not code unless a lead-in announces
  it; a sentence goes on past "U.S." before a lowercase word), in the passage's words, its heading first when that
  holds a key term, cited by every passage holding them; no lead-in line, no other bullets.
- Layout is read, not guessed per document: a line of its own that ends no sentence is a heading (a PDF's text has
  few blank lines), a number alone on a line is a page's, a one-word heading ("Note") names a part of the subject
  above it, a table's rows are statements under the row that names its columns, a command's options are lines.
- A table's row the question names by its cells (:func:`_named_row`) is the answer, quoted with its columns' names:
  a table's column names rarely share the question's words.

The thresholds were chosen on the dev split of ``bench/answer_bench.py`` (its records replayed offline with
``bench/extractive_replay.py``, which sweeps each one); the test split was never used to choose anything. The
answer is deterministic; each passage's analysis is cached by its text (the same chunks come back question after
question).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import math
import re
import unicodedata
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterator, Sequence
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

from kappi.llm.base import LlmEvent, LlmRequest, Passage, Token, Usage
from kappi.llm.words import (
    IDENTIFIER,
    NOT_WORD,
    STOP_WORDS,
    expects_value,
    identifiers,
    key_terms,
    named,
    question_stems,
    states_value,
    stem,
    unlisted,
)

log = logging.getLogger(__name__)
EXTRACTIVE_MODEL = "extractive"
NOTHING_FOUND = "The documents you have access to say nothing about this question."
"""No passage was given (or none holds a sentence)."""
NOTHING_MATCHES = "The documents you have access to do not answer this question."
"""Passages were given, but no window of theirs holds enough of the question."""
ANALYSED_PASSAGES = 4096
"""Passages whose analysis is kept (a few KB each for a 1 KB chunk)."""
MIN_COVERAGE = 0.35
"""The share of the question's term weight the best window (with its heading) must hold to answer."""
CHECKED_MIN_COVERAGE = 0.2
""":data:`MIN_COVERAGE` when the embedder checks the quote (:func:`checked_answer`)."""
MIN_EVIDENCE = 1.0
"""What a checked quote must reach, its window's coverage plus its embedding's cosine to the question's, or it is
declined: either alone separated answerable questions from near misses worse on the dev split."""
MIN_ADDED_SHARE = 0.05
"""A neighbour joins the window only if it adds at least this share of the question's weight."""
LEAD_IN_NEW_WORDS = 1
"""A quoted sentence with fewer words of its own (not the question's, not its heading's) announces rather than
answers: the sentence after it is quoted too."""
MAX_QUOTE_SENTENCES = 3
"""What a quote grows to by the question's type; the sentence after a lead-in is quoted beyond it (what the lead-in
announces is the answer)."""

MISSING_NAMES = 0.5
"""The share of the names a question gives (:func:`_specific`) that, standing in no passage, makes the passages about
something else (dev split: any one missing declined answerable questions whose passages lacked one of two names)."""
SHORT_NAME = 3
"""A name the question gives of at most this many letters (an acronym) is looked for as a whole word, not as the
start of one: a passage saying "more" does not name "MO" (dev split: near misses declined 90 -> 93 %)."""

_PARAGRAPHS = re.compile(r"\n[ \t]*\n+")
_SENTENCE_END = re.compile(
    r"(?<=[.!?])[\"'\u201d)]*\s+(?=[^\sa-z])"  # after a sentence's closing punctuation ("U.S. economy" goes on)
    r"|(?<=:)[ \t]*\n+"  # a line that announces what follows it
    r"|\n+(?=\s*(?:[-*\u2022]|\d+[.)])\s|\s*--?\w)"  # before a list item or a command's option
)
_DIGIT = re.compile(r"\d")
_CELL = " | "
_PAGE_NUMBER = re.compile(r"\s*[\d.]+\s*")
_BULLET = re.compile(r"^\s*(?:[-*\u2022]|\d+[.)])\s+")
_CODE_CHARACTERS = "{}();=<>$`|\\[]"
_HEADING_WORDS = 10
"""A one-line paragraph of at most this many words without a sentence's closing punctuation is a heading."""
_HEADING_MARKS = "\u00b6#* \t"
"""What documentation puts around a heading: HTML manuals' pilcrow permalinks, Markdown's marks."""


def is_code(sentence: str) -> bool:
    """A fence, a shell or Python prompt, ``#`` markup, or mostly symbols."""
    text = sentence.strip()
    if text.startswith(("#", "```", "    ", "$ ", ">>> ")):
        return True
    return sum(text.count(c) for c in _CODE_CHARACTERS) * 8 > len(text)


def is_fragment(sentence: str) -> bool:
    """A piece of a sentence (a chunk cut mid-sentence, or the tail after "e.g."): it starts in lowercase."""
    return sentence[:1].islower()


def _words(text: str) -> str:
    """Lowercase words, space-separated with a space at each end, so ``" stem"`` finds a word by its prefix.
    Identifiers are also split ("retry_delay" holds "delay"); ligatures a PDF keeps ("ﬁ") are letters again."""
    plain = NOT_WORD.sub(" ", unicodedata.normalize("NFKC", text).lower())
    return f" {plain} {plain.replace('_', ' ')} " if "_" in plain else f" {plain} "


def _is_heading(line: str, before: str | None, after: str | None) -> bool:
    """A short line with letters and no sentence's closing punctuation. Inside a paragraph (a PDF's page has few
    blank lines) it must also follow a sentence's end and be followed by a line that starts a sentence, so that a
    line a sentence wraps onto is not taken for one."""
    text = line.strip().strip(_HEADING_MARKS)
    if not text or len(text.split()) > _HEADING_WORDS or text.endswith((".", "!", "?", ":", ",", ";")):
        return False
    if _BULLET.match(line) or line[:1].isspace() or is_code(text) or not any(c.isalpha() for c in text):
        return False
    if before is None and after is None:
        return True
    ended = before is None or before.rstrip().endswith((".", "!", "?", ":"))
    return ended and not text[:1].islower() and not (after or "").strip()[:1].islower()


def _blocks(text: str) -> Iterator[tuple[bool, str]]:
    """The text's headings (``True``) and the runs of lines between them, in reading order."""
    for paragraph in _PARAGRAPHS.split(text.replace("\r\n", "\n").replace("\r", "\n")):
        lines = [line for line in paragraph.split("\n") if line.strip()]
        if _is_table(lines):
            header = not _DIGIT.search(lines[0]) and bool(_DIGIT.search(lines[1]))
            if header:  # a first row without numbers over rows with them names the columns
                yield True, " ".join(lines[0].split())
            yield False, "\n".join(lines[header:])
            continue
        run: list[str] = []
        titled = False  # the line before was a heading: a heading may follow it ("2.4 Routine", "Synopsis")
        for at, line in enumerate(lines):
            if _PAGE_NUMBER.fullmatch(line):
                titled = True  # a page's or a section's number alone on its line: layout, not text
                continue
            before = None if at == 0 or titled else lines[at - 1]
            after = lines[at + 1] if at + 1 < len(lines) else None
            titled = _is_heading(line, before, after) and (at > 0 or after is not None or len(lines) == 1)
            if titled:
                if run:
                    yield False, "\n".join(run)
                    run = []
                yield True, " ".join(line.strip(_HEADING_MARKS).split())
            else:
                run.append(line)
        if run:
            yield False, "\n".join(run)


class Sentence(NamedTuple):
    text: str
    """As quoted: whitespace collapsed, list bullets removed."""
    words: str
    quotable: bool
    """Whole and not code: not a fragment a chunk boundary cut."""
    value: bool
    """States a number (digits or a number word)."""
    cells: tuple[str, ...] = ()
    """A table row's cells as :func:`_tokens` spells them (empty for prose)."""


class Section(NamedTuple):
    heading: str | None
    """None for the sentences before a passage's first heading: their heading, if any, is in another chunk."""
    heading_words: str
    raw: str
    """The section's text lowercased, for finding identifiers as written."""
    sentences: tuple[Sentence, ...]


class Analysed(NamedTuple):
    """A passage read once (cached by its text)."""

    sections: tuple[Section, ...]
    sentence_words: frozenset[str]
    """Every sentence's words: which passages hold a quote (overlapping chunks share sentences)."""


def _is_table(lines: Sequence[str]) -> bool:
    """Rows of cells as the parsers write a table (``a | b | c``), one per line."""
    return len(lines) > 1 and all(_CELL in line for line in lines)


_TOKEN = re.compile(r"\d+(?:[.\-/:]\d+)*|[^\W\d_]+|\w+")
"""A word, or a number with its dots, dashes or colons ("6.0", "2023-06-10"): "12" is not "12.5"."""


def _tokens(text: str) -> str:
    """The text's tokens, lowercased, space-separated with a space at each end: one cell found in a question as a
    run of whole tokens."""
    return " " + " ".join(_TOKEN.findall(unicodedata.normalize("NFKC", text).lower())) + " "


def _cells(row: str) -> tuple[str, ...]:
    return tuple(_tokens(cell) for cell in row.split(_CELL))


def _sentences(paragraph: str, *, announced: bool = False) -> list[Sentence]:
    """``announced``: the sentence before the paragraph ends in ":", so its first line is quotable as it is."""
    lines = paragraph.split("\n")
    if _is_table(lines):  # each row is a statement of its own, in symbols that are not code
        return [Sentence(row, _words(row), True, states_value(row), _cells(row)) for row in map(str.strip, lines)]
    out: list[Sentence] = []
    for piece in _pieces(paragraph):
        text = " ".join(_BULLET.sub("", piece).split())
        if text:
            announced = out[-1].text.endswith(":") if out else announced  # code, a command: what a lead-in shows
            quotable = announced or (not is_fragment(text) and not is_code(piece))
            out.append(Sentence(text, _words(text), quotable, states_value(text)))
    return out


_REFERS_BACK = re.compile(r"(?:This|These|That|Those|It|They|Such)\b")
"""A sentence opening with a word that points at the one before continues it: the window takes it along."""
_ENUMERATOR = re.compile(r"(?:^|(?<=:))\s*\(?(?:\d{1,3}|[a-zA-Z]|[ivx]{1,4})[.)]\s*$")
"""A list item's number ("1.", "b)") ending a piece: alone, or after the lead-in that announces the list."""


def _pieces(paragraph: str) -> Iterator[str]:
    """The paragraph cut at sentences' ends; a list item's number that a cut left on its own or at the end of
    its lead-in goes with the item it numbers."""
    held = ""
    for cut in _SENTENCE_END.split(paragraph):
        number = _ENUMERATOR.search(cut)
        piece = cut if number is None else cut[: number.start()]
        if piece.strip():
            yield held + piece
            held = ""
        held += "" if number is None else number.group().strip() + " "
    if held.strip():
        yield held


@functools.lru_cache(maxsize=ANALYSED_PASSAGES)
def analysed(text: str) -> Analysed:
    """A passage's sections, each with its sentences (cached by text)."""
    sections: list[Section] = []
    heading: tuple[str, str] | None = None
    topic = ""
    body: list[Sentence] = []
    raw: list[str] = []
    for is_heading, block in _blocks(text):
        if is_heading:
            if heading is not None or body:
                sections.append(_section(heading, raw, body))
            # a one-word heading ("Note", "Returns") names a part of the subject the heading before it names
            part = topic and len(block.split()) == 1
            topic = topic if part else block
            heading, body, raw = (block, f"{topic} {block}" if part else block), [], [block]
        else:
            raw.append(block)
            body.extend(_sentences(block, announced=bool(body) and body[-1].text.endswith(":")))
    if heading is not None or body:
        sections.append(_section(heading, raw, body))
    words = frozenset(s.words for section in sections for s in section.sentences)
    return Analysed(tuple(sections), words)


def _section(heading: tuple[str, str] | None, raw: list[str], body: list[Sentence]) -> Section:
    """``heading``: as quoted, and the text its words are taken from (a part's adds its subject's)."""
    words = _words(heading[1]) if heading else " "
    return Section(heading[0] if heading else None, words, " ".join(raw).lower(), tuple(body))


class _Query(NamedTuple):
    """The question as the windows are weighed by."""

    needles: tuple[str, ...]
    """Each key term's stem with a space before it: found in :func:`_words` as a word prefix."""
    weights: tuple[float, ...]
    stems: frozenset[str]
    """Every stem of the question (weak words too): what a sentence says beyond them is its own."""
    names: tuple[re.Pattern[str], ...]
    want_value: bool
    tokens: str
    """The question as :func:`_tokens` spells it: where a table's cell is looked for."""
    given: frozenset[str]
    """The numbers and names (capitalised, acronyms) the question gives that no source's name holds, as
    :func:`_tokens` spells them: a row it names must hold each, in its cells or its table's header."""


def _query(question: str, passages: Sequence[Passage], per_passage: Sequence[Analysed]) -> _Query | None:
    """The question's key terms weighted by their inverse frequency over the passages' sentences and headings;
    ``None`` when it has none, or the passages are about something else (:func:`_names_missing`)."""
    needles = [" " + s for s in key_terms(question)]
    units = _units(per_passage)
    if not needles or _names_missing(question, needles, units, passages):
        return None
    counts = []
    for at, needle in enumerate(needles):
        count = sum(needle in u for u in units)
        if not count and "_" in needle:  # a PDF's text may have lost a name's underscores
            needles[at] = needle.replace("_", " ")
            count = sum(needles[at] in u for u in units)
        counts.append(count)
    weights = tuple(math.log(1 + len(units) / (1 + count)) for count in counts)
    names = tuple(named(identifiers(question)))
    tokens = _tokens(question)
    sources = "".join({_tokens(f"{p.document_name or ''} {p.collection}") for p in passages})
    given = {t for t in tokens.split() if t[0].isdigit()}
    given |= {t for word in _CAPITALISED.findall(question) if not _DIGIT.search(word) for t in _tokens(word).split()}
    stems = frozenset(question_stems(question))
    given_here = frozenset(t for t in given if f" {t} " not in sources)
    return _Query(tuple(needles), weights, stems, names, expects_value(question), tokens, given_here)


def _units(per_passage: Sequence[Analysed]) -> list[str]:
    """Every sentence's and heading's words: what the question's terms are counted and looked for in."""
    units = [s.words for a in per_passage for section in a.sections for s in section.sentences]
    return units + [section.heading_words for a in per_passage for section in a.sections if section.heading]


def _names_missing(question: str, needles: Sequence[str], units: Sequence[str], passages: Sequence[Passage]) -> bool:
    """Whether at least :data:`MISSING_NAMES` of what the question names (:func:`_specific`, and the words English
    does not use: :func:`~kappi.llm.words.unlisted`) stands in no passage and no source's name: the passages are
    about something else, however many other words they share."""
    specific = _specific(question) | unlisted(question)
    names = [needle for needle in needles if needle[1:] in specific]
    if not names:
        return False
    sources = "".join({_source_words(p.document_name, p.collection) for p in passages})
    where = [*units, sources]
    missing = sum(
        not _named_in(name, where) and not ("_" in name and _named_in(name.replace("_", " "), where)) for name in names
    )
    return missing >= MISSING_NAMES * len(names)


def about_something_else(question: str, passages: Sequence[Passage]) -> bool:
    """:func:`_names_missing` for a question and its passages: what a model must not be asked to answer from them."""
    needles = [" " + s for s in key_terms(question)]
    return _names_missing(question, needles, _units([analysed(p.text) for p in passages]), passages)


def names_everything(question: str, text: str, document_name: str | None, collection: str) -> bool:
    """Whether ``text`` holds every name the question gives (:func:`_specific`) that its source's name does not,
    a number among them: a passage the question names by its own names, down to a version or a code, is about it,
    however unlike the question its embedding is (a table's rows). Without a number the names were too weak on the
    dev split: a near miss naming only a product reached the model."""
    source = [_source_words(document_name, collection)]
    names = [" " + name for name in _specific(question) if not _named_in(" " + name, source)]
    words = [_words(text)]
    numbered = any(_DIGIT.search(name) for name in names)
    return numbered and all(_named_in(name, words) for name in names)


def _named_in(needle: str, units: Sequence[str]) -> bool:
    """Whether a name the question gives stands in one of ``units``: as a word's start, or when it is as short as an
    acronym (:data:`SHORT_NAME`) as a whole word."""
    whole = needle + " " if len(needle) - 1 <= SHORT_NAME else needle
    return any(whole in u for u in units)


_CAPITALISED = re.compile(r"(?<=\w[\s,;:(\"'])[A-Z][\w-]*|\b[A-Z]{2,}\w*|\b\w*\d\w*|\b\w+_\w+")


def _specific(question: str) -> frozenset[str]:
    """The stems of what the question names rather than describes: a capitalised word inside it (a product, a
    person, a language), an acronym, a number, a name spelled like code. A passage that holds none of it is
    about something else, however many of the question's other words it shares."""
    return frozenset(stem(word.lower()) for word in _CAPITALISED.findall(question))


class _Window(NamedTuple):
    rank: tuple[float, ...]
    coverage: float
    passage: int
    section: Section
    quoted: tuple[int, ...]
    looked_up: bool = False
    """The quote is the table row the question names (:func:`_named_row`)."""


class _Scorer:
    """Weighs one section's windows for the question."""

    def __init__(self, query: _Query, section: Section, subject: frozenset[int]) -> None:
        self.query, self.section, self.subject = query, section, subject
        self.held = [self._terms(s.words) for s in section.sentences]
        self.titled = self._terms(section.heading_words) if section.heading else frozenset()
        self.total = sum(query.weights[i] for i in subject) or 1.0

    def _terms(self, words: str) -> frozenset[int]:
        return frozenset(i for i in self.subject if self.query.needles[i] in words)

    def share(self, terms: frozenset[int] | set[int]) -> float:
        return sum(self.query.weights[i] for i in terms) / self.total

    def window(self, centre: int) -> tuple[list[int], set[int]]:
        """The centre sentence and the neighbours that add weight to it (the heading's terms count as held)."""
        chosen, covered = [centre], set(self.titled | self.held[centre])
        sentences = self.section.sentences
        for n in (centre - 1, centre + 1):
            if 0 <= n < len(sentences) and sentences[n].quotable:
                adds = self.share(self.held[n] - covered)
                if adds >= MIN_ADDED_SHARE:
                    chosen.append(n)
                    covered |= self.held[n]
        return sorted(chosen), covered

    def completed(self, chosen: list[int], covered: set[int]) -> tuple[list[int], set[int]]:
        """The quote completed by the question's type: the sentence after a lead-in, then the section's sentence
        that adds the most of the question's weight (one stating a quantity first, when one is asked for)."""
        sentences = self.section.sentences
        last = chosen[-1]
        following = sentences[last + 1] if last + 1 < len(sentences) else None
        if (
            following is not None
            and following.quotable
            and (self._announces(sentences[last]) or _REFERS_BACK.match(following.text))
        ):
            last += 1
            chosen = [*chosen, last]
            covered = covered | self.held[last]
        wants = self.query.want_value and not any(sentences[n].value for n in chosen)
        best, gain = -1, (False, 0.0, 0)
        for n, sentence in enumerate(sentences):
            if n not in chosen and sentence.quotable:
                adds = self.share(self.held[n] - covered)
                candidate = (wants and sentence.value and bool(self.held[n]), adds, -abs(n - last))
                if candidate > gain:
                    best, gain = n, candidate
        if best >= 0 and (gain[0] or gain[1] >= MIN_ADDED_SHARE) and len(chosen) < MAX_QUOTE_SENTENCES:
            chosen = sorted([*chosen, best])
            covered = covered | self.held[best]
        return chosen, covered

    def _announces(self, sentence: Sentence) -> bool:
        if sentence.text.endswith((":", "?")):
            return True
        own = {stem(w) for w in sentence.words.split() if w not in STOP_WORDS and len(w) > 1}
        own -= self.query.stems
        own -= {stem(w) for w in self.section.heading_words.split()}
        return len(own) < LEAD_IN_NEW_WORDS


def _named_row(query: _Query, per_passage: Sequence[Analysed]) -> str | None:
    """The one table row the question names by its cells ("release 2 of Foo" names the row whose cells are "2" and
    "Foo"): the row holding the most distinct cells the question spells, strictly more than any other row, and
    every number and name the question gives (in its cells or the table's header). A table's columns rarely share
    the question's words (a column "ttl" for "how long does it last"), so its row is found by what the question
    names; it must still hold the coverage in effect (:data:`CHECKED_MIN_COVERAGE` with the embedder) with its
    header (dev split: a row named by one common word held 0.12; the rows named rightly, 0.25 and more)."""
    named: dict[str, int] = {}
    for analysis in per_passage:
        for section in analysis.sections:
            header = set(_tokens(section.heading or "").split())
            for sentence in section.sentences:
                if sentence.cells and sentence.text not in named:
                    cells = {c for c in sentence.cells if c.strip() and c.strip() not in STOP_WORDS}
                    held = set(" ".join(cells).split()) | header
                    hits = sum(cell in query.tokens for cell in cells)
                    named[sentence.text] = hits if query.given <= held else 0
    ranked = sorted(named.items(), key=lambda item: item[1], reverse=True)
    if not ranked or not ranked[0][1] or (len(ranked) > 1 and ranked[1][1] == ranked[0][1]):
        return None
    return ranked[0][0]


def _windows(query: _Query, passages: Sequence[Passage], per_passage: Sequence[Analysed]) -> list[_Window]:
    found = []
    row = _named_row(query, per_passage)
    for n, (passage, analysis) in enumerate(zip(passages, per_passage, strict=True)):
        subject = _subject(query, passage)
        for section in analysis.sections:
            if query.names and not _names_stand(section, query.names, _Scope(passages, per_passage, passage)):
                continue
            scorer = _Scorer(query, section, subject)
            by_name = sum(name.search(section.heading_words) is not None for name in query.names)
            for centre, terms in enumerate(scorer.held):
                held = scorer.share(terms | scorer.titled)
                if section.sentences[centre].text == row:
                    rank = (len(query.names) + 1, 1.0, True, 1.0, -1, passage.score, -n)
                    found.append(_Window(rank, held, n, section, (centre,), True))
                elif terms and section.sentences[centre].quotable:
                    quoted, covered = scorer.completed(*scorer.window(centre))
                    coverage = scorer.share(covered)
                    focus = scorer.share(terms | scorer.titled)
                    typed = not query.want_value or any(section.sentences[i].value for i in quoted)
                    rank = (by_name, round(coverage, 6), typed, round(focus, 6), -len(quoted), passage.score, -n)
                    found.append(_Window(rank, coverage, n, section, tuple(quoted)))
    return found


@functools.lru_cache(maxsize=1024)
def _source_words(document_name: str | None, collection: str) -> str:
    return _words(f"{document_name or ''} {collection}")


def _subject(query: _Query, passage: Passage) -> frozenset[int]:
    """The key terms the passage's document or collection name does not hold (all of them when it holds every
    one): a passage of a product's manual need not name the product."""
    source = _source_words(passage.document_name, passage.collection)
    every = frozenset(range(len(query.needles)))
    return frozenset(i for i in every if query.needles[i] not in source) or every


class _Scope(NamedTuple):
    passages: Sequence[Passage]
    per_passage: Sequence[Analysed]
    passage: Passage

    def document_text(self) -> str:
        """Everything the passages of this passage's document say, lowercased: where a name may stand in a
        heading that a chunk boundary cut from this passage."""
        document = self.passage.document_id
        pairs = zip(self.passages, self.per_passage, strict=True)
        return " ".join(s.raw for p, a in pairs if p.document_id == document for s in a.sections)


def _names_stand(section: Section, names: Sequence[re.Pattern[str]], scope: _Scope) -> bool:
    """Whether every name the question spells like code stands in the section or elsewhere in its document's
    passages (a heading a chunk boundary cut off, a section speaking of what the one above names: requiring the
    section itself to hold the name cost facts on the dev split), and no other such name heads it."""
    heading = (section.heading or "").lower()
    if heading and IDENTIFIER.search(heading) and not any(name.search(heading) for name in names):
        return False  # headed by another name: ``max_queue_depth``, asked about ``queue_depth``
    if all(name.search(section.raw) for name in names):
        return True
    return all(name.search(scope.document_text()) for name in names)


def _quote(window: _Window, needles: Sequence[str], max_chars: int) -> str:
    """The quoted sentences in reading order (``…`` between two that do not follow each other), cut at a word
    after ``max_chars``; the heading first when it holds a key term: it names what the quote is about. A row looked
    up is quoted with its columns' names."""
    sentences = window.section.sentences
    if window.looked_up:
        return _shorten(_labelled(sentences[window.quoted[0]].text, window.section.heading), max_chars)
    parts: list[str] = []
    for position, n in enumerate(window.quoted):
        if position and n != window.quoted[position - 1] + 1:
            parts.append("…")
        parts.append(sentences[n].text)
    text = _shorten(" ".join(parts), max_chars)
    heading = window.section.heading
    if heading and any(needle in window.section.heading_words for needle in needles):
        return f"{heading}: {text}"
    return text


def _labelled(row: str, header: str | None) -> str:
    """``version: 11; codename: Bullseye; …`` when the table names its columns (as many as the row has cells)."""
    cells = row.split(_CELL)
    names = header.split(_CELL) if header else []
    if len(names) < len(cells):
        return row
    return "; ".join(
        f"{name.strip()}: {cell.strip()}" for name, cell in zip(names[: len(cells)], cells, strict=True) if cell.strip()
    )


def _shorten(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    cut = text.rfind(" ", 0, limit)
    return text[: cut if cut > 0 else limit].rstrip(",;:") + "…"


def extract_answer(
    question: str,
    passages: Sequence[Passage],
    *,
    max_passages: int = 3,
    max_sentence_chars: int = 600,
    min_coverage: float | None = None,
) -> list[str]:
    """The answer as the pieces it is streamed in: the cited quote of the window that answers (see the module's
    docstring), or one line saying nothing answers.

    ``max_passages`` bounds the passages cited for the same quote (overlapping chunks often hold the same
    sentences); ``max_sentence_chars`` bounds the quote (``…`` marks a cut); ``min_coverage`` replaces
    :data:`MIN_COVERAGE` (:func:`checked_answer` lowers it, its similarity check declining instead).
    """
    sizes = {"max_passages": max_passages, "max_sentence_chars": max_sentence_chars}
    return scored_answer(question, passages, MIN_COVERAGE if min_coverage is None else min_coverage, **sizes).pieces


class Scored(NamedTuple):
    pieces: list[str]
    coverage: float
    """The quoted window's (0 when none is)."""
    looked_up: bool = False
    """The quote is the table row the question names: its cells are the evidence."""


def scored_answer(
    question: str, passages: Sequence[Passage], least: float, *, max_passages: int, max_sentence_chars: int
) -> Scored:
    """:func:`extract_answer`'s pieces, with what the quote rests on."""
    per_passage = [analysed(passage.text) for passage in passages]
    if not any(a.sections for a in per_passage):
        return Scored([NOTHING_FOUND], 0.0)
    query = _query(question, passages, per_passage)
    if query is None:
        return Scored([NOTHING_MATCHES], 0.0)
    answering = [w for w in _windows(query, passages, per_passage) if w.coverage >= least]
    best = max(answering, key=lambda w: w.rank, default=None)
    if best is None:
        return Scored([NOTHING_MATCHES], 0.0)
    text = _quote(best, query.needles, max_sentence_chars)
    quoted = [best.section.sentences[i].words for i in best.quoted]
    citing = [
        p.citation for p, a in zip(passages, per_passage, strict=True) if all(q in a.sentence_words for q in quoted)
    ]
    marks = " " + "".join(f"[{c}]" for c in dict.fromkeys(citing[:max_passages]))
    return Scored([text, marks], best.coverage, best.looked_up)


Embed = Callable[[Sequence[str]], Awaitable["npt.NDArray[np.float32]"]]
"""Texts to unit vectors: the embedder Ragu has loaded (:func:`kappi.llm.registry.local_embed`)."""


async def checked_answer(
    question: str, passages: Sequence[Passage], embed: Embed, *, max_passages: int = 3, max_sentence_chars: int = 600
) -> list[str]:
    """:func:`extract_answer` down to :data:`CHECKED_MIN_COVERAGE`, its quote declined when its window's coverage
    plus its embedding's cosine to the question's is under :data:`MIN_EVIDENCE`: words a near miss shares with a
    passage do not make the passage say what it asks (a table row the question names by its cells is not checked:
    its cells are the evidence). When the embedder fails, the answer is the unchecked one at :data:`MIN_COVERAGE`."""
    sizes = {"max_passages": max_passages, "max_sentence_chars": max_sentence_chars}
    pieces, coverage, looked_up = await asyncio.to_thread(
        scored_answer, question, passages, CHECKED_MIN_COVERAGE, **sizes
    )
    if looked_up or pieces[0] in (NOTHING_FOUND, NOTHING_MATCHES):
        return pieces
    try:
        vectors = await embed([question, pieces[0]])
    except Exception:  # an embedder that fails leaves the answer to the words alone
        log.warning("extractive: the similarity check failed; answering on the words alone", exc_info=True)
        return await asyncio.to_thread(extract_answer, question, passages, **sizes)
    return pieces if coverage + float(vectors[0] @ vectors[1]) >= MIN_EVIDENCE else [NOTHING_MATCHES]


class ExtractiveProvider:
    """Streams :func:`checked_answer` (with an embedder) or :func:`extract_answer` for the last user message,
    then zero usage. The answer is worked out on a thread: reading the passages is CPU work the event loop answering
    other questions must not wait for."""

    name = "extractive"
    reads_system_prompt = False

    def __init__(self, *, max_passages: int = 3, max_sentence_chars: int = 600, embed: Embed | None = None) -> None:
        self._max_passages = max_passages
        self._max_sentence_chars = max_sentence_chars
        self._embed = embed

    def models(self) -> list[str]:
        return [EXTRACTIVE_MODEL]

    async def stream(self, request: LlmRequest) -> AsyncGenerator[LlmEvent, None]:
        question = next((m.content for m in reversed(request.messages) if m.role == "user"), "")
        sizes = {"max_passages": self._max_passages, "max_sentence_chars": self._max_sentence_chars}
        if self._embed is None:
            pieces = await asyncio.to_thread(extract_answer, question, request.passages, **sizes)
        else:
            pieces = await checked_answer(question, request.passages, self._embed, **sizes)
        for piece in pieces:
            yield Token(text=piece)
        yield Usage(input_tokens=0, output_tokens=0)

    async def aclose(self) -> None:
        """Nothing to release."""
