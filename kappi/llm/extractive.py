"""The offline provider: answers with the retrieved passages' most relevant sentences, each cited, no model at all.

It is the default so Ragu answers usefully with no API key and no network (retrieval does the heavy lifting),
and it sits on the benchmark path, so each passage costs a handful of C-level passes over its bytes (translate,
replace, find), linear in its length. Relevance is lexical: a sentence scores the number of distinct question
stems it contains (lowercased words minus stop words, crudely stemmed so "policies" finds "policy"). Passages
are ranked by their best sentence, then by retrieval score, then as retrieval ordered them, so the answer is
deterministic. It never says more than the passages do; with no passage it says that nothing matched.
"""

from __future__ import annotations

import bisect
import functools
from collections.abc import AsyncGenerator, Sequence

from kappi.llm.base import LlmEvent, LlmRequest, Passage, Token, Usage

EXTRACTIVE_MODEL = "extractive"
FOUND = "Here is what I found in your documents:\n"
CLOSEST = "None of your documents uses the words of your question; these are the closest passages I found:\n"
NOTHING_FOUND = "I found nothing in the documents you have access to that matches your question."
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


def _best_sentences(
    analysed: Sequence[tuple[bytes, bytes]], needles: Sequence[bytes]
) -> tuple[list[int], list[tuple[int, int]]]:
    """For every passage, the start of its sentence with the most distinct question stems (the earliest on a
    tie, as an offset in the NUL-joined marked passages) and that count, ``(0, -1)`` when nothing matched; with
    where each passage starts in that joined text.

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
    best = [(0, -1)] * len(analysed)
    for start, stems in stems_per_sentence.items():
        passage = bisect.bisect_right(starts, start) - 1
        count, (best_count, best_start) = len(stems), best[passage]
        if count > best_count or (count == best_count and start < best_start):
            best[passage] = (count, start)
    return starts, best


def extract_answer(
    question: str, passages: Sequence[Passage], *, max_passages: int = 3, max_sentence_chars: int = 320
) -> list[str]:
    """The answer as the pieces it is streamed in: a header line, then one cited line per sentence.

    Passages are ranked by their best sentence's count of question stems, then retrieval score, then order;
    only the sentences of the passages used are cut out of their text. A passage of blanks and bullets has
    nothing to quote and is passed over; once one passage matches, those matching nothing are left out.
    """
    needles = [b" " + stem.encode() for stem in question_stems(question)]
    texts = [passage.text for passage in passages]
    analysed = [_analysed(text) for text in texts]
    starts, best = _best_sentences(analysed, needles) if analysed else ([], [])
    order = sorted(range(len(passages)), key=lambda n: (-best[n][0], -passages[n].score, n))
    citations: dict[str, list[int]] = {}  # overlapping chunks often share a sentence: cite it once, from each
    matched: bool | None = None
    used = 0
    for n in order:
        hits, start = best[n]
        if matched and not hits:
            break
        own_marks = analysed[n][1]
        if start < 0:  # nothing matched: the opening sentence stands in
            sentence = _opening_sentence(texts[n], own_marks)
        else:
            sentence = _sentence_at(texts[n], own_marks, start - starts[n])
        if not sentence:
            continue
        if matched is None:
            matched = hits > 0
        citations.setdefault(_shorten(sentence, max_sentence_chars), []).append(passages[n].citation)
        used += 1
        if used == max_passages:
            break
    if matched is None:
        return [NOTHING_FOUND]
    header = FOUND if matched else CLOSEST
    return [header] + [f"\n- {text} " + "".join(f"[{c}]" for c in cited) for text, cited in citations.items()]


class ExtractiveProvider:
    """Streams :func:`extract_answer` for the last user message, one line per token, then zero usage."""

    name = "extractive"
    reads_system_prompt = False

    def __init__(self, *, max_passages: int = 3, max_sentence_chars: int = 320) -> None:
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
