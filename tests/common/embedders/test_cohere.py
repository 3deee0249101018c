"""The ``cohere`` provider: the real SDK and HTTP stack against a loopback stand-in speaking Cohere's wire format.

Cohere's API cannot run here; every test that makes a request says ``standin`` in its name.
"""

from __future__ import annotations

import socket
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import numpy as np
import pytest

from common.embedders import EmbedderRegistry, EmbedderSpec
from common.embedders.cohere import (
    EMBED_ENGLISH_LIGHT_V3,
    EMBED_ENGLISH_V3,
    EMBED_V4,
    MODELS,
    CohereEmbedder,
    CohereModel,
    CohereProvider,
    RetryPolicy,
    retry_after_seconds,
)
from common.embedders.local import LocalProvider
from common.errors import InvalidInput, Unavailable
from tests.support.cohere_standin import CohereStandIn, running_cohere_standin, standin_embedding

API_KEY = "test-cohere-key"
FAST_RETRY = RetryPolicy(attempts=4, base_delay=0.001, max_delay=0.01)
ENGLISH = EMBED_ENGLISH_V3.spec.model


@pytest.fixture
def standin() -> Iterator[CohereStandIn]:
    with running_cohere_standin(api_key=API_KEY) as server:
        yield server


@pytest.fixture
async def embedder(standin: CohereStandIn) -> AsyncIterator[CohereEmbedder]:
    embedder = CohereEmbedder(EMBED_ENGLISH_V3, API_KEY, base_url=standin.base_url, retry=FAST_RETRY)
    yield embedder
    await embedder.aclose()


def expected(texts: list[str], input_type: str = "search_document", model: str = ENGLISH) -> np.ndarray[Any, Any]:
    return np.stack([standin_embedding(model, input_type, text) for text in texts])


def test_specs_list_cohere_models_with_documented_dimensions_and_limits() -> None:
    provider = CohereProvider(API_KEY)
    assert provider.name == "cohere"
    assert [(s.model, s.dimension, s.max_tokens) for s in provider.specs] == [
        ("embed-english-v3.0", 1024, 512),
        ("embed-multilingual-v3.0", 1024, 512),
        ("embed-english-light-v3.0", 384, 512),
        ("embed-multilingual-light-v3.0", 384, 512),
        ("embed-v4.0", 1536, 8192),
    ]
    assert all(s.provider == "cohere" for s in provider.specs)


def test_api_key_stays_out_of_repr() -> None:
    assert API_KEY not in repr(CohereProvider(API_KEY, base_url="http://127.0.0.1:9"))


async def test_cohere_standin_documents_and_queries_use_their_input_types(
    standin: CohereStandIn, embedder: CohereEmbedder
) -> None:
    documents = await embedder.embed_documents(["alpha", "beta"])
    query = await embedder.embed_query("alpha")

    assert [(r.path, r.input_type, r.texts) for r in standin.requests] == [
        ("/v2/embed", "search_document", ["alpha", "beta"]),
        ("/v2/embed", "search_query", ["alpha"]),
    ]
    assert all(r.authorization == f"Bearer {API_KEY}" for r in standin.requests)
    np.testing.assert_allclose(documents, expected(["alpha", "beta"]), atol=1e-6)
    np.testing.assert_allclose(query, standin_embedding(ENGLISH, "search_query", "alpha"), atol=1e-6)
    assert not np.allclose(query, documents[0], atol=1e-3)


async def test_cohere_standin_sends_float_type_end_truncation_and_no_dimension_for_v3(
    standin: CohereStandIn, embedder: CohereEmbedder
) -> None:
    await embedder.embed_query("q")
    body = standin.requests[0].body
    assert body["model"] == ENGLISH
    assert body["embedding_types"] == ["float"]
    assert body["truncate"] == "END"
    assert "output_dimension" not in body


async def test_cohere_standin_250_texts_go_in_three_batches_of_at_most_96_in_order(
    standin: CohereStandIn, embedder: CohereEmbedder
) -> None:
    texts = [f"passage number {i}" for i in range(250)]

    vectors = await embedder.embed_documents(texts)

    batches = sorted((r.texts for r in standin.requests), key=lambda batch: texts.index(batch[0]))
    assert batches == [texts[0:96], texts[96:192], texts[192:250]]
    assert vectors.shape == (250, 1024)
    np.testing.assert_allclose(vectors, expected(texts), atol=1e-6)


async def test_cohere_standin_no_texts_make_no_request(standin: CohereStandIn, embedder: CohereEmbedder) -> None:
    vectors = await embedder.embed_documents([])
    assert vectors.shape == (0, 1024)
    assert vectors.dtype == np.float32
    assert standin.requests == []


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.spec.model)
async def test_cohere_standin_every_model_returns_unit_float32_rows_of_its_dimension(model: CohereModel) -> None:
    with running_cohere_standin(api_key=API_KEY, vector_scale=7.5) as standin:
        embedder = CohereEmbedder(model, API_KEY, base_url=standin.base_url, retry=FAST_RETRY)
        try:
            vectors = await embedder.embed_documents(["one", "two", "three"])
            query = await embedder.embed_query("four")
        finally:
            await embedder.aclose()

    dimension = model.spec.dimension
    assert vectors.shape == (3, dimension)
    assert query.shape == (dimension,)
    assert vectors.dtype == query.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(query), 1.0, atol=1e-6)
    np.testing.assert_allclose(vectors, expected(["one", "two", "three"], model=model.spec.model), atol=1e-6)
    sent = standin.requests[0].body.get("output_dimension")
    assert sent == (dimension if model is EMBED_V4 else None)


async def test_cohere_standin_429_is_retried_after_retry_after(standin: CohereStandIn) -> None:
    patient = RetryPolicy(attempts=3, base_delay=0.001, max_delay=5.0)
    standin.fail_next(429, retry_after="0.3")
    embedder = CohereEmbedder(EMBED_ENGLISH_V3, API_KEY, base_url=standin.base_url, retry=patient)
    try:
        vector = await embedder.embed_query("rate limited")
    finally:
        await embedder.aclose()

    first, second = standin.requests
    assert second.received_at - first.received_at >= 0.29
    np.testing.assert_allclose(vector, standin_embedding(ENGLISH, "search_query", "rate limited"), atol=1e-6)


async def test_cohere_standin_retry_after_is_capped_by_max_delay(standin: CohereStandIn) -> None:
    standin.fail_next(429, retry_after="3600")
    embedder = CohereEmbedder(EMBED_ENGLISH_V3, API_KEY, base_url=standin.base_url, retry=FAST_RETRY)
    try:
        await embedder.embed_query("impatient")
    finally:
        await embedder.aclose()

    first, second = standin.requests
    assert second.received_at - first.received_at < 60


async def test_cohere_standin_503_is_retried_until_success(standin: CohereStandIn, embedder: CohereEmbedder) -> None:
    standin.fail_next(503, times=2)

    vectors = await embedder.embed_documents(["flaky"])

    assert len(standin.requests) == 3
    np.testing.assert_allclose(vectors, expected(["flaky"]), atol=1e-6)


async def test_cohere_standin_gives_up_after_the_policy_attempts(
    standin: CohereStandIn, embedder: CohereEmbedder
) -> None:
    standin.fail_next(500, times=10, message="upstream exploded")

    with pytest.raises(Unavailable) as caught:
        await embedder.embed_documents(["doomed"])

    assert caught.value.code == "embedding_provider_unavailable"
    assert "upstream exploded" in caught.value.detail
    assert caught.value.extra == {"provider": "cohere", "model": ENGLISH, "attempts": 4, "status": 500}
    assert len(standin.requests) == FAST_RETRY.attempts  # the SDK's own retries are off


async def test_cohere_standin_one_failed_batch_fails_the_whole_call(standin: CohereStandIn) -> None:
    standin.fail_next(400, message="invalid request: batch refused")
    embedder = CohereEmbedder(EMBED_ENGLISH_V3, API_KEY, base_url=standin.base_url, concurrency=1, retry=FAST_RETRY)
    try:
        with pytest.raises(InvalidInput) as caught:
            await embedder.embed_documents([f"t{i}" for i in range(200)])
    finally:
        await embedder.aclose()
    assert caught.value.code == "embedding_provider_rejected"
    assert isinstance(caught.value.__cause__, Exception)


async def test_cohere_standin_bad_key_is_an_auth_error_without_retry(standin: CohereStandIn) -> None:
    embedder = CohereEmbedder(EMBED_ENGLISH_V3, "wrong-key", base_url=standin.base_url, retry=FAST_RETRY)
    try:
        with pytest.raises(Unavailable) as caught:
            await embedder.embed_query("who am I")
    finally:
        await embedder.aclose()

    assert caught.value.code == "embedding_provider_auth_failed"
    assert "invalid api token" in caught.value.detail
    assert caught.value.extra["status"] == 401
    assert len(standin.requests) == 1


async def test_cohere_standin_400_is_invalid_input_with_coheres_message(
    standin: CohereStandIn, embedder: CohereEmbedder
) -> None:
    standin.fail_next(400, message="invalid request: text is not valid UTF-8")

    with pytest.raises(InvalidInput) as caught:
        await embedder.embed_documents(["bad"])

    assert caught.value.code == "embedding_provider_rejected"
    assert "invalid request: text is not valid UTF-8" in caught.value.detail
    assert len(standin.requests) == 1


async def test_cohere_standin_other_4xx_is_unavailable_without_retry(standin: CohereStandIn) -> None:
    retired = CohereModel(EmbedderSpec(provider="cohere", model="embed-english-v2.0", dimension=4096, max_tokens=512))
    embedder = CohereEmbedder(retired, API_KEY, base_url=standin.base_url, retry=FAST_RETRY)
    try:
        with pytest.raises(Unavailable) as caught:
            await embedder.embed_query("retired model")
    finally:
        await embedder.aclose()

    assert caught.value.code == "embedding_provider_unavailable"
    assert "model 'embed-english-v2.0' not found" in caught.value.detail
    assert caught.value.extra["status"] == 404
    assert len(standin.requests) == 1


async def test_cohere_standin_the_server_refuses_more_than_96_texts(standin: CohereStandIn) -> None:
    from cohere import AsyncClientV2
    from cohere.core import ApiError

    async with AsyncClientV2(API_KEY, base_url=standin.base_url, max_retries=0) as client:
        with pytest.raises(ApiError) as caught:
            await client.embed(model=ENGLISH, input_type="search_document", texts=["x"] * 97, embedding_types=["float"])
    assert caught.value.status_code == 400
    assert "at most 96" in caught.value.body["message"]


async def test_cohere_standin_a_wrong_dimension_is_a_bad_response(standin: CohereStandIn) -> None:
    mislabelled = CohereModel(EmbedderSpec(provider="cohere", model=ENGLISH, dimension=768, max_tokens=512))
    embedder = CohereEmbedder(mislabelled, API_KEY, base_url=standin.base_url, retry=FAST_RETRY)
    try:
        with pytest.raises(Unavailable) as caught:
            await embedder.embed_query("shape check")
    finally:
        await embedder.aclose()
    assert caught.value.code == "embedding_provider_bad_response"
    assert "(1, 1024)" in caught.value.detail


async def test_cohere_standin_a_200_without_embeddings_is_a_bad_response(
    standin: CohereStandIn, embedder: CohereEmbedder
) -> None:
    standin.fail_next(200, message="not an embedding response")
    with pytest.raises(Unavailable) as caught:
        await embedder.embed_documents(["odd"])
    assert caught.value.code == "embedding_provider_bad_response"
    assert "no float embeddings" in caught.value.detail


async def test_cohere_standin_timeouts_are_retried_then_unavailable() -> None:
    with running_cohere_standin(api_key=API_KEY, latency=0.5) as standin:
        embedder = CohereEmbedder(EMBED_ENGLISH_V3, API_KEY, base_url=standin.base_url, retry=FAST_RETRY, timeout=0.05)
        try:
            with pytest.raises(Unavailable) as caught:
                await embedder.embed_query("slow")
        finally:
            await embedder.aclose()
        assert len(standin.requests) == FAST_RETRY.attempts
    assert caught.value.code == "embedding_provider_unavailable"
    assert "ReadTimeout" in caught.value.detail


async def test_unreachable_server_is_unavailable_after_retries() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]
    embedder = CohereEmbedder(EMBED_ENGLISH_V3, API_KEY, base_url=f"http://127.0.0.1:{closed_port}", retry=FAST_RETRY)
    try:
        with pytest.raises(Unavailable) as caught:
            await embedder.embed_query("anyone there")
    finally:
        await embedder.aclose()
    assert caught.value.code == "embedding_provider_unavailable"
    assert caught.value.extra["attempts"] == FAST_RETRY.attempts


@pytest.mark.parametrize("concurrency", [1, 3])
async def test_cohere_standin_sees_at_most_concurrency_requests_at_once(concurrency: int) -> None:
    light = EMBED_ENGLISH_LIGHT_V3.spec.model
    texts = [f"text {i}" for i in range(5 * 96)]
    with running_cohere_standin(api_key=API_KEY, latency=0.1) as standin:
        embedder = CohereEmbedder(EMBED_ENGLISH_LIGHT_V3, API_KEY, base_url=standin.base_url, concurrency=concurrency)
        try:
            vectors = await embedder.embed_documents(texts)
        finally:
            await embedder.aclose()

    assert len(standin.requests) == 5
    assert standin.max_in_flight == concurrency
    np.testing.assert_allclose(vectors[::97], expected(texts[::97], model=light), atol=1e-6)


async def test_cohere_standin_registry_serves_cohere_next_to_local(standin: CohereStandIn) -> None:
    registry = EmbedderRegistry([LocalProvider(), CohereProvider(API_KEY, base_url=standin.base_url)])
    try:
        assert registry.providers() == ["cohere", "local"]
        assert registry.spec("cohere", ENGLISH) == EMBED_ENGLISH_V3.spec
        embedder = registry.get("cohere", ENGLISH)
        assert registry.get("cohere", ENGLISH) is embedder
        assert (embedder.provider, embedder.model, embedder.dimension) == ("cohere", ENGLISH, 1024)
        vector = await embedder.embed_query("through the registry")
        np.testing.assert_allclose(
            vector, standin_embedding(ENGLISH, "search_query", "through the registry"), atol=1e-6
        )
        with pytest.raises(InvalidInput) as caught:
            registry.get("cohere", "all-MiniLM-L6-v2")
        assert caught.value.code == "unknown_embedding_model"
    finally:
        await registry.aclose()


async def test_closed_embedder_refuses_work() -> None:
    embedder = CohereEmbedder(EMBED_ENGLISH_V3, API_KEY, base_url="http://127.0.0.1:9")
    await embedder.aclose()
    with pytest.raises(RuntimeError, match="closed"):
        await embedder.embed_query("too late")


def test_token_counts_follow_wordpiece_for_english() -> None:
    embedder = CohereEmbedder(EMBED_ENGLISH_V3, API_KEY)
    texts = ["The quick brown fox jumps over the lazy dog.", "Tokenization isn't trivial", ""]
    # the . | token ##ization isn ' t trivial: no special tokens, no padding, no truncation
    assert embedder.count_tokens(texts) == [10, 6, 0]
    assert embedder.count_tokens(["word " * 1000]) == [1000]
    assert embedder.count(texts) == embedder.count_tokens(texts)


def test_token_counts_charge_unknown_words_one_token_per_character() -> None:
    embedder = CohereEmbedder(EMBED_ENGLISH_V3, API_KEY)
    thai = "ภาษาไทยเป็นภาษาที่มีระดับเสียง"
    long_run = "x" * 3000
    assert embedder.count_tokens([thai, long_run, f"see {long_run} here"]) == [len(thai), 3000, 3002]


def test_retry_policy_prefers_retry_after_and_caps_it() -> None:
    policy = RetryPolicy(attempts=5, base_delay=1.0, max_delay=10.0)
    assert policy.delay(1, retry_after=2.5) == 2.5
    assert policy.delay(1, retry_after=3600) == 10.0
    for retry, backoff in [(1, 1.0), (2, 2.0), (3, 4.0), (6, 10.0)]:
        delays = [policy.delay(retry) for _ in range(50)]
        assert all(backoff / 2 <= d <= backoff for d in delays)
    with pytest.raises(ValueError, match="attempts"):
        RetryPolicy(attempts=0)


def test_retry_after_reads_seconds_and_http_dates() -> None:
    assert retry_after_seconds({"retry-after": "7"}) == 7.0
    assert retry_after_seconds({"Retry-After": "0.25"}) == 0.25
    assert retry_after_seconds({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0.0
    future = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(time.time() + 120))
    assert 100 < (retry_after_seconds({"retry-after": future}) or 0) <= 120
    assert retry_after_seconds({"retry-after": "soon"}) is None
    assert retry_after_seconds({}) is None
    assert retry_after_seconds(None) is None
