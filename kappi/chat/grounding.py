"""Answers that say only what their sources support: the relevance floor, citation checks and attribution.

Small local models neither cite nor decline reliably when told to, so the pipeline enforces both instead of asking:

- :func:`relevant` keeps only passages whose cosine reaches a floor per embedding model (the keyword leg's first
  hit a lower one) and a share of the best hit's, before any model sees them; with none left the answer is
  :data:`DECLINE` (``bench/relevance_floor.py``, calibrated on SciFact; the lower floor on the answer bench's dev
  split).
- :class:`Grounder` reads the model's output as it streams: a ``[n]`` naming no passage is removed (a marker
  split across tokens, ``[1`` then ``2]``, is held back until it is whole); with attribution on, each sentence is
  held until it ends and judged by one method, whether it cites or not (:meth:`Grounder._resting_on`). What it *claims*
  (:class:`Claim`) is its exact tokens (numbers, names spelled like code, quoted names, command-line options)
  and its own content words (those not merely echoing the question). A sentence claiming nothing new (a lead-in,
  an empty list item, the question restated, "I don't know") is held and shown only before one that stands. A
  claim stands on a passage when every exact token stands in it, and the *window* stating them (the paragraphs
  stating them and one either side) holds at least :data:`SUPPORT_THRESHOLD` of its own words and
  :data:`RELATION_THRESHOLD` of the question's key terms: a true number of another setting, stated far from what
  the question asks about, answers nothing. A sentence resting on no passage, or repeating the prompt, is dropped;
  one resting on another passage than it cites cites that one. When nothing stands, extractive's quote takes the
  answer's place (:func:`checked_quote`); over a lone "I don't know", only if it holds :data:`QUOTE_RELATION` of the
  question's key terms (:func:`answers_over_a_decline`). The thresholds were chosen on the answer bench's dev split only
  (``bench/grounding_replay.py`` replays a model's saved raw answers).
- The agent's instructions are confidential: a sentence repeating :data:`RUN_WORDS` of them in a row that no passage
  holds is withheld, cited or not, attributing or not (#26: a model asked for its instructions repeated them).
- Nothing dropped leaves the grounder in words, only why (:data:`~kappi.chat.models.DropReason`, #26).
"""

from __future__ import annotations

import itertools
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple, TypeVar

import msgspec

from kappi.chat.models import DropReason
from kappi.llm.base import Passage
from kappi.llm.extractive import NOTHING_FOUND, NOTHING_MATCHES, names_everything
from kappi.llm.prompt import ANSWER_RULES
from kappi.llm.words import (
    DIGITS_OF,
    STOP_WORDS,
    expects_value,
    identifiers,
    key_terms,
    named,
    question_stems,
    states_value,
)
from kappi.retrieval.service import RetrievedChunk

T = TypeVar("T")

DECLINE = "The documents you have access to do not answer this question."
"""The whole answer when no passage passes the floor: said from the retrieval scores, before any model runs."""
UNSUPPORTED_ONLY = (
    "I could not find an answer the documents support: the model's answer rested on none of the passages, so it "
    "is not shown."
)
"""The answer when every sentence the model wrote was dropped as resting on no passage."""

RELATIVE_FLOOR = 0.8
"""A passage's cosine must be at least this share of the best hit's (same embedding model), or its BM25 score this
share of the best BM25 score among the passages above the absolute floor (same model)."""
ABSOLUTE_FLOORS: Mapping[str, float] = {"all-MiniLM-L6-v2": 0.4}
"""Cosine floor per embedding model (``bench/relevance_floor.py`` on SciFact); models not listed have none."""
LEXICAL_FLOORS: Mapping[str, float] = {"all-MiniLM-L6-v2": 0.3}
"""Below its model's absolute floor, the keyword leg's first hit still passes down to this cosine: a table's rows or
a manual's option names match the question's words better than their embedding does (answer bench, dev split:
facts +2 of 148, no near miss more reaches a model); models not listed have none."""
SUPPORT_THRESHOLD = 0.5
"""Share of a claim's own content words its supporting window must hold (dev split)."""
RELATION_THRESHOLD = 0.5
"""Share of the question's key terms that window must hold, its labels counted (dev split): else it speaks of
something else."""
QUOTE_RELATION = 0.7
"""Share of the question's key terms a quote taking the place of a model's "I don't know" must hold (dev split, #27;
a follow-up about something the passages only border on was answered with them when it was dropped)."""
RUN_WORDS = 8
"""A sentence sharing this many words in a row with the agent's instructions, in a run no passage holds, is withheld.
Not fewer: a decline repeats seven of the default system prompt's ("the sources do not contain the answer")."""

_MARKER = re.compile(r"\[(\d{1,4}(?:\s*,\s*\d{1,4})*)\]")
_PARTIAL_MARKER = re.compile(r"\[[\d,\s]{0,24}$")
"""A marker still being written at the end of the text: held back until it closes or cannot be one."""
_SENTENCE_END = re.compile(r"(?<=[.!?])((?:[ \t]*\[[\d,\s]*\])*)([ \t]+|\n+)(?=[^\s\[])|(\n+)(?=\S)")
"""A sentence's end: its terminator, any markers after it ("per year. [2]"), then a space or a line break before
the next sentence's first character (so a marker that may still follow is waited for); or a line break."""
_CITED_NUMBERS = re.compile(r"\[(\d{1,4})\]")
_PUNCTUATION_AFTER = frozenset(".,;:!?)")
_DECLINING = re.compile(
    r"\b(?:i (?:do not|don't|cannot|can't) (?:know|find|answer|tell)|not (?:mentioned|stated|provided|specified)"
    r"|(?:sources?|documents?|context|passages?) (?:do(?:es)? not|don't|doesn't) (?:say|mention|contain|answer))",
    re.IGNORECASE,
)


def relevant(
    chunks: Sequence[RetrievedChunk],
    models: Mapping[tuple[str, str], str],
    *,
    question: str = "",
    relative: float = RELATIVE_FLOOR,
    absolute: Mapping[str, float] = ABSOLUTE_FLOORS,
    lexical: Mapping[str, float] = LEXICAL_FLOORS,
) -> list[RetrievedChunk]:
    """The chunks that pass both floors, in retrieval's order: the absolute one on their cosine (the keyword leg's
    first hit on the lower :data:`LEXICAL_FLOORS`, and on none when it holds every name and number ``question``
    gives: :func:`~kappi.llm.extractive.names_everything`), the relative one on their cosine *or* their keyword evidence
    (hybrid retrieval finds passages whose words match the question better than their embedding does). ``models``:
    each collection's embedding model, by ``(vector_provider, collection)``; cosines of different models are not
    comparable, so each model's are held to its own best hit."""
    scored = [(c, models.get((c.vector_provider, c.collection), ""), 1.0 - c.distance, _bm25(c)) for c in chunks]
    above = [s for s in scored if s[2] >= _floor(s[0], s[1], absolute, lexical, question)]
    best_cosine: dict[str, float] = {}
    best_bm25: dict[str, float] = {}
    for _, model, similarity, bm25 in above:
        best_cosine[model] = max(best_cosine.get(model, -1.0), similarity)
        best_bm25[model] = max(best_bm25.get(model, 0.0), bm25)
    return [
        c
        for c, model, similarity, bm25 in above
        if similarity >= relative * best_cosine[model] or (best_bm25[model] > 0 and bm25 >= relative * best_bm25[model])
    ]


def _floor(
    chunk: RetrievedChunk, model: str, absolute: Mapping[str, float], lexical: Mapping[str, float], question: str
) -> float:
    floor = absolute.get(model, -1.0)
    first_by_keywords = chunk.legs is not None and chunk.legs.lexical_rank == 1
    if not first_by_keywords:
        return floor
    if question and names_everything(question, chunk.text, chunk.document_name, chunk.collection):
        return -1.0
    return min(floor, lexical.get(model, floor))


def _bm25(chunk: RetrievedChunk) -> float:
    return (chunk.legs.lexical_score or 0.0) if chunk.legs is not None else 0.0


def joined_neighbours(chunks: Sequence[RetrievedChunk]) -> list[RetrievedChunk]:
    """Chunks of one document that follow each other, joined into one passage at the first one's place (their
    overlap once, by character offsets): a chunk boundary often cuts a section from its heading. Only chunks of the
    same collection and document are joined; parent/child passages (whose context is their parent) are left."""
    runs: dict[tuple[str, str, str], list[int]] = {}
    for n, chunk in enumerate(chunks):
        placed = chunk.chunk_index is not None and chunk.char_start is not None and chunk.char_end is not None
        if placed and chunk.context == chunk.text:
            runs.setdefault((chunk.vector_provider, chunk.collection, chunk.document_id), []).append(n)
    joined: list[RetrievedChunk | None] = list(chunks)
    for members in runs.values():
        for group in _consecutive(sorted(members, key=lambda n: chunks[n].chunk_index or 0), chunks):
            if len(group) > 1:
                for n in group:
                    joined[n] = None
                joined[min(group)] = _joined([chunks[n] for n in group])
    return [chunk for chunk in joined if chunk is not None]


def _consecutive(members: Sequence[int], chunks: Sequence[RetrievedChunk]) -> list[list[int]]:
    """``members`` (sorted by chunk index) in runs of chunks that follow each other."""
    groups: list[list[int]] = []
    for n in members:
        if groups and (chunks[n].chunk_index or 0) == (chunks[groups[-1][-1]].chunk_index or 0) + 1:
            groups[-1].append(n)
        else:
            groups.append([n])
    return groups


def _source_span(chunk: RetrievedChunk) -> str:
    """The chunk's text less the headings its chunker put above it (``fixed``'s ``repeat_headings``,
    ``structure``): the text ends with its source span, ``char_end - char_start`` characters."""
    length = (chunk.char_end or 0) - (chunk.char_start or 0)
    return chunk.text[max(len(chunk.text) - length, 0) :] if length > 0 else chunk.text


def _joined(run: Sequence[RetrievedChunk]) -> RetrievedChunk:
    """The run's texts as one: the first whole (its headings name the section), each next one's source span
    from where the text so far ends (the overlap once, no heading repeated)."""
    text, end = run[0].text, run[0].char_end or 0
    for chunk in run[1:]:
        start, body = chunk.char_start or 0, _source_span(chunk)
        text += body[end - start :] if start < end else "\n\n" + body
        end = max(end, chunk.char_end or 0)
    best = min(run, key=lambda c: c.distance)
    pages = [p for c in run for p in (c.page_start, c.page_end) if p is not None]
    return msgspec.structs.replace(
        best,
        text=text,
        context=text,
        chunk_index=run[0].chunk_index,
        char_start=run[0].char_start,
        char_end=end,
        page_start=min(pages) if pages else None,
        page_end=max(pages) if pages else None,
        score=max(c.score for c in run),
        ocr=any(c.ocr for c in run),
    )


_FRAMING_TEXT = "accord bas base context information provid document source passage mention answer yes"
_FRAMING = frozenset(_FRAMING_TEXT.split())
"""Stems of how models frame an answer ("According to the information provided"): no evidence either way."""
_NUMBER = re.compile(r"(?<![\w.])\d+(?:[.,]\d+)*")
_NUMBER_WORD = re.compile(rf"\b(?:{'|'.join(DIGITS_OF)})\b", re.IGNORECASE)
_ITEM = re.compile(r"^\s*(?:[-*\u2022]|\d{1,2}[.)])\s+|^\s*\d{1,2}[.)]\s*$|(?<=:)\s*\d{1,2}[.)]\s*$")
"""A list item's bullet or number at a sentence's start, a lone item number, or one after a lead-in ("steps: 1.")."""
_ITEM_NUMBER = re.compile(r"\s*\d{1,2}[.)]")
"""What the sentence splitter would end at its full stop, but only numbers a list item."""
_QUOTED = re.compile(r"[\"\u201c`]([^\"\u201c\u201d`\n]{2,60})[\"\u201d`]|(?<!\w)'([^'\n]{2,60})'(?!\w)")
_OPTION = re.compile(r"(?<![\w-])--?[A-Za-z][\w-]*")
_PARAGRAPH = re.compile(r"\n\s*\n")
_STRAIGHT = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"'})
_MAX_SPANS = 64
"""Combinations of paragraphs tried for a claim's exact tokens (a few tokens, a few paragraphs each)."""


def _numbers(text: str) -> set[str]:
    """The numbers a text states ("5432", "0.5", "three" as "3"), citation markers left out."""
    text = _NUMBER_WORD.sub(lambda m: DIGITS_OF[m.group().lower()], _CITED_NUMBERS.sub(" ", text))
    return {n.rstrip(".,") for n in _NUMBER.findall(text)}


def _words(text: str) -> str:
    """The text's words, lowercased, each after a space: a stem is found as ``" " + stem``."""
    return " " + " ".join(re.findall(r"\w+", text.lower()))


def _content_stems(text: str) -> list[str]:
    """The stems of a text's words that are not stop words or framing, numbers (and number words) left out."""
    return [
        s
        for s in question_stems(text)
        if s not in STOP_WORDS and s not in _FRAMING and not s.isdigit() and s not in DIGITS_OF
    ]


def _exact(text: str) -> set[tuple[str, str]]:
    """What must stand in a passage word for word: numbers, names spelled like code, quoted names, options."""
    quoted = {(m.group(1) or m.group(2)).strip().lower() for m in _QUOTED.finditer(text)}
    return (
        {("number", n) for n in _numbers(text)}
        | {("name", n) for n in identifiers(text)}
        | {("text", q) for q in quoted if q}
        | {("text", o.lower()) for o in _OPTION.findall(text)}
    )


@dataclass(frozen=True)
class Claim:
    """What a sentence states: its content stems (``own``: those the question does not hold) and exact tokens."""

    own: tuple[str, ...]
    exact: frozenset[tuple[str, str]]
    words: str
    new: bool
    """Whether it says anything the question does not: a lead-in, an empty item or the question restated do not."""


def claim_of(sentence: str, question: str) -> Claim:
    """The claim of one sentence of an answer to ``question``."""
    text = _ITEM.sub(" ", unicodedata.normalize("NFKC", _CITED_NUMBERS.sub(" ", sentence)).translate(_STRAIGHT)).strip()
    asked = set(question_stems(question))
    own = tuple(s for s in _content_stems(text) if s not in asked)
    exact = frozenset(_exact(text))
    new = bool(own or exact - _exact(question)) and not text.endswith(":")
    return Claim(own, exact, _words(text), new)


class _Text(NamedTuple):
    """A paragraph of a passage (or its labels) as claims are checked against it."""

    lower: str
    words: str
    numbers: frozenset[str]


def _text(text: str) -> _Text:
    lower = unicodedata.normalize("NFKC", text).translate(_STRAIGHT).lower()
    return _Text(lower, _words(lower), frozenset(_numbers(lower)))


@dataclass(frozen=True)
class _Read:
    """A passage read once: its paragraphs and labels naming its source (its document's and collection's names;
    not the collection's instruction, whose words would relate every passage alike to a question)."""

    passage: Passage
    paragraphs: tuple[_Text, ...]
    labels: _Text

    @classmethod
    def of(cls, passage: Passage) -> _Read:
        names = f"{passage.document_name or ''} {passage.collection}"
        paragraphs = tuple(_text(p) for p in _PARAGRAPH.split(passage.text) if p.strip())
        return cls(passage, paragraphs, _text(re.sub(r"[\W_]+", " ", names)))


def _stands(token: tuple[str, str], text: _Text, passage: Passage) -> bool:
    kind, value = token
    if kind == "number":
        return value in text.numbers
    if kind == "name":
        return named([_local_name(value, passage)])[0].search(text.lower) is not None
    return value in text.lower


def _local_name(name: str, passage: Passage) -> str:
    """The name as the passage would spell it: a dotted name's leading parts that are its document's or
    collection's own name left off (a module's function in that module's manual goes by its short name)."""
    source = " " + re.sub(r"[\W_]+", " ", f"{passage.document_name or ''} {passage.collection}".lower()) + " "
    parts = name.split(".")
    while len(parts) > 1 and f" {parts[0]} " in source:
        parts = parts[1:]
    return ".".join(parts)


def _share(stems: Sequence[str], words: str) -> float:
    return sum(f" {s}" in words for s in stems) / len(stems) if stems else 1.0


def _names_source(token: tuple[str, str], claim: Claim, read: _Read) -> bool:
    """Whether the token names the passage's source: a name its labels hold, or a number the claim states only
    after a word of them ("the Acme 4 manual")."""
    if not _stands(token, read.labels, read.passage):
        return False
    before = re.findall(rf"(\S+) {re.escape(token[1])}(?= |$)", claim.words)
    return token[0] != "number" or (bool(before) and all(f" {w} " in read.labels.words + " " for w in before))


def _windows(claim: Claim, read: _Read) -> Iterable[str]:
    """The words of each window of the passage that states every exact token of the claim (none when one
    stands nowhere in it): the paragraphs stating them and one either side (a name above its description, a
    description below its name); the whole passage when its labels hold every exact token."""
    places = []
    for token in claim.exact:
        if not _names_source(token, claim, read):
            places.append([n for n, text in enumerate(read.paragraphs) if _stands(token, text, read.passage)])
    words = [text.words for text in read.paragraphs]
    for chosen in itertools.islice(itertools.product(*places), _MAX_SPANS):
        span = words[max(min(chosen) - 1, 0) : max(chosen) + 2] if chosen else words
        yield "".join(span) + read.labels.words


def _supported(claim: Claim, terms: Sequence[str], reads: Sequence[_Read], relation: float) -> tuple[int | None, float]:
    """The passage whose window holds ``relation`` of the question's key terms and most of the claim's own stems."""
    best: tuple[int | None, float] = (None, 0.0)
    for read in reads:
        for window in _windows(claim, read):
            share = _share(claim.own, window)
            if _share(terms, window) >= relation and share > best[1]:
                best = (read.passage.citation, share)
    return best


def _bare(text: str) -> str:
    return " ".join(re.findall(r"\w+", _CITED_NUMBERS.sub(" ", text).lower()))


def runs(text: str, length: int = RUN_WORDS) -> set[tuple[str, ...]]:
    """Every ``length`` words in a row of the text, lower-cased, citation markers and punctuation left out."""
    words = _bare(text).split()
    return {tuple(words[at : at + length]) for at in range(len(words) - length + 1)}


def echoes(sentence: str, prompt: str) -> bool:
    """Whether the sentence repeats the prompt's own words (its rules, "Question: ..."), not an answer."""
    bare = _bare(sentence)
    return bare.startswith("question ") or (len(bare.split()) >= 5 and bare in _bare(prompt))


def declines(sentence: str) -> bool:
    """Whether the sentence says the sources do not answer (kept without a citation: it claims nothing)."""
    return bool(_DECLINING.search(sentence))


@dataclass
class Grounder:
    """Checks one answer's text as it streams; :meth:`feed` each token, then :meth:`finish`.

    Args:
        passages: What the model was given, numbered as it was told to cite them.
        question: The user's question (a sentence's words that only echo it are no evidence).
        attribute: Judge each whole sentence's claim against the passages (off for the extractive provider, whose
            every line is a cited quotation).
        instructions: What the user may not read (system prompt, context template, collections' instructions):
            with it, sentences are held until they end even unattributed, so none is shown before it is checked.
    """

    passages: Sequence[Passage]
    question: str
    attribute: bool = True
    instructions: str = field(default="", repr=False)  # confidential: in no repr that may reach a log
    threshold: float = SUPPORT_THRESHOLD
    relation: float = RELATION_THRESHOLD
    boilerplate: str = ANSWER_RULES
    """The prompt's answering rules: a sentence repeating them, or the question, is dropped."""
    cited: list[int] = field(default_factory=list)
    """Citation numbers the answer cites, in the order it first cites them."""
    dropped: list[DropReason] = field(default_factory=list)
    """Why each sentence left out was, in order; never its words (#26)."""
    kept_sentences: int = 0
    _pending: str = ""
    _held: str = ""
    """What claims nothing, held while nothing else stands: when nothing does, a quote may take its place."""
    _held_declines: bool = False

    def __post_init__(self) -> None:
        self._valid = {p.citation for p in self.passages}
        self._reads = {p.citation: _Read.of(p) for p in self.passages} if self.attribute else {}
        self._terms = key_terms(self.question)
        confidential = runs(self.instructions) if self.instructions else set()
        for passage in self.passages if confidential else ():
            confidential -= runs(passage.text)  # what a passage says, its reader may read: no secret
        self._confidential = confidential
        self._by_sentence = self.attribute or bool(confidential)

    def feed(self, text: str) -> str:
        """What of the answer can be shown now: checked markers, and whole sentences only when judging them."""
        self._pending += text
        if self._by_sentence:
            return self._complete_sentences(final=False)
        return self._checked_prefix(final=False)

    def finish(self) -> str:
        """The rest of the answer, once the model has finished."""
        out = self._complete_sentences(final=True) if self._by_sentence else self._checked_prefix(final=True)
        if self.only_declined:
            return out + self._held
        if self.rested_on_nothing:
            return out + UNSUPPORTED_ONLY
        return out

    @property
    def rested_on_nothing(self) -> bool:
        """Every sentence the model wrote was dropped or claimed nothing: nothing of its answer was shown."""
        nothing = self._by_sentence and self.kept_sentences == 0 and not self._held_declines
        return nothing and bool(self.dropped or self._held)

    @property
    def only_declined(self) -> bool:
        """All that stands of the answer is the model saying it does not know (held until :meth:`finish`)."""
        return self.attribute and self.kept_sentences == 0 and self._held_declines

    def _checked_prefix(self, *, final: bool) -> str:
        """The pending text with its markers checked, minus a trailing marker still being written."""
        text = self._pending
        hold = "" if final else _held_tail(text)
        self._pending = hold
        checked, valid = self._check_markers(text[: len(text) - len(hold)])
        self._cite(valid)
        return checked

    def _check_markers(self, text: str) -> tuple[str, list[int]]:
        """``text`` with the numbers of no passage removed from its markers, and the valid numbers it cites."""
        pieces: list[str] = []
        cited: list[int] = []
        at = 0
        for match in _MARKER.finditer(text):
            before = text[at : match.start()]
            valid = [int(n) for n in re.split(r"\s*,\s*", match.group(1)) if int(n) in self._valid]
            if valid:
                pieces.append(before + "".join(f"[{n}]" for n in valid))
                cited += valid
            else:
                after = text[match.end() : match.end() + 1]
                closes = not after or after in _PUNCTUATION_AFTER or after.isspace()  # no space left doubled
                pieces.append(before.rstrip(" ") if closes else before)
            at = match.end()
        pieces.append(text[at:])
        return "".join(pieces), cited

    def _cite(self, numbers: Iterable[int]) -> None:
        for n in numbers:
            if n not in self.cited:
                self.cited.append(n)

    def _complete_sentences(self, *, final: bool) -> str:
        pieces = []
        at = 0
        while (end := _SENTENCE_END.search(self._pending, at)) is not None:
            sentence = self._pending[: end.start()] + (end.group(1) or "")
            if _ITEM_NUMBER.fullmatch(sentence):
                at = end.end()  # "1. Collect it": an item's number ends no sentence
                continue
            at = 0
            gap = end.group(2) if end.group(2) is not None else end.group(3)
            self._pending = self._pending[end.end() :]
            pieces.append(self._screened(sentence, gap))
        if final and self._pending:
            pieces.append(self._screened(self._pending, ""))
            self._pending = ""
        return "".join(pieces)

    def _screened(self, sentence: str, gap: str) -> str:
        """One whole sentence, withheld if it repeats the instructions (whatever it cites or rests on), else
        grounded (unattributed: its markers checked)."""
        if not self._confidential.isdisjoint(runs(sentence)):
            self.dropped.append("no_source")  # the instructions are no source the user may read
            return ""
        if self.attribute:
            return self._grounded(sentence, gap)
        checked, valid = self._check_markers(sentence)
        self._cite(valid)
        self.kept_sentences += bool(checked.strip())
        return checked + gap

    def _grounded(self, sentence: str, gap: str) -> str:
        """One whole sentence: held when it claims nothing, kept citing the passage its claim rests on, or
        dropped."""
        if (self.boilerplate and echoes(sentence, self.boilerplate)) or echoes(sentence, self.question):
            self.dropped.append("repeats_prompt")
            return ""
        checked, valid = self._check_markers(sentence)
        if not checked.strip():
            return gap if checked or gap.count("\n") else ""
        claim = claim_of(checked, self.question)
        if declines(checked) or not claim.new:
            return self._claims_nothing(checked + gap, valid, declining=declines(checked))
        citation = self._resting_on(claim, valid)
        if citation is None:
            self.dropped.append("no_source")
            return ""
        if citation not in valid:
            checked = _recited(checked, citation)
        self._cite([citation])
        return self._kept(checked + gap)

    def _claims_nothing(self, text: str, valid: list[int], *, declining: bool) -> str:
        """A sentence that claims nothing: held while nothing stands, shown as written (uncited) after."""
        if self.kept_sentences == 0:
            self._held += text
            self._held_declines = self._held_declines or declining
            return ""
        return _MARKER.sub("", text) if valid else text

    def _resting_on(self, claim: Claim, cited: Sequence[int]) -> int | None:
        """The passage the claim rests on: one it cites if any does, else the best other one."""
        for chosen in ([self._reads[n] for n in cited], list(self._reads.values())):
            citation, share = _supported(claim, self._terms, chosen, self.relation)
            if citation is not None and share >= self.threshold:
                return citation
        return None

    def _kept(self, text: str) -> str:
        """A sentence that stands, after what was held before it ("I don't know exactly. It is ...")."""
        self.kept_sentences += 1
        out, self._held, self._held_declines = _MARKER.sub("", self._held) + text, "", False
        return out


def checked_quote(question: str, passages: Sequence[Passage], pieces: Sequence[str]) -> tuple[str, list[int]] | None:
    """Extractive's answer (``pieces``) over the passages a model answers from, its markers checked as any answer's
    are, and the citations it carries; ``None`` when extractive found nothing that answers. The one quote a model's
    answer has: shown while the model reads, after its sentences, or in their place when none of them stands (on the
    answer bench's dev split, holding the quote to a further test there when the model's answer rested on nothing
    refused table rows extractive alone answered, and kept no near miss from an answer)."""
    if not pieces or pieces[0] in (NOTHING_FOUND, NOTHING_MATCHES):
        return None
    checked = Grounder(passages, question, attribute=False)
    text = checked.feed("".join(pieces)) + checked.finish()
    return (text, checked.cited) if text.strip() and checked.cited else None


def answers_over_a_decline(question: str, passages: Sequence[Passage], quote: str, cited: Sequence[int]) -> bool:
    """Whether the quote may take the place of a model's "I don't know". The model may be right: a section holding
    some of the question's terms need not answer it, so the quote must hold :data:`QUOTE_RELATION` of the question's
    key terms (its cited passages' labels counted) and, for a question asking for a value, state one."""
    if expects_value(question) and not states_value(_CITED_NUMBERS.sub(" ", quote)):
        return False
    labels = "".join(_Read.of(p).labels.words for p in passages if p.citation in cited)
    return _share(key_terms(question), _words(quote) + labels) >= QUOTE_RELATION


def _recited(sentence: str, citation: int) -> str:
    """The sentence citing ``citation`` in place of what it cited (at its first marker), or after it."""
    first = _MARKER.search(sentence)
    if first is None:
        stripped = sentence.rstrip()
        return f"{stripped} [{citation}]{sentence[len(stripped) :]}"
    return sentence[: first.start()] + f"[{citation}]" + _MARKER.sub("", sentence[first.end() :])


def _held_tail(text: str) -> str:
    """The end of ``text`` that may still become a marker: ``[``, ``[1``, ``[1, 2``."""
    match = _PARTIAL_MARKER.search(text)
    return "" if match is None else match.group(0)


def split_citations(given: Sequence[T], numbers: Sequence[int], cited: Sequence[int]) -> tuple[list[T], list[T]]:
    """``given`` split into what the answer cites (in citation order) and the rest (as retrieved)."""
    chosen = set(cited)
    return (
        [item for n, item in zip(numbers, given, strict=True) if n in chosen],
        [item for n, item in zip(numbers, given, strict=True) if n not in chosen],
    )
