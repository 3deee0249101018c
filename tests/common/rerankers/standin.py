"""Cohere's ``POST /v2/rerank`` for the Cohere stand-in (:mod:`tests.support.cohere_standin`), in its wire format.

Relevance is deterministic so tests know the order in advance: the share of the query's distinct words (lowercase,
split on whitespace) that a document contains, ties by index, as Cohere's answer is ordered (best first).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import msgspec
from litestar import Request, Response, post
from litestar.di import NamedDependency

from tests.support.cohere_standin import CohereStandIn, cohere_error, running_cohere_standin

RERANK_MODELS = ("rerank-v3.5", "rerank-v4.0-pro", "rerank-v5.0-pro", "rerank-english-v3.0", "rerank-multilingual-v3.0")
"""Cohere's rerank models; kept apart from the provider's table on purpose."""


class RerankRequest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """The body of ``POST /v2/rerank`` as the SDK sends it; an unknown field is a 400, as a contract check."""

    model: str
    query: str
    documents: list[str]
    top_n: int | None = None
    max_tokens_per_doc: int | None = None
    relevant_spans: Any = None
    priority: int | None = None


def standin_relevance(query: str, document: str) -> float:
    words = set(query.lower().split())
    return round(len(words & set(document.lower().split())) / max(len(words), 1), 6)


def standin_order(query: str, documents: Sequence[str]) -> list[int]:
    """The indexes of ``documents`` as the stand-in ranks them for ``query``."""
    return sorted(range(len(documents)), key=lambda i: (-standin_relevance(query, documents[i]), i))


@post("/v2/rerank")
async def rerank(request: Request[Any, Any, Any], standin: NamedDependency[CohereStandIn]) -> Response[Any]:
    del standin  # the gate (auth, scripted failures, latency) has run
    try:
        body = msgspec.json.decode(await request.body(), type=RerankRequest)
    except msgspec.DecodeError as error:
        return cohere_error(400, f"invalid request: {error}")
    if body.model not in RERANK_MODELS:
        return cohere_error(404, f"model '{body.model}' not found, make sure the correct model ID was used")
    if not body.documents:
        return cohere_error(400, "invalid request: list of documents must not be empty")
    if body.top_n is not None and body.top_n < 1:
        return cohere_error(400, "invalid request: top_n must be at least 1")
    order = standin_order(body.query, body.documents)[: body.top_n or len(body.documents)]
    return Response(
        {
            "id": str(uuid.uuid4()),
            "results": [
                {"index": i, "relevance_score": standin_relevance(body.query, body.documents[i])} for i in order
            ],
            "meta": {"api_version": {"version": "2"}, "billed_units": {"search_units": 1}},
        }
    )


@contextmanager
def running_rerank_standin(**options: Any) -> Iterator[CohereStandIn]:
    """The Cohere stand-in with its rerank endpoint, on loopback for the block."""
    with running_cohere_standin(routes=[rerank], **options) as standin:
        yield standin
