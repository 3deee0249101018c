"""Answers that say only what their sources support: the relevance floor, citation checks and attribution.

Small local models (Qwen2.5 0.5B/1.5B, SmolLM2) neither cite nor decline when told to, so the pipeline enforces
both instead of asking:

- :func:`relevant` keeps only passages close enough to the question, before any model sees them: each passage's
  cosine similarity (``1 - distance``, whatever retrieval scored it with) must reach an absolute floor per
  embedding model and a share of the best hit's. With nothing left, the answer is :data:`DECLINE`, no model
  called (calibrated on SciFact: ``bench/relevance_floor.py``).
- :class:`Grounder` reads the model's output as it streams: a ``[n]`` naming no passage is removed (a marker
  split across tokens, ``[1`` then ``2]``, is held back until it is whole); with attribution on, each sentence is
  held until it ends and then given the citation of the passage it rests on when it cites none (lexical overlap
  of its own words with the passage's, :func:`support`; every number it states must stand in one sentence of
  that passage with the claim's subject), and a sentence resting on no passage, or repeating the prompt, is
  dropped. Decided on SmolLM2-135M's answers to PostgreSQL questions, which invent numbers and echo their rules.
- The agent's instructions are confidential: a sentence repeating :data:`RUN_WORDS` of them in a row that no passage
  holds is withheld, cited or not, attributing or not (#26: a model asked for its instructions repeated them).
- Nothing dropped leaves the grounder in words: only why (:data:`~kappi.chat.models.DropReason`), since a dropped
  sentence rests on nothing the user may read (it was returned word for word once, system prompt included, #26).
- The answer's ``citations`` are then the passages it cites; the others are ``also_retrieved``.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import msgspec

from kappi.chat.models import DropReason
from kappi.llm.base import Passage
from kappi.llm.extractive import NOTHING_FOUND, NOTHING_MATCHES, analysed, extract_answer
from kappi.llm.prompt import ANSWER_RULES
from kappi.llm.words import STOP_WORDS, expects_value, identifiers, named, question_stems, states_value
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
SUPPORT_THRESHOLD = 0.5
"""Share of a sentence's own content words that a passage must contain for the sentence to rest on it."""
RUN_WORDS = 8
"""A sentence sharing this many words in a row with the agent's instructions, in a run no passage it was given
holds, repeats what the user may not read and is withheld. Eight, not fewer: a decline repeats seven of the default
system prompt's ("the sources do not contain the answer"), and an answer may name the agent's subject as its prompt
does ("the employee handbook of ACME"); a sentence shorter than eight words is not judged by this rule."""

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


def cosine(chunk: RetrievedChunk) -> float:
    """The chunk's cosine similarity to the question, whatever its ``score`` (fused in hybrid retrieval) is."""
    return 1.0 - chunk.distance


def relevant(
    chunks: Sequence[RetrievedChunk],
    models: Mapping[tuple[str, str], str],
    *,
    relative: float = RELATIVE_FLOOR,
    absolute: Mapping[str, float] = ABSOLUTE_FLOORS,
) -> list[RetrievedChunk]:
    """The chunks that pass both floors, in retrieval's order.

    A chunk passes the absolute floor on its cosine, and the relative one on its cosine *or* on its keyword
    evidence: hybrid retrieval finds passages whose words match the question better than their embedding does
    (``port (integer): The TCP port the server listens on; 5432 by default``, cosine 0.40 against the best hit's
    0.53, first in the keyword leg), and a floor on cosine alone dropped them.

    Args:
        chunks: What retrieval found.
        models: Each collection's embedding model, by ``(vector_provider, collection)``: cosines of different
            models are not comparable, so each model's chunks are held to their own best hit and floor.
        relative: The share of the best hit's cosine (or BM25 score) a chunk must reach.
        absolute: The cosine floor per model.
    """
    scored = [(c, models.get((c.vector_provider, c.collection), ""), cosine(c), _bm25(c)) for c in chunks]
    above = [s for s in scored if s[2] >= absolute.get(s[1], -1.0)]
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


def _bm25(chunk: RetrievedChunk) -> float:
    return (chunk.legs.lexical_score or 0.0) if chunk.legs is not None else 0.0


def joined_neighbours(chunks: Sequence[RetrievedChunk]) -> list[RetrievedChunk]:
    """Chunks of one document that follow each other, joined into one passage at the first one's place.

    A chunk boundary often cuts a section from its heading: ``ssl_cert_file (string)`` and its description end
    one chunk, "The default is server.crt." opens the next. Both found, they read as one text again (the overlap
    chunks share is kept once, by their character offsets). Only chunks of the same collection and document
    are joined, so no passage gains text from anywhere its chunks did not come from; parent/child passages (whose
    context is their parent) are left as they are.
    """
    runs: dict[tuple[str, str, str], list[int]] = {}
    for n, chunk in enumerate(chunks):
        placed = chunk.chunk_index is not None and chunk.char_start is not None and chunk.char_end is not None
        if placed and chunk.context == chunk.text:
            runs.setdefault((chunk.vector_provider, chunk.collection, chunk.document_id), []).append(n)
    joined: list[RetrievedChunk | None] = list(chunks)
    for members in runs.values():
        if len(members) == 1:
            continue  # alone from its document: left as it is
        members.sort(key=lambda n: chunks[n].chunk_index or 0)
        groups = [[members[0]]]
        for n in members[1:]:
            if (chunks[n].chunk_index or 0) == (chunks[groups[-1][-1]].chunk_index or 0) + 1:
                groups[-1].append(n)
            else:
                groups.append([n])
        for group in groups:
            if len(group) > 1:
                for n in group:
                    joined[n] = None
                joined[min(group)] = _joined([chunks[n] for n in group])
    return [chunk for chunk in joined if chunk is not None]


def _source_span(chunk: RetrievedChunk) -> str:
    """The chunk's text less the headings its chunker put above it (``fixed``'s ``repeat_headings``,
    ``structure``): the text ends with its source span, ``char_end - char_start`` characters."""
    length = (chunk.char_end or 0) - (chunk.char_start or 0)
    return chunk.text[max(len(chunk.text) - length, 0) :] if length > 0 else chunk.text


def _joined(run: Sequence[RetrievedChunk]) -> RetrievedChunk:
    """The run's texts as one: the first whole (its headings name the section), each next one's source span
    from where the text so far ends (the overlap once, no heading repeated)."""
    if len(run) == 1:
        return run[0]
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


_FRAMING_TEXT = "accord bas base context information provid document source passage mention"
_FRAMING = frozenset(_FRAMING_TEXT.split())
"""Stems of how small models frame an answer ("According to the information provided in the context, ..."):
they say where a claim comes from, not what it is, so they are no evidence either way."""


_ATTRIBUTION = re.compile(
    r"^\W*(?:according to|based on|as (?:stated|described|mentioned|explained) in)\b[^,]{0,120},\s*", re.I
)
"""A sentence's opening that says where its claim comes from ("According to the PostgreSQL 15 manual, ..."): it
claims nothing, and its numbers (the manual's version) are no claim a passage must state."""


def _claim(sentence: str) -> str:
    """The sentence without its attribution (:data:`_ATTRIBUTION`)."""
    return _ATTRIBUTION.sub("", sentence, count=1)


def _content_stems(text: str) -> list[str]:
    """The stems of a text's words that are not stop words or framing, numbers (and number words) left out
    (:func:`_numbers` has them)."""
    return [
        s
        for s in question_stems(text)
        if s not in STOP_WORDS and s not in _FRAMING and not s.isdigit() and s not in _NUMBER_WORDS
    ]


_NUMBER = re.compile(r"(?<![\w.])\d+(?:[.,]\d+)*")
_PASSAGE_SENTENCES = re.compile(r"(?<=[.!?])\s+|\n+")


_NUMBER_WORDS_TEXT = """
    zero _ two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen
    eighteen nineteen twenty
"""
_NUMBER_WORDS = {word: str(n) for n, word in enumerate(_NUMBER_WORDS_TEXT.split()) if word != "_"}
"""Number words read as their digits; not "one", which is a pronoun as often ("any one time")."""
_NUMBER_WORD = re.compile(rf"\b(?:{'|'.join(_NUMBER_WORDS)})\b", re.IGNORECASE)


def _numbers(text: str) -> set[str]:
    """The numbers a text states ("5432", "0.5", "25", "three" as "3"), citation markers and list numbering left
    out: a model that writes "3" for a manual's "The default is three." states what the manual does."""
    text = _CITED_NUMBERS.sub(" ", text)
    text = re.sub(r"^\s*\d+[.)]\s", " ", text)
    text = _NUMBER_WORD.sub(lambda m: _NUMBER_WORDS[m.group().lower()], text)
    return {n.rstrip(".,") for n in _NUMBER.findall(text)}


def _passage_words(text: str) -> str:
    return " " + " ".join(re.findall(r"\w+", text.lower()))


def _states_numbers(passage: str, numbers: set[str], stems: Sequence[str]) -> bool:
    """Whether the passage states each of these numbers in a sentence with one of the claim's words, and most of
    the claim's words stand in those sentences and the two before the first, or in their section under a heading:
    a number found elsewhere in a passage full of numbers is no evidence (small models invent "0" and "25"), but a
    manual states a setting's default sentences below its name (``bgwriter_delay (integer)`` ... "The default is
    200 milliseconds"), and an answer's sentence may join two facts the passage states in two ("25 vacation days
    per year, and a note after three days of sick leave")."""
    sentences = [s for s in _PASSAGE_SENTENCES.split(passage) if s.strip()]
    words = [_passage_words(sentence) for sentence in sentences]
    stating = [
        [at for at, sentence in enumerate(sentences) if number in _numbers(sentence) and _holds_any(words[at], stems)]
        for number in numbers
    ]
    if all(stating):
        for chosen in itertools.islice(itertools.product(*stating), _MAX_NUMBER_SPANS):
            window = "".join(words[max(0, min(chosen) - 2) : max(chosen) + 1])
            if _holds_most(window, stems):
                return True
    for section in analysed(passage).sections:
        if section.heading is None:
            continue
        scope = section.heading_words + "".join(t.words for t in section.sentences)
        if not _holds_most(scope, stems):
            continue
        if all(
            any(number in _numbers(t.text) and _holds_any(t.words, stems) for t in section.sentences)
            for number in numbers
        ):
            return True
    return False


_MAX_NUMBER_SPANS = 64
"""Combinations of stating sentences tried for an answer sentence's numbers (a few numbers, a few sentences each)."""


def _holds_any(words: str, stems: Sequence[str]) -> bool:
    return any(f" {s}" in words for s in stems)


def _holds_most(words: str, stems: Sequence[str]) -> bool:
    return sum(f" {s}" in words for s in stems) * 2 > len(stems)


def support(sentence: str, question: str, passages: Sequence[Passage]) -> tuple[int | None, float]:
    """The passage a sentence rests on and how well, from 0 to 1: the share of its own content words (those not
    merely echoing the question) that the passage contains, and 0 unless one sentence of the passage states
    each number the sentence states and the passage names each name it spells like code (``sqlite3.connect``).
    ``(None, 0.0)`` when no passage has any of it.

    A sentence that only restates the question's words is judged on those words instead.
    """
    claimed = _claim(sentence)
    stems = _content_stems(claimed)
    numbers = _numbers(claimed)
    asked = set(question_stems(question))
    own = [s for s in stems if s not in asked] or stems
    if not own and not numbers:
        return None, 0.0
    claim = list(stems or [s for s in asked if not s.isdigit()])
    if numbers:  # "The default is three." states a number about what the question names, not about anything
        claim += [s for name in identifiers(question) for s in question_stems(name) if s not in claim]
    spelled = identifiers(claimed)
    best: tuple[int | None, float] = (None, 0.0)
    for passage in passages:
        if numbers and not _states_numbers(passage.text, numbers, claim):
            continue
        names = named(names_in(spelled, passage)) if spelled else []
        if names and not _names_stand(names, passage, passages):
            continue  # "The default idle_in_transaction_session_timeout is ..." rests on no passage without it
        words = _passage_words(passage.text)
        share = sum(f" {s}" in words for s in own) / len(own) if own else 1.0
        if share > best[1]:
            best = (passage.citation, share)
    return best


def names_in(names: Sequence[str], passage: Passage) -> list[str]:
    """The names as the passage would spell them: a dotted name's leading parts that are its document's or
    collection's own name left off (``zlib.compress`` in zlib's manual is ``compress()`` there), and a name its
    document's name holds (``spec.html`` in ``shared-mime-info-spec.html``) left out: it names the source."""
    document = (passage.document_name or "").lower()
    source = " " + _NOT_WORD.sub(" ", f"{document} {passage.collection.lower()}") + " "
    local = []
    for name in names:
        if name in document:
            continue
        parts = name.split(".")
        while len(parts) > 1 and f" {parts[0]} " in source:
            parts = parts[1:]
        local.append(".".join(parts))
    return local


_NOT_WORD = re.compile(r"[^\w]+")


def _names_stand(names: Sequence[re.Pattern[str]], passage: Passage, passages: Sequence[Passage]) -> bool:
    """Whether the passage names every one of ``names``; or, when it starts below a heading a chunk boundary cut
    off, its document's passages do (the name is in that heading)."""
    if all(name.search(passage.text.lower()) for name in names):
        return True
    sections = analysed(passage.text).sections
    if not sections or sections[0].heading is not None:
        return False
    document = " ".join(p.text.lower() for p in passages if p.document_id == passage.document_id)
    return all(name.search(document) for name in names)


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


_ASKS_WHICH = re.compile(r"^\W*(?:which|what|who|whom|whose|where|when|how|why)\b", re.IGNORECASE)


def restates(sentence: str, question: str) -> bool:
    """Whether the sentence only restates a question that asks which, what, how ...: no word or number of its
    claim is new ("The pg_hba.conf address keyword matches any of the server's own IP addresses [1]." asked which
    keyword does). It claims nothing, cited or not. A yes/no question's answer may restate it, so those are not
    judged."""
    if _ASKS_WHICH.match(question) is None:
        return False
    claimed = _CITED_NUMBERS.sub(" ", _claim(sentence))
    asked = set(question_stems(question))
    return not any(s not in asked for s in _content_stems(claimed)) and _numbers(claimed) <= _numbers(question)


def declines(sentence: str) -> bool:
    """Whether the sentence says the sources do not answer (kept without a citation: it claims nothing)."""
    return bool(_DECLINING.search(sentence))


@dataclass
class Grounder:
    """Checks one answer's text as it streams; :meth:`feed` each token, then :meth:`finish`.

    Args:
        passages: What the model was given, numbered as it was told to cite them.
        question: The user's question (a sentence's words that only echo it are no evidence).
        attribute: Hold each sentence until it ends, cite the passage it rests on when it cites none, and drop
            it when it rests on none. Off for the extractive provider, whose every line is a cited quotation.
        instructions: What the model was told that the user may not read (the agent's system prompt, context
            template and collections' instructions): a sentence repeating :data:`RUN_WORDS` of its words in a row
            that no passage holds is withheld. With it, sentences are held until they end even unattributed (an
            agent with no collections), so none is shown before it is checked.
    """

    passages: Sequence[Passage]
    question: str
    attribute: bool = True
    instructions: str = field(default="", repr=False)  # confidential: in no repr that may reach a log
    threshold: float = SUPPORT_THRESHOLD
    boilerplate: str = ANSWER_RULES
    """The prompt's own answering rules: a sentence repeating them, or the question, is dropped (small models echo
    their prompt)."""
    cited: list[int] = field(default_factory=list)
    """Citation numbers the answer cites, in the order it first cites them."""
    dropped: list[DropReason] = field(default_factory=list)
    """Why each sentence left out was, in order. Their words are not kept: nothing here may carry what the user
    could not read (#26)."""
    kept_sentences: int = 0
    _pending: str = ""
    _held: str = ""
    """What claims nothing (the model saying it does not know, a lead-in such as "The answer is:", the question
    restated), held while nothing else of the answer stands: when nothing does, a quote of a passage that answers
    may take its place."""
    _held_declines: bool = False

    def __post_init__(self) -> None:
        self._numbers = {p.citation for p in self.passages}
        confidential = runs(self.instructions) if self.instructions else set()
        for passage in self.passages if confidential else ():
            confidential -= runs(passage.text)  # what a passage says, its reader may read: no secret
        self._confidential = confidential
        self._by_sentence = self.attribute or bool(confidential)

    def feed(self, text: str) -> str:
        """What of the answer can be shown now: checked markers, and (attributing or screening the instructions)
        whole sentences only."""
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
            self.cited.clear()  # only what was held, and not shown, had cited anything
            return out + UNSUPPORTED_ONLY
        return out

    @property
    def rested_on_nothing(self) -> bool:
        """Every sentence the model wrote was dropped or a lead-in to nothing: nothing of its answer was shown."""
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
        ready = text[: len(text) - len(hold)]
        self._pending = hold
        return self._check_markers(ready)

    def _check_markers(self, text: str) -> str:
        """``text`` with every marker checked: numbers of no passage removed, the rest recorded as cited."""
        pieces: list[str] = []
        at = 0
        for match in _MARKER.finditer(text):
            before = text[at : match.start()]
            valid = [int(n) for n in re.split(r"\s*,\s*", match.group(1)) if int(n) in self._numbers]
            if valid:
                pieces.append(before + "".join(f"[{n}]" for n in valid))
                self._cite(valid)
            else:
                after = text[match.end() : match.end() + 1]
                closes = not after or after in _PUNCTUATION_AFTER or after.isspace()  # no space left doubled
                pieces.append(before.rstrip(" ") if closes else before)
            at = match.end()
        pieces.append(text[at:])
        return "".join(pieces)

    def _cite(self, numbers: Iterable[int]) -> None:
        for n in numbers:
            if n not in self.cited:
                self.cited.append(n)

    def _complete_sentences(self, *, final: bool) -> str:
        pieces = []
        while (end := _SENTENCE_END.search(self._pending)) is not None:
            sentence = self._pending[: end.start()] + (end.group(1) or "")
            gap = end.group(2) if end.group(2) is not None else end.group(3)
            self._pending = self._pending[end.end() :]
            pieces.append(self._screened(sentence, gap))
        if final and self._pending:
            pieces.append(self._screened(self._pending, ""))
            self._pending = ""
        return "".join(pieces)

    def _screened(self, sentence: str, gap: str) -> str:
        """One whole sentence, withheld if it repeats the instructions, else grounded (unattributed: its markers
        checked). The instructions come first and whatever else the sentence does: a model citing ``[1]`` or
        resting loosely on a passage ("Employees get 25 days, and the Orion reorganisation will close ...") may
        still be repeating its confidential prompt."""
        if not self._confidential.isdisjoint(runs(sentence)):
            self.dropped.append("no_source")  # the instructions are no source the user may read
            return ""
        if self.attribute:
            return self._grounded(sentence, gap)
        checked = self._check_markers(sentence)
        self.kept_sentences += bool(checked.strip())
        return checked + gap

    def _grounded(self, sentence: str, gap: str) -> str:
        """One whole sentence: markers checked; cited from its support when it cites nothing; or dropped."""
        if (self.boilerplate and echoes(sentence, self.boilerplate)) or echoes(sentence, self.question):
            self.dropped.append("repeats_prompt")
            return ""
        checked = self._check_markers(sentence)
        if not checked.strip():
            return gap if checked or gap.count("\n") else ""
        claims_nothing = declines(checked) or _is_structural(checked) or restates(checked, self.question)
        if self.kept_sentences == 0 and claims_nothing:
            self._held += checked + gap
            self._held_declines = self._held_declines or declines(checked)
            return ""
        if _CITED_NUMBERS.search(checked) or declines(checked) or _is_structural(checked):
            return self._kept(checked + gap)
        citation, share = support(checked, self.question, self.passages)
        if citation is None or share < self.threshold:
            self.dropped.append("no_source")
            return ""
        self._cite([citation])
        stripped = checked.rstrip()
        return self._kept(f"{stripped} [{citation}]{checked[len(stripped) :]}{gap}")

    def _kept(self, text: str) -> str:
        """A sentence that stands, after what was held before it ("I don't know exactly. It is ...")."""
        self.kept_sentences += 1
        out, self._held, self._held_declines = self._held + text, "", False
        return out


def quoted_instead(
    question: str, passages: Sequence[Passage], *, over_a_decline: bool = False
) -> tuple[str, list[int]] | None:
    """The extractive quote of the section that answers, and the citations it carries, for an answer whose every
    sentence rested on no passage; ``None`` when no section answers either (the answer then says
    :data:`UNSUPPORTED_ONLY`). A small model misreads a passage that does answer ("The signal ... is [1]."); a
    quote of it, cited, serves the reader better than nothing.

    ``over_a_decline``: the model said it does not know. A quote then takes its place only if it states a value
    when the question asks for one ("Sick leave rules." does not say how long sick leave is paid)."""
    pieces = extract_answer(question, passages)
    if pieces[0] in (NOTHING_FOUND, NOTHING_MATCHES):
        return None
    if over_a_decline and expects_value(question) and not states_value(_CITED_NUMBERS.sub(" ", "".join(pieces))):
        return None
    checked = Grounder(passages, question, attribute=False)
    text = checked.feed("".join(pieces)) + checked.finish()
    return text, checked.cited


def _is_structural(sentence: str) -> bool:
    """A heading or list lead-in ("Here are the steps:") claims nothing by itself."""
    text = sentence.strip()
    return text.endswith(":") or len(_content_stems(text)) == 0


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
