"""What a passage found for a question is, declared once: retrieval's passages and the API's citations both extend
it, so a hit reaches its citation under the same field names and a citation is made from a passage by copying these
fields as a whole (:func:`kappi.chat.answering.citations_of`), not by naming a dozen of them at each hop."""

from __future__ import annotations

import msgspec

from common.vectors.base import Legs


class FoundPassage(msgspec.Struct, frozen=True, kw_only=True):
    """A passage a search found: where it is, its text and how it ranked. Part of the public API as the fields of
    :class:`~kappi.chat.models.Citation`, whose JSON shape a change here changes."""

    collection: str
    vector_provider: str
    document_id: str
    document_name: str | None
    page_start: int | None
    page_end: int | None
    text: str
    """The matching chunk, as cited."""
    score: float
    """Its collection's mode's score: cosine similarity (dense), BM25 (lexical) or the fused score (hybrid)."""
    legs: Legs | None = None
    """Lexical and hybrid searches: the passage's rank in each leg (``null``: that leg did not find it), its BM25
    score and the fused score — what hybrid changed."""
    rerank_score: float | None = None
    """The agent's reranker's relevance score; ``null`` when it has none, or it was unavailable."""
    ocr: bool = False
    """The passage's text was recognised by OCR from a scanned page or an image, so it may hold misreadings."""
    distance: float | None = None
    """The cosine distance between the question and the passage, in every mode (``1 - distance`` is their cosine
    similarity); ``null`` in answers stored before it was recorded."""
    chunk_index: int | None = None
    """The passage's chunk number in its document; ``null`` for a chunk another application wrote without one."""
