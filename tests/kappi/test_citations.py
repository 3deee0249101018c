"""A citation is its passage's :class:`~kappi.retrieval.models.FoundPassage` fields, numbered (issue #32 item 4):
what a search found reaches the API whole, under the keys the API has always had, with nothing copied by name."""

from __future__ import annotations

import msgspec

from common.vectors.base import Legs
from kappi.chat.answering import citations_of
from kappi.chat.models import Citation
from kappi.retrieval.models import FoundPassage
from kappi.retrieval.service import Retrieval, RetrievedChunk

CITATION_KEYS = {
    "citation",
    "collection",
    "vector_provider",
    "document_id",
    "document_name",
    "page_start",
    "page_end",
    "text",
    "score",
    "legs",
    "rerank_score",
    "document_hits",
    "ocr",
    "distance",
    "chunk_index",
}
"""Citation's keys in the public API (kappi's OpenAPI document and ``ragu_client.models.Citation``)."""


def _passage(n: int) -> RetrievedChunk:
    """A passage with every field set, none to its default, each telling passages apart."""
    return RetrievedChunk(
        collection=f"Handbook {n}",
        vector_provider="qdrant",
        document_id=f"doc-{n}",
        document_name=f"handbook-{n}.pdf",
        page_start=n,
        page_end=n + 2,
        text=f"Employees get {n} vacation days.",
        score=0.123456789 * n,
        legs=Legs(dense_rank=n, lexical_rank=n + 1, lexical_score=7.5, fused_score=0.0312),
        rerank_score=0.75 / n,
        ocr=True,
        distance=0.987654321 / n,
        chunk_index=10 + n,
        instruction="HR policies",
        context=f"Vacation. Employees get {n} vacation days.",
        char_start=100 * n,
        char_end=100 * n + 40,
    )


def test_a_citation_is_its_passage_found_fields_numbered_with_its_scores_rounded() -> None:
    passages = [_passage(1), _passage(2)]

    citations = citations_of(Retrieval(chunks=passages, collections_searched=1, embed_ms=1.0, search_ms=1.0))

    assert [msgspec.to_builtins(c) for c in citations] == [
        {
            "citation": n,
            "collection": p.collection,
            "vector_provider": p.vector_provider,
            "document_id": p.document_id,
            "document_name": p.document_name,
            "page_start": p.page_start,
            "page_end": p.page_end,
            "text": p.text,  # the chunk as cited, not the context the LLM read
            "score": round(p.score, 6),
            "legs": msgspec.to_builtins(p.legs),
            "rerank_score": p.rerank_score,
            "document_hits": None,
            "ocr": True,
            "distance": round(p.distance, 6),
            "chunk_index": p.chunk_index,
        }
        for n, p in enumerate(passages, start=1)
    ]
    assert (citations[1].score, citations[1].distance) == (0.246914, 0.493827)  # rounded to 6 places


def test_the_api_keys_of_a_citation_are_the_shared_fields_and_its_own_two() -> None:
    """What a field added to (or dropped from) the shared struct does to the public API, said here."""
    assert set(Citation.__struct_fields__) == CITATION_KEYS
    assert set(FoundPassage.__struct_fields__) == CITATION_KEYS - {"citation", "document_hits"}


def test_a_citation_stored_before_distances_were_recorded_still_reads() -> None:
    stored = b'{"citation": 1, "collection": "c", "vector_provider": "pgvector", "document_id": "d",'
    stored += b' "document_name": null, "page_start": null, "page_end": null, "text": "t", "score": 0.5}'

    citation = msgspec.json.decode(stored, type=Citation)

    assert (citation.distance, citation.chunk_index, citation.legs, citation.ocr) == (None, None, None, False)
