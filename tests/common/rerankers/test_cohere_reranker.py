"""The ``cohere`` reranker: the real SDK and HTTP stack against a loopback stand-in speaking Cohere's rerank wire
format (``tests/common/rerankers/standin.py``); every test that makes a request says ``standin`` in its name."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
from cohere import V2RerankResponse, V2RerankResponseResultsItem

from common.errors import InvalidInput, Unavailable
from common.rerankers import default_rerankers
from common.rerankers.cohere import MODELS, CohereReranker, CohereRerankProvider
from tests.common.rerankers.standin import RERANK_MODELS, running_rerank_standin, standin_order, standin_relevance
from tests.support.cohere_standin import CohereStandIn

API_KEY = "test-rerank-key"
QUERY = "vacation days for new staff"
DOCUMENTS = [
    "The cafeteria opens at eight.",
    "New staff get 25 vacation days.",
    "Vacation requests go to your manager.",
    "Parking is free for staff.",
]


@pytest.fixture
def standin() -> Iterator[CohereStandIn]:
    with running_rerank_standin(api_key=API_KEY) as server:
        yield server


@pytest.fixture
async def provider(standin: CohereStandIn) -> AsyncIterator[CohereRerankProvider]:
    provider = CohereRerankProvider(API_KEY, base_url=standin.base_url, timeout=2.0)
    yield provider
    await provider.aclose()


def test_the_models_offered_are_the_ones_cohere_serves() -> None:
    assert set(MODELS) <= set(RERANK_MODELS)
    assert CohereRerankProvider(API_KEY).models()[0] == "rerank-v3.5"
    assert API_KEY not in repr(CohereRerankProvider(API_KEY))


async def test_cohere_rerank_standin_orders_best_first_in_the_wire_format(
    standin: CohereStandIn, provider: CohereRerankProvider
) -> None:
    ranked = await provider.reranker("rerank-v3.5").rerank(QUERY, DOCUMENTS, top_n=3)

    expected = standin_order(QUERY, DOCUMENTS)[:3]
    assert [i for i, _ in ranked] == expected == [1, 2, 3]
    assert [s for _, s in ranked] == [standin_relevance(QUERY, DOCUMENTS[i]) for i in expected]
    (request,) = standin.requests
    assert request.path == "/v2/rerank"
    assert request.authorization == f"Bearer {API_KEY}"
    assert request.body == {
        "model": "rerank-v3.5",
        "query": QUERY,
        "documents": DOCUMENTS,
        "top_n": 3,
        "max_tokens_per_doc": 4096,
    }


async def test_cohere_rerank_standin_top_n_beyond_the_documents_asks_for_them_all(
    standin: CohereStandIn, provider: CohereRerankProvider
) -> None:
    ranked = await provider.reranker("rerank-v3.5").rerank(QUERY, DOCUMENTS[:2], top_n=10)
    assert [i for i, _ in ranked] == [1, 0]
    assert standin.requests[0].body["top_n"] == 2


async def test_nothing_to_rerank_sends_nothing(standin: CohereStandIn, provider: CohereRerankProvider) -> None:
    assert await provider.reranker("rerank-v3.5").rerank(QUERY, [], top_n=5) == []
    assert standin.requests == []


@pytest.mark.parametrize("status", [401, 429, 500, 503, 404])
async def test_cohere_rerank_standin_any_refusal_is_unavailable_at_once_without_retrying(
    standin: CohereStandIn, provider: CohereRerankProvider, status: int
) -> None:
    standin.fail_next(status, times=3)
    with pytest.raises(Unavailable) as caught:
        await provider.reranker("rerank-v3.5").rerank(QUERY, DOCUMENTS, top_n=3)
    assert caught.value.code == "reranker_unavailable"
    assert caught.value.extra == {"provider": "cohere", "model": "rerank-v3.5", "status": status}
    assert len(standin.requests) == 1  # on an answer's path: no retries


async def test_cohere_rerank_standin_a_wrong_key_is_unavailable(standin: CohereStandIn) -> None:
    provider = CohereRerankProvider("not-the-key", base_url=standin.base_url)
    try:
        with pytest.raises(Unavailable) as caught:
            await provider.reranker("rerank-v3.5").rerank(QUERY, DOCUMENTS, top_n=3)
        assert caught.value.extra["status"] == 401
    finally:
        await provider.aclose()


async def test_cohere_rerank_standin_slower_than_the_timeout_is_unavailable() -> None:
    with running_rerank_standin(api_key=API_KEY, latency=1.0) as slow:
        provider = CohereRerankProvider(API_KEY, base_url=slow.base_url, timeout=0.1)
        try:
            with pytest.raises(Unavailable) as caught:
                await provider.reranker("rerank-v3.5").rerank(QUERY, DOCUMENTS, top_n=3)
        finally:
            await provider.aclose()
    assert caught.value.code == "reranker_unavailable"


async def test_nobody_listening_is_unavailable() -> None:
    provider = CohereRerankProvider(API_KEY, base_url="http://127.0.0.1:9", timeout=2.0)
    try:
        with pytest.raises(Unavailable) as caught:
            await provider.reranker("rerank-v3.5").rerank(QUERY, DOCUMENTS, top_n=3)
    finally:
        await provider.aclose()
    assert caught.value.code == "reranker_unavailable"


@pytest.mark.parametrize(
    "results",
    [
        [],
        [(7, 0.9)],  # an index outside the documents sent
        [(1, 0.9), (1, 0.8)],  # one document twice
        [(0, 0.9), (1, 0.8), (2, 0.7), (3, 0.6)],  # more than top_n
    ],
)
def test_an_answer_that_does_not_fit_the_documents_is_a_bad_response(results: list[tuple[int, float]]) -> None:
    reranker = CohereReranker(CohereRerankProvider(API_KEY), "rerank-v3.5")
    response = V2RerankResponse(results=[V2RerankResponseResultsItem(index=i, relevance_score=s) for i, s in results])
    with pytest.raises(Unavailable) as caught:
        reranker._ranked(response, documents=4, top_n=3)
    assert caught.value.code == "reranker_bad_response"


def test_the_registry_offers_cohere_only_with_a_key_and_refuses_unknown_names() -> None:
    assert default_rerankers().providers() == []
    registry = default_rerankers(cohere_api_key=API_KEY)
    assert registry.providers() == ["cohere"]
    assert registry.resolve("cohere", None) == "rerank-v3.5"
    assert registry.resolve("cohere", "rerank-v5.0-pro") == "rerank-v5.0-pro"
    with pytest.raises(InvalidInput) as unknown:
        registry.resolve("jina", None)
    assert (unknown.value.code, unknown.value.status, unknown.value.extra["valid_providers"]) == (
        "unknown_reranker",
        422,
        ["cohere"],
    )
    with pytest.raises(InvalidInput) as model:
        registry.resolve("cohere", "rerank-v9")
    assert model.value.code == "unknown_rerank_model"
