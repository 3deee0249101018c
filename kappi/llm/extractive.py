"""The offline provider: answers with the retrieved passages' sentences that answer the question, each cited, no
model at all.

It is the fallback so Ragu answers usefully with no model, no API key and no network (retrieval does the heavy
lifting), and it sits on the benchmark path, so each passage costs a handful of C-level passes over its bytes
(translate, replace, find), linear in its length. Relevance is lexical: a sentence scores the number of distinct
key terms of the question it contains (lowercased words minus stop words and weak words like "use", crudely
stemmed so "policies" finds "policy"), and answers only with at least half of them: a sentence sharing one word
with a five-word question is not presented as a finding. Whole sentences are quoted, never a piece of one cut
at a chunk's edge, and prose is preferred to headings and code. With no sentence that answers it says so
plainly, and lists nothing. The answer is deterministic.
"""

from __future__ import annotations

import bisect
import functools
from collections.abc import AsyncGenerator, Sequence
from typing import NamedTuple

from kappi.llm.base import LlmEvent, LlmRequest, Passage, Token, Usage

EXTRACTIVE_MODEL = "extractive"
FOUND = "Here is what I found in your documents:\n"
NOTHING_FOUND = "I found nothing in the documents you have access to that matches your question."
NOTHING_MATCHES = "No passage in the documents you have access to answers this question."
"""Passages were found, but no sentence of theirs holds enough of the question's key terms."""
ANALYSED_PASSAGES = 4096
"""Passages whose scanning passes are kept (~2 KB each for a 1 KB chunk, so ~8 MB at most)."""

# Passages are scanned as UTF-8 bytes: bytes.translate, replace, find and rfind are table lookups and memchr
# whatever the text, where str.translate slows tenfold on the first non-ASCII character and a regex pass costs
# several times more per character anyway. Every rewrite keeps byte lengths, so offsets stay comparable.
_ASCII_PUNCTUATION = bytes(c for c in range(128) if not chr(c).isalnum() and chr(c) != "_")
# curly quotes, guillemets, dashes, ellipsis, bullets, and the no-break and thin spaces of PDF and HTML text
_UNICODE_PUNCTUATION = "\u201c\u201d\u2018\u2019\u00ab\u00bb\u2013\u2014\u2026\u2022\u00b7\u00a0\u2009\u202f"
_WORDS_ONLY = bytes.maketrans(_ASCII_PUNCTUATION, b" " * len(_ASCII_PUNCTUATION))
_UNICODE_TO_SPACES = tuple((c.encode(), b" " * len(c.encode())) for c in _UNICODE_PUNCTUATION)
_QUESTION_WORDS_ONLY = str.maketrans(dict.fromkeys(_ASCII_PUNCTUATION.decode() + _UNICODE_PUNCTUATION, " "))
_ONE_TERMINATOR = bytes.maketrans(b"!?\r\t", b"..\n ")
# After that translation, these end a sentence: ". " and ".\n", a blank line, a line starting a list item. Each is
# rewritten with a NUL byte where the next sentence begins, always replacing an ASCII byte: a sentence's bounds
# are then character boundaries of the UTF-8 text.
_SENTENCE_ENDS = (
    (b". ", b".\0"),
    (b".\n", b".\0"),
    (b"\n\n", b"\0\0"),
    (b"\n\xe2\x80\xa2", b"\0\xe2\x80\xa2"),
    (b"\n- ", b"\0- "),
)
_BULLETS = "\u2022- \t\n"

_STOP_WORDS_TEXT = """
    a about above after again against all also am an and any many much are as at be because been before being below
    between both but by can could did do does doing down during each few for from further had has have having he
    her here hers herself him himself his how i if in into is it its itself just me more most my myself no nor
    not now of off on once only or other our ours ourselves out over own please same she should so some such
    tell than that the their theirs them themselves then there these they this those through to too under until
    up us very was we were what when where which while who whom why will with would you your yours yourself
    yourselves aren couldn didn doesn don hadn hasn haven isn ll re shouldn ve wasn weren won wouldn
"""
STOP_WORDS = frozenset(_STOP_WORDS_TEXT.split())
_WEAK_TERMS_TEXT = "get gets got use uses used using make makes need needs want know way thing happen give take"
WEAK_TERMS = frozenset(_WEAK_TERMS_TEXT.split())
"""Question words that say little about its subject: not counted among its key terms."""
_CODE_CHARACTERS = "{}();=<>$`|\\[]"
_CLOSING = (".", "!", "?", ":", ")", '"', "\u201d")
_HEADING_WORDS = 8
"""A line of at most this many words without closing punctuation reads as a heading."""


_SUFFIXES = ("ies", "ied", "ing", "ed", "s", "y")
_NOT_PLURAL = ("ss", "us", "is")  # guess, status, analysis


def _stem(word: str) -> str:
    """Cut one common ending, keeping at least three letters: "policies" and "policy" both become "polic".

    Stems are matched as word prefixes, so "approved" (stem "approv") also finds "approval"; crude, but cheap
    and predictable.
    """
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word if suffix == "s" and word.endswith(_NOT_PLURAL) else word[: -len(suffix)]
    return word


def question_stems(question: str) -> list[str]:
    """The distinct stems of the question's words that are not stop words or single letters, in order."""
    words = question.lower().translate(_QUESTION_WORDS_ONLY).split()
    return list(dict.fromkeys(_stem(word) for word in words if len(word) > 1 and word not in STOP_WORDS))


def _lowered(text: str) -> bytes:
    """``text`` lowercased, as UTF-8, with as many characters as ``text`` (so char offsets carry over)."""
    lowered = text.lower()
    if len(lowered) != len(text):  # a few characters lowercase to two ("İ"): keep those as they are
        lowered = "".join(c if len(c.lower()) != 1 else c.lower() for c in text)
    return lowered.encode(errors="surrogatepass")


def _words(data: bytes) -> bytes:
    """Lowercase words separated by spaces, at the offsets they have in ``data``, with a leading space."""
    words = b" " + data.translate(_WORDS_ONLY)
    if not data.isascii():
        for mark, spaces in _UNICODE_TO_SPACES:
            words = words.replace(mark, spaces)
    return words


def _mark_sentence_ends(data: bytes) -> bytes:
    """``data`` with a NUL byte before every sentence, at the same offsets."""
    data = data.translate(_ONE_TERMINATOR)
    for end, mark in _SENTENCE_ENDS:
        data = data.replace(end, mark)
    return data


@functools.lru_cache(maxsize=ANALYSED_PASSAGES)
def _analysed(text: str) -> tuple[bytes, bytes]:
    """A passage's words (:func:`_words`) and its sentence-marked bytes (:func:`_mark_sentence_ends`).

    Cached by text: the same chunks come back question after question, and these passes are most of an
    answer's cost. The marked bytes differ from the lowercased text only by ASCII-for-ASCII rewrites, so their
    byte offsets map to the text's characters as the encoding's do.
    """
    data = _lowered(text)
    return _words(data), _mark_sentence_ends(data)


def _sentence_at(text: str, marked: bytes, start: int) -> str:
    """The sentence of ``text`` that starts at byte ``start`` of its marked encoding."""
    end = marked.find(b"\0", start)
    first = len(marked[:start].decode(errors="surrogatepass"))
    length = len(marked[start : len(marked) if end < 0 else end].decode(errors="surrogatepass"))
    return text[first : first + length].strip().lstrip(_BULLETS)


def _opening_sentence(text: str, marked: bytes) -> str:
    start = 0
    while not (sentence := _sentence_at(text, marked, start)) and (end := marked.find(b"\0", start)) >= 0:
        start = end + 1
    return sentence


def _shorten(sentence: str, limit: int) -> str:
    sentence = " ".join(sentence.split())
    if len(sentence) <= limit:
        return sentence
    cut = sentence.rfind(" ", 0, limit)
    return sentence[: cut if cut > 0 else limit].rstrip(",;:") + "…"


def _sentences_with_stems(
    analysed: Sequence[tuple[bytes, bytes]], needles: Sequence[bytes]
) -> tuple[list[int], dict[int, set[int]]]:
    """Where each passage starts in the NUL-joined marked passages, and for every sentence holding a question
    stem (by its start in that joined text) the stems it holds.

    All passages are scanned as one NUL-joined text, so each stem costs one ``find`` per occurrence, not one
    per passage. A stem is found as a word prefix, ``b" stem"``, in the words; the last sentence start before
    a hit says which sentence the hit is in. The NULs end words and sentences, so nothing spans two passages.
    """
    # Each passage's words begin with a space, standing for the NUL between two marked passages.
    words, marked = b"".join(w for w, _ in analysed), b"\0".join(m for _, m in analysed)
    starts = [0]
    for _, own_marks in analysed[:-1]:
        starts.append(starts[-1] + len(own_marks) + 1)
    stems_per_sentence: dict[int, set[int]] = {}
    for stem, needle in enumerate(needles):
        at = words.find(needle)  # ``words`` has one extra leading byte: ``at`` is the word's offset in ``marked``
        while at >= 0:
            stems_per_sentence.setdefault(marked.rfind(b"\0", 0, at) + 1, set()).add(stem)
            at = words.find(needle, at + len(needle))
    return starts, stems_per_sentence


def key_terms(question: str) -> list[str]:
    """The question's stems that say what it is about: :func:`question_stems` minus :data:`WEAK_TERMS`
    (all of them when nothing else is left)."""
    stems = question_stems(question)
    return [s for s in stems if s not in WEAK_TERMS] or stems


def needed_terms(keys: int) -> int:
    """How many of the question's key terms a sentence must hold to count as an answer: half, rounded up."""
    return max(1, -(-keys // 2))


def is_prose(sentence: str) -> bool:
    """Whether a sentence reads as one: not a heading (a short line with no closing punctuation, or ``#``
    markup) and not code (a fence, or mostly symbols)."""
    text = sentence.strip()
    if text.startswith(("#", "```", "    ", "$ ", ">>> ")):
        return False
    symbols = sum(text.count(c) for c in _CODE_CHARACTERS)
    if symbols * 8 > len(text):
        return False
    return text.endswith(_CLOSING) or len(text.split()) > _HEADING_WORDS


def is_fragment(sentence: str) -> bool:
    """A piece of a sentence (a chunk cut mid-sentence, or the tail after "e.g."): it starts in lowercase."""
    return sentence[:1].islower()


class _Candidate(NamedTuple):
    passage: int
    sentence: str
    terms: int
    prose: bool


def _candidates(
    texts: Sequence[str], analysed: Sequence[tuple[bytes, bytes]], needles: Sequence[bytes], *, max_sentence_chars: int
) -> list[_Candidate]:
    """Every whole sentence holding enough key terms (:func:`needed_terms`), in passage order."""
    starts, stems_per_sentence = _sentences_with_stems(analysed, needles)
    needed = needed_terms(len(needles))
    found = []
    for start, stems in sorted(stems_per_sentence.items()):
        if len(stems) < needed:
            continue
        n = bisect.bisect_right(starts, start) - 1
        sentence = _sentence_at(texts[n], analysed[n][1], start - starts[n])
        if sentence and not is_fragment(sentence):
            shortened = _shorten(sentence, max_sentence_chars)
            found.append(_Candidate(n, shortened, len(stems), is_prose(sentence)))
    return found


def extract_answer(
    question: str, passages: Sequence[Passage], *, max_passages: int = 3, max_sentence_chars: int = 600
) -> list[str]:
    """The answer as the pieces it is streamed in: a header line, then one cited line per sentence.

    A sentence answers when it holds at least half of the question's key terms; a passage gives its best
    such sentence (most terms, prose before headings and code, then the earliest). The best of all opens the
    answer; others follow only if they are as good by a term at most, up to ``max_passages`` passages,
    ranked by terms, then retrieval score, then order. With no sentence that answers, the answer says so,
    and quotes nothing.
    """
    texts = [passage.text for passage in passages]
    analysed = [_analysed(text) for text in texts]
    if not any(_opening_sentence(text, marked) for text, (_, marked) in zip(texts, analysed, strict=True)):
        return [NOTHING_FOUND]
    needles = [b" " + stem.encode() for stem in key_terms(question)]
    best: dict[int, _Candidate] = {}
    for candidate in _candidates(texts, analysed, needles, max_sentence_chars=max_sentence_chars):
        held = best.get(candidate.passage)
        if held is None or (candidate.prose, candidate.terms) > (held.prose, held.terms):
            best[candidate.passage] = candidate
    order = sorted(best.values(), key=lambda c: (not c.prose, -c.terms, -passages[c.passage].score, c.passage))
    if not order:
        return [NOTHING_MATCHES]
    top = order[0]
    citations: dict[str, list[int]] = {}  # overlapping chunks often share a sentence: cite it once, from each
    for candidate in order[:max_passages]:
        if candidate.terms < top.terms - 1 or candidate.prose < top.prose:
            break
        citations.setdefault(candidate.sentence, []).append(passages[candidate.passage].citation)
    return [FOUND] + [f"\n- {text} " + "".join(f"[{c}]" for c in cited) for text, cited in citations.items()]


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
