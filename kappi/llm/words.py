"""The words a question and a passage are compared by: stop words, crude stems, names spelled like code, numbers.

One vocabulary for everything that matches a question to text (the extractive answerer, grounding, follow-up
detection), so a word counts the same way wherever it is weighed.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

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

_SUFFIXES = ("ies", "ied", "ing", "ed", "s", "y")
_NOT_PLURAL = ("ss", "us", "is")  # guess, status, analysis
NOT_WORD = re.compile(r"[^\w]+")
IDENTIFIER = re.compile(r"[A-Za-z_]\w*(?:(?:\.|::)[A-Za-z_]\w*)+|\w*[A-Za-z0-9]_\w+|__\w+__")
"""A name spelled like code: dotted (``shelve.open``) or with an inner underscore (``queue_depth``)."""
_MAY_NAME = re.compile(r"_|\w(?:\.|::)[A-Za-z_]")
"""What every :data:`IDENTIFIER` match holds: a text without it names nothing, found in one linear scan (the
identifier pattern backtracks over every word of a text that has none, as most questions and sentences do)."""
_VALUE_QUESTION = re.compile(
    r"\b(?:how (?:many|much|long|large|big|often|old)|default|maximum|minimum|range|size|limit|version|port"
    r"|number|timeout|length|value)\b",
    re.IGNORECASE,
)
_DIGIT_WORDS_TEXT = """
    zero _ two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen
    eighteen nineteen twenty
"""
DIGITS_OF = {word: str(n) for n, word in enumerate(_DIGIT_WORDS_TEXT.split()) if word != "_"}
"""Number words and the digits they read as; not "one", a pronoun as often ("any one time"): with it, sentences
stating no quantity counted as stating one, which cost a fact on the dev split."""
NAME_ZIPF = 1.0
"""Below this frequency a word is not English but a name (wordfreq's Zipf scale: 1.0 is once in 10^8 words, where
its lists end). Dev split: any threshold from 0 to 2 declines the same two near misses (one of them answered
wrong-but-cited) and no answerable question; the lowest counts the fewest words as names."""
_LETTERS = re.compile(r"(?<![\w.])[a-z]{3,}(?!\w|\.\w)")
"""A word of letters only; names spelled with digits, underscores or dots are found otherwise."""
NUMBER_WORDS = frozenset(DIGITS_OF) | {"fifty", "hundred", "thousand", "million", "billion", "twice", "half"}
"""Words that state a quantity."""


def stem(word: str) -> str:
    """Cut one common ending, keeping at least three letters: "policies" and "policy" both become "polic".

    Stems are matched as word prefixes, so "approved" (stem "approv") also finds "approval"; crude, but cheap
    and predictable.
    """
    if not word.endswith(_SUFFIXES):
        return word  # most words: one C call instead of one per suffix
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word if suffix == "s" and word.endswith(_NOT_PLURAL) else word[: -len(suffix)]
    return word


def question_stems(question: str) -> list[str]:
    """The distinct stems of the question's words that are not stop words or single letters, in order."""
    words = NOT_WORD.sub(" ", question.lower()).split()
    return list(dict.fromkeys(stem(word) for word in words if len(word) > 1 and word not in STOP_WORDS))


def key_terms(question: str) -> list[str]:
    """The question's stems that say what it is about: :func:`question_stems` minus :data:`WEAK_TERMS`
    (all of them when nothing else is left)."""
    stems = question_stems(question)
    return [s for s in stems if s not in WEAK_TERMS] or stems


def unlisted(question: str) -> frozenset[str]:
    """The stems of the question's words that English does not use (below :data:`NAME_ZIPF` in wordfreq's word
    lists): an option, a command or a tool spelled in lowercase ("maxtime", "mypy"), which names a thing as surely as
    a capitalised word does."""
    from wordfreq import zipf_frequency  # its English list loads on the first call, not at every import

    words = set(_LETTERS.findall(question.lower()))
    return frozenset(stem(w) for w in words if w not in STOP_WORDS and zipf_frequency(w, "en") < NAME_ZIPF)


def identifiers(question: str) -> list[str]:
    """The names the question spells like code, lowercased: ``queue_depth``, ``tarfile.readerror``."""
    if _MAY_NAME.search(question) is None:
        return []
    return list(dict.fromkeys(m.group().lower().strip(".") for m in IDENTIFIER.finditer(question)))


def named(names: Sequence[str]) -> list[re.Pattern[str]]:
    """Finds each name as a whole identifier: ``queue_depth`` is not in ``max_queue_depth``, but
    ``readerror`` is in ``tarfile.readerror``."""
    return [re.compile(rf"(?<!\w){re.escape(name)}(?!\w)") for name in names]


def expects_value(question: str) -> bool:
    """Whether the question asks for a quantity or a setting's value, which a quote must then state."""
    return _VALUE_QUESTION.search(question) is not None


def states_value(sentence: str) -> bool:
    return any(c.isdigit() for c in sentence) or not NUMBER_WORDS.isdisjoint(
        NOT_WORD.sub(" ", sentence.lower()).split()
    )
