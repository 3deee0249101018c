"""The offline provider: answers with the retrieved passages' sentences that answer the question, each cited, no
model at all.

It is the fallback so Ragu answers usefully with no model, no API key and no network (retrieval does the heavy
lifting). Manuals and handbooks put a subject in a heading ("max_connections (integer)") and its facts in the
sentences under it, often not in the sentence that repeats the question's words: "Specifies the delay between
activity rounds for the background writer. [...] The default is 200 milliseconds." So the unit answered from is
a passage's *section* (a heading and the sentences under it, or the run of sentences before the first heading; an
aside's heading, "Note", opens none):

- the question's key terms (lowercased words minus stop words and weak words like "use", crudely stemmed so
  "policies" finds "policy") are weighted by how rare they are among the passages' sentences, so "default"
  counts for little and "max_connections" for a lot, and a term no passage holds weighs the most;
- in each section, the fewest sentences (up to :data:`MAX_SENTENCES`) that cover the most weight are chosen,
  greedily, the heading's terms counting as covered; the section answers when they cover at least
  :data:`MIN_COVERAGE` of the question's weight;
- a name the question spells like code (``max_connections``, ``sqlite3.connect``) must appear in the section, or,
  for a passage that starts below its heading, in its document's passages: asked about ``checkpoint_timeout``, a
  sentence about another setting's default is not an answer. Sections whose heading names it come first, and a
  section headed by another such name (``maintenance_work_mem``, asked about ``work_mem``) does not answer;
- when the question asks for a quantity ("how many", "default", "maximum"...), a quote that states none gains the
  section's sentence on the question's terms that does.

The best section is quoted, its heading first when the heading holds a key term, whole sentences only (never a
fragment a chunk boundary cut, and prose before headings and code), cited by every passage that holds it. With no
section that answers it says so plainly and lists nothing. Each passage's analysis is cached by its text: the
same chunks come back question after question. The answer is deterministic.
"""

from __future__ import annotations

import bisect
import functools
import math
import re
from collections.abc import AsyncGenerator, Sequence
from typing import NamedTuple

from kappi.llm.base import LlmEvent, LlmRequest, Passage, Token, Usage
from kappi.llm.words import (
    IDENTIFIER,
    NOT_WORD,
    expects_value,
    identifiers,
    key_terms,
    named,
    states_value,
)

EXTRACTIVE_MODEL = "extractive"
FOUND = "Here is what I found in your documents:\n"
NOTHING_FOUND = "I found nothing in the documents you have access to that matches your question."
NOTHING_MATCHES = "No passage in the documents you have access to answers this question."
"""Passages were found, but no section of theirs holds enough of the question's key terms."""
ANALYSED_PASSAGES = 4096
"""Passages whose analysis is kept (a few KB each for a 1 KB chunk)."""
MIN_COVERAGE = 0.5
"""The share of the question's term weight a section's heading and chosen sentences must hold to answer."""
MAX_SENTENCES = 2
"""Sentences quoted from the answering section at most."""
MIN_ADDED_SHARE = 0.05
"""A sentence after the first is quoted only if it adds at least this share of the question's weight."""

_DIGIT = re.compile(r"\d")
_PARAGRAPHS = re.compile(r"\n[ \t]*\n+")
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"'\u201d)]*\s+(?=\S)|\n+(?=\s*(?:[-*\u2022]|\d+[.)])\s)")
_BULLET = re.compile(r"^\s*(?:[-*\u2022]|\d+[.)])\s+")
_CODE_CHARACTERS = "{}();=<>$`|\\[]"
_CLOSING = (".", "!", "?", ":", ")", '"', "\u201d")
_HEADING_WORDS = 10
"""A one-line paragraph of at most this many words without a sentence's closing punctuation is a heading."""
_HEADING_MARKS = "\u00b6#* \t"
"""What documentation puts around a heading: HTML manuals' pilcrow permalinks, Markdown's marks."""
_ADMONITIONS = frozenset({"note", "notes", "tip", "hint", "important", "warning", "caution", "attention", "danger"})
"""Headings of an aside ("Note"): it belongs to the section around it (a setting's note on Windows is about that
setting), so it opens no section of its own."""
_ADDED_IN_VERSION = re.compile(r"\b(?:new|added) in (?:version|release)\b", re.IGNORECASE)
"""How manuals say when something appeared (Sphinx's ``versionadded``: "New in version 3.6."): read as "added", the
word a question asks with ("In which version was it added?")."""


def _titled_by_another_name(section: Section, names: Sequence[re.Pattern[str]]) -> bool:
    """A section headed by a name spelled like code that is none of the question's (``maintenance_work_mem``,
    asked about ``work_mem``) is about that other name, whatever it mentions."""
    if not names or not section.heading or not IDENTIFIER.search(section.heading):
        return False
    heading = section.heading.lower()
    return not any(name.search(heading) for name in names)


def is_code(sentence: str) -> bool:
    """A fence, a shell or Python prompt, ``#`` markup, or mostly symbols."""
    text = sentence.strip()
    if text.startswith(("#", "```", "    ", "$ ", ">>> ")):
        return True
    return sum(text.count(c) for c in _CODE_CHARACTERS) * 8 > len(text)


def is_prose(sentence: str) -> bool:
    """Whether a sentence reads as one: not code, and not a heading or list item (a short line with no closing
    punctuation)."""
    text = sentence.strip()
    return not is_code(text) and (text.endswith(_CLOSING) or len(text.split()) > _HEADING_WORDS)


def is_fragment(sentence: str) -> bool:
    """A piece of a sentence (a chunk cut mid-sentence, or the tail after "e.g."): it starts in lowercase."""
    return sentence[:1].islower()


def _words(text: str) -> str:
    """Lowercase words, space-separated with a space at each end, so ``" stem"`` finds a word by its prefix.
    Identifiers are also split ("bgwriter_delay" holds "delay")."""
    plain = NOT_WORD.sub(" ", text.lower())
    return f" {plain} {plain.replace('_', ' ')} " if "_" in plain else f" {plain} "


def _is_heading(paragraph: str) -> bool:
    if "\n" in paragraph.strip():
        return False
    text = paragraph.strip().strip(_HEADING_MARKS)
    return bool(text) and not text.endswith((".", "!", "?", ":", ",", ";")) and len(text.split()) <= _HEADING_WORDS


class Sentence(NamedTuple):
    text: str
    """As quoted: whitespace collapsed, list bullets removed."""
    words: str
    quotable: bool
    """Whole and not code: not a fragment a chunk boundary cut."""
    prose: bool
    """Reads as a sentence (:func:`is_prose`): preferred to a bare list item with the same words."""
    value: bool
    """States a number (digits or a number word)."""


class Section(NamedTuple):
    heading: str | None
    """None for the sentences before a passage's first heading: their heading, if any, is in another chunk."""
    heading_words: str
    raw: str
    """The section's text lowercased, for finding identifiers as written."""
    sentences: tuple[Sentence, ...]
    first: int
    """The unit number of its first sentence in :attr:`Analysed.words`."""


class Analysed(NamedTuple):
    """A passage read once (cached by its text): its sections, and every sentence's words in one string so that
    each key term is found with a few ``find`` calls per passage, not one test per sentence."""

    sections: tuple[Section, ...]
    words: str
    """Each sentence's :func:`_words`, in order, then each heading's."""
    starts: tuple[int, ...]
    """Where each unit (sentence, then heading) begins in :attr:`words`."""
    headings: tuple[int, ...]
    """The section of each heading unit (the units after the sentences)."""
    owners: tuple[int, ...]
    """The section of each unit."""
    sentence_words: frozenset[str]
    """Every sentence's words: which passages hold a quote (overlapping chunks share sentences)."""


@functools.lru_cache(maxsize=ANALYSED_PASSAGES)
def analysed(text: str) -> Analysed:
    """A passage's sections, each with its sentences, and the joined words (cached by text)."""
    sections: list[Section] = []
    heading: str | None = None
    body: list[Sentence] = []
    raw: list[str] = []
    count = 0

    def close() -> None:
        nonlocal count
        if heading is not None or body:
            words = _words(heading) if heading else " "
            sections.append(Section(heading, words, " ".join(raw).lower(), tuple(body), count))
            count += len(body)

    for paragraph in _PARAGRAPHS.split(text.replace("\r\n", "\n").replace("\r", "\n")):
        if not paragraph.strip():
            continue
        if _is_heading(paragraph):
            if paragraph.strip().strip(_HEADING_MARKS).lower() in _ADMONITIONS:
                raw.append(paragraph)
                continue
            close()
            heading, body, raw = " ".join(paragraph.strip(_HEADING_MARKS + "\n").split()), [], [paragraph]
            continue
        raw.append(paragraph)
        for piece in _SENTENCE_END.split(paragraph):
            sentence = " ".join(_BULLET.sub("", piece).split())
            if sentence:
                quotable = not is_fragment(sentence) and not is_code(sentence)
                words = _words(sentence) + ("added " if _ADDED_IN_VERSION.search(sentence) else "")
                body.append(Sentence(sentence, words, quotable, is_prose(sentence), states_value(sentence)))
    close()
    units = [t.words for s in sections for t in s.sentences]
    headings = tuple(n for n, s in enumerate(sections) if s.heading)
    units += [sections[n].heading_words for n in headings]
    starts, at = [], 0
    for unit in units:
        starts.append(at)
        at += len(unit)
    owners = tuple(n for n, section in enumerate(sections) for _ in section.sentences) + headings
    sentence_words = frozenset(units[: len(units) - len(headings)])
    return Analysed(tuple(sections), "".join(units), tuple(starts), headings, owners, sentence_words)


def _held(passage: Analysed, needles: Sequence[str], frequency: list[int]) -> dict[int, set[int]]:
    """Per unit of the passage (sentence, then heading), the key terms it holds; adds to each term's count of
    units holding it."""
    held: dict[int, set[int]] = {}
    starts, find, unit_of = passage.starts, passage.words.find, bisect.bisect_right
    for i, needle in enumerate(needles):
        at, last, step = find(needle), -1, len(needle)
        while at >= 0:
            unit = unit_of(starts, at) - 1
            if unit != last:
                terms = held.get(unit)
                if terms is None:
                    held[unit] = {i}
                else:
                    terms.add(i)
                frequency[i] += 1
                last = unit
            at = find(needle, at + step)
    return held


class _Answer(NamedTuple):
    passage: int
    section: Section
    quoted: tuple[int, ...]


class _Coverage(NamedTuple):
    quoted: tuple[int, ...]
    """Indices of the quoted sentences in the section, in reading order."""
    weight: float
    """The share of the question's term weight the heading and the quoted sentences hold."""
    terms: float
    """The share of the question's terms they hold."""
    heading: float
    """The share of the weight the heading holds alone: of two sections as good, the one titled by the subject."""


def _cover(
    section: Section,
    held: Sequence[frozenset[int]],
    titled: frozenset[int],
    weights: Sequence[float],
    *,
    subject: frozenset[int],
    want_value: bool,
) -> _Coverage:
    """The section's sentences that cover the most of the question's weight, greedily.

    ``held``: the key terms each of its sentences holds; ``titled``: those its heading holds. ``subject``: the
    terms the passage's document or collection name does not hold (a PostgreSQL manual's passage need not say
    "PostgreSQL"); only they count. ``want_value``: the question asks for a quantity, so when no chosen sentence
    states one, the section's sentence on the question's terms that does is quoted too.
    """
    weight = {i: weights[i] for i in subject}
    sentences = section.sentences
    covered = set(titled) & weight.keys()
    titled_share = sum(weight[i] for i in covered)
    total = sum(weight.values()) or 1.0
    chosen: list[int] = []
    while len(chosen) < MAX_SENTENCES:
        # by the weight it adds, prose first, then (for the first, when the heading holds every term) all it holds
        best, gain = -1, (0.0, False, 0.0)
        for n, terms in enumerate(held):
            if terms and n not in chosen and sentences[n].quotable:
                adds = (sum(weight[i] for i in terms - covered), sentences[n].prose, sum(weight[i] for i in terms))
                if adds > gain:
                    best, gain = n, adds
        if best < 0 or (chosen and gain[0] < max(MIN_ADDED_SHARE * total, 1e-9)):
            break
        chosen.append(best)
        covered |= held[best]
    if chosen and want_value and not any(sentences[n].value for n in chosen):
        valued = [n for n, s in enumerate(sentences) if s.quotable and held[n] and s.value]
        if valued:
            pick = max(valued, key=lambda n: (sum(weight[i] for i in held[n]), -n))
            chosen = [*chosen[: MAX_SENTENCES - 1], pick]
            covered |= held[pick]
    return _Coverage(
        quoted=tuple(sorted(chosen)),
        weight=sum(weight[i] for i in covered) / total,
        terms=len(covered) / len(subject),
        heading=titled_share / total,
    )


def _quote(answer: _Answer, needles: Sequence[str], max_chars: int) -> str:
    """The quoted sentences in reading order (``…`` between two that do not follow each other), each cut at a word
    after ``max_chars``; the section's heading first when it holds a key term: it names what the quote is about."""
    sentences = answer.section.sentences
    parts: list[str] = []
    for position, n in enumerate(answer.quoted):
        if position and n != answer.quoted[position - 1] + 1:
            parts.append("…")
        parts.append(_shorten(sentences[n].text, max_chars))
    text = " ".join(parts)
    heading = answer.section.heading
    if heading and any(needle in answer.section.heading_words for needle in needles):
        return f"{heading}: {text}"
    return text


def _shorten(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    cut = text.rfind(" ", 0, limit)
    return text[: cut if cut > 0 else limit].rstrip(",;:") + "…"


@functools.lru_cache(maxsize=1024)
def _source_words(document_name: str | None, collection: str) -> str:
    return _words(f"{document_name or ''} {collection}")


def extract_answer(
    question: str, passages: Sequence[Passage], *, max_passages: int = 3, max_sentence_chars: int = 600
) -> list[str]:
    """The answer as the pieces it is streamed in: a header line, then the cited quote of the section that
    answers (see the module's docstring), or one line saying nothing answers.

    ``max_passages`` bounds the passages cited for the same quote (overlapping chunks often hold the same
    sentences); ``max_sentence_chars`` bounds each sentence quoted (``…`` marks a cut).
    """
    per_passage = [analysed(passage.text) for passage in passages]
    if not any(a.sections for a in per_passage):
        return [NOTHING_FOUND]
    needles = [" " + stem for stem in key_terms(question)]
    if not needles:
        return [NOTHING_MATCHES]
    names = named(identifiers(question))
    want_value = expects_value(question)
    frequency = [0] * len(needles)
    held_per_passage = [_held(a, needles, frequency) for a in per_passage]
    units = sum(len(a.starts) for a in per_passage)
    # an inverse document frequency over the passages' sentences and headings: "default" weighs little
    weights = [math.log(1 + units / (1 + df)) for df in frequency]
    best: _Answer | None = None
    best_rank: tuple[float, ...] = ()
    subjects = _Subjects(passages, needles, weights)
    for n, (passage, analysis, held) in enumerate(zip(passages, per_passage, held_per_passage, strict=True)):
        if not held:
            continue  # no sentence or heading holds a key term: no section of it can answer
        subject, total = subjects.of(passage)
        hit: dict[int, set[int]] = {}  # the terms each section's sentences and heading hold, together
        for unit, terms in held.items():
            hit.setdefault(analysis.owners[unit], set()).update(terms)
        first_heading = len(analysis.starts) - len(analysis.headings)
        for index, terms in hit.items():
            possible = subject & terms
            if _share(possible, subject, weights, total) < MIN_COVERAGE:
                continue  # even quoting every sentence would not answer
            section = analysis.sections[index]
            if names and not _names_stand(section, index, names, _Scope(passages, per_passage, passage)):
                continue
            sentence_terms = [
                subject.intersection(held.get(section.first + k, ())) for k in range(len(section.sentences))
            ]
            titled = (
                frozenset(held.get(first_heading + analysis.headings.index(index), ()))
                if section.heading
                else frozenset()
            )
            covers = _cover(section, sentence_terms, titled, weights, subject=subject, want_value=want_value)
            if not covers.quoted or max(covers.weight, covers.terms) < MIN_COVERAGE:
                continue
            by_name = sum(name.search((section.heading or "").lower()) is not None for name in names)
            rank = (by_name, round(covers.weight, 6), covers.heading, -len(covers.quoted), passage.score, -n, -index)
            if best is None or rank > best_rank:
                best, best_rank = _Answer(n, section, covers.quoted), rank
    if best is None:
        return [NOTHING_MATCHES]
    text = _quote(best, needles, max_sentence_chars)
    quoted = [best.section.sentences[i].words for i in best.quoted]
    citing = [
        p.citation for p, a in zip(passages, per_passage, strict=True) if all(q in a.sentence_words for q in quoted)
    ]
    return [FOUND, f"\n- {text} " + "".join(f"[{c}]" for c in dict.fromkeys(citing[:max_passages]))]


class _Subjects:
    """Per passage, the key terms its document or collection name does not hold (all of them if it holds every
    one), with their total weight. Most questions name no passage's source: then every passage has them all, found
    with one look at the sources' words together (each source's words start and end with a space, so no term is
    found across two of them)."""

    def __init__(self, passages: Sequence[Passage], needles: Sequence[str], weights: Sequence[float]) -> None:
        self._needles, self._weights = needles, weights
        self._known: dict[tuple[str | None, str], tuple[frozenset[int], float]] = {}
        every = frozenset(range(len(needles)))
        self._every = (every, sum(weights[i] for i in every) or 1.0)
        sources = "".join({_source_words(p.document_name, p.collection) for p in passages})
        self._named = any(needle in sources for needle in needles)

    def of(self, passage: Passage) -> tuple[frozenset[int], float]:
        if not self._named:
            return self._every
        key = (passage.document_name, passage.collection)
        found = self._known.get(key)
        if found is None:
            source = _source_words(*key)
            subject = frozenset(i for i, needle in enumerate(self._needles) if needle not in source)
            subject = subject or self._every[0]
            found = self._known[key] = (subject, sum(self._weights[i] for i in subject) or 1.0)
        return found


def _share(terms: frozenset[int], subject: frozenset[int], weights: Sequence[float], total: float) -> float:
    """The larger of the weight share and the count share of ``subject`` that ``terms`` hold (``total``: the
    weight of ``subject``)."""
    return max(sum(weights[i] for i in terms) / total, len(terms) / len(subject))


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


def _names_stand(section: Section, index: int, names: Sequence[re.Pattern[str]], scope: _Scope) -> bool:
    """Whether every name the question spells like code stands in the section (or, for a passage that starts
    below its heading, in its document's passages), and no other such name heads it."""
    if _titled_by_another_name(section, names):
        return False
    text = section.raw if section.heading is not None or index else scope.document_text()
    return all(name.search(text) for name in names)


class ExtractiveProvider:
    """Streams :func:`extract_answer` for the last user message, one line per token, then zero usage."""

    name = "extractive"
    reads_system_prompt = False

    def __init__(self, *, max_passages: int = 3, max_sentence_chars: int = 600) -> None:
        self._max_passages = max_passages
        self._max_sentence_chars = max_sentence_chars

    def models(self) -> list[str]:
        return [EXTRACTIVE_MODEL]

    async def stream(self, request: LlmRequest) -> AsyncGenerator[LlmEvent, None]:
        question = next((m.content for m in reversed(request.messages) if m.role == "user"), "")
        pieces = extract_answer(
            question,
            request.passages,
            max_passages=self._max_passages,
            max_sentence_chars=self._max_sentence_chars,
        )
        for piece in pieces:
            yield Token(text=piece)
        yield Usage(input_tokens=0, output_tokens=0)

    async def aclose(self) -> None:
        """Nothing to release."""
