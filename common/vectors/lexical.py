"""The one lexical analyser every engine's keyword leg uses, so that BM25 ranks alike in pgvector, Qdrant and the
benchmark's reference.

Analysis (bm25s's defaults, the issue's reference): unicode word tokens of two or more characters
(``(?u)\\b\\w\\w+\\b``, scikit-learn's pattern), lowercased, English stop words removed (:data:`STOP_WORDS`,
Lucene's list as bm25s ships it), then Snowball English stems (PyStemmer, in C).

A term's id is a hash of its stem (:func:`term_id`), so every process agrees on ids without a vocabulary table;
ids lie in ``1 .. TERM_SPACE - 1`` (0 is free for an engine's own bookkeeping: pgvector's statistics keep their
totals there). Collisions are rare enough to ignore: ~10 pairs in
a 100k-stem vocabulary.

BM25 (Lucene's variant, as bm25s scores by default): a term ``t`` of a query scores a chunk ``d``
``idf(t) * tf / (tf + k1 * (1 - b + b * |d| / avgdl))`` with ``idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5))``.
Engines store the saturated tf part (:func:`bm25_weights`) per chunk at write time and apply the IDF at query
time from exact document frequencies: a score is the inner product of the query's IDF-weighted terms and the
chunk's tf weights (pgvector sums postings; Qdrant's sparse vectors with its IDF modifier).
"""

from __future__ import annotations

import functools
import hashlib
import re
import threading
from collections import Counter
from collections.abc import Sequence
from typing import NamedTuple

import Stemmer

K1 = 0.9
B = 0.4
TERM_SPACE = 2**29
"""Term ids are below this: they fit an ``int4`` column, Qdrant's uint32 sparse indices and pgvector's ``sparsevec``."""
MAX_TERMS = 16_000
"""Most distinct terms kept per chunk (pgvector's ``sparsevec`` limit, so that any engine can hold them); a chunk
with more keeps its most frequent ones (ties by id) — no chunk Ragu writes comes near it."""
# fmt: off
STOP_WORDS = frozenset((
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it", "no", "not",
    "of", "on", "or", "such", "that", "the", "their", "then", "there", "these", "they", "this", "to", "was",
    "will", "with",
))
# fmt: on
"""Lucene's English stop words, as bm25s uses them (``bm25s.stopwords.STOPWORDS_EN``)."""

_TOKEN = re.compile(r"(?u)\b\w\w+\b")
_local = threading.local()


class DocumentTerms(NamedTuple):
    """A chunk's terms for the index: ids ascending, each one's frequency, and the chunk's length in terms."""

    ids: list[int]
    tfs: list[int]
    length: int


def _stemmer() -> Stemmer.Stemmer:
    """One stemmer per thread: a PyStemmer object is not safe to share between threads."""
    stemmer: Stemmer.Stemmer | None = getattr(_local, "stemmer", None)
    if stemmer is None:
        stemmer = _local.stemmer = Stemmer.Stemmer("english")
    return stemmer


def analyse(text: str) -> list[str]:
    """The stems of ``text``'s indexable words, in order, repeats kept."""
    words = [word for word in _TOKEN.findall(text.lower()) if word not in STOP_WORDS]
    stems: list[str] = _stemmer().stemWords(words)
    return stems


@functools.lru_cache(maxsize=200_000)
def term_id(stem: str) -> int:
    """A stem's id: a 64-bit blake2b digest folded into ``1 .. TERM_SPACE - 1`` (stable across processes, unlike
    ``hash``)."""
    digest = int.from_bytes(hashlib.blake2b(stem.encode(), digest_size=8).digest(), "big")
    return digest % (TERM_SPACE - 1) + 1


def query_terms(text: str) -> DocumentTerms:
    """A query's terms as :func:`document_terms` gives a chunk's: a term said twice weighs twice (``tfs`` holds
    the repeats), as in bm25s, so a query term ``t`` contributes ``tfs[t] * idf(t) * weight(t, d)``. No ids at
    all (only stop words or punctuation): the lexical leg finds nothing."""
    return document_terms(text)


def document_terms(text: str) -> DocumentTerms:
    """What the index stores of a chunk's ``content``."""
    counts = Counter(term_id(stem) for stem in analyse(text))
    length = sum(counts.values())
    if len(counts) > MAX_TERMS:
        kept = sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:MAX_TERMS]
        counts = Counter(dict(kept))
    ids = sorted(counts)
    return DocumentTerms(ids, [counts[i] for i in ids], length)


def bm25_weights(tfs: Sequence[int], length: int, avgdl: float) -> list[float]:
    """The saturated tf part of BM25 for each term of a chunk of ``length`` terms, in a collection whose mean
    chunk length is ``avgdl`` (no chunks yet: the chunk's own length)."""
    norm = K1 * (1.0 - B + B * length / avgdl) if avgdl > 0 else K1
    return [tf / (tf + norm) for tf in tfs]
