"""What the framework retrievers (:mod:`ragu_client.langchain`, :mod:`ragu_client.llama_index`) make of a passage
``POST /agents/{id}/retrieve`` found: its text, its citation metadata and the score a caller reads.

Imports neither framework: each retriever wraps these values in its framework's own types.
"""

from __future__ import annotations

from typing import Any

from ragu_client.models import Citation


def similarity(citation: Citation) -> float | None:
    """The passage's cosine similarity to the question (``1 - distance``), in every mode.

    A ``score`` is the collection's mode's own: the similarity for ``dense``, but a fused rank score (~0.016) for
    ``hybrid`` (the default) and a BM25 score for ``lexical``, neither of which says how close the passage is. A
    citation without ``distance`` (an answer stored before kappi recorded it) gives the dense score, else ``None``.
    """
    if citation.distance is not None:
        return round(1.0 - citation.distance, 6)
    return citation.score if citation.legs is None else None


def metadata(citation: Citation) -> dict[str, Any]:
    """Where the passage came from and how it ranked, as flat values (any framework's store keeps them)."""
    return {
        "collection": citation.collection,
        "vector_provider": citation.vector_provider,
        "document_id": citation.document_id,
        "document_name": citation.document_name,
        "page_start": citation.page_start,
        "page_end": citation.page_end,
        "rank": citation.citation,
        "score": similarity(citation),
        "kappi_score": citation.score,
        "rerank_score": citation.rerank_score,
        "document_hits": citation.document_hits,
        "ocr": citation.ocr,
        "chunk_index": citation.chunk_index,
    }
