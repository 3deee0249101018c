"""The ``local`` embedder against the real model: shapes, norms, agreement with sentence-transformers."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import numpy as np
import pytest

from common.embedders.base import Embedder
from common.embedders.local import MINILM_L6_V2, LocalEmbedder
from tests.common.embedders.make_minilm_reference import LONG

REFERENCE = json.loads(Path(__file__).with_name("minilm_reference.json").read_text(encoding="utf-8"))

SENTENCES = [
    "A cat sits on the mat.",
    "Stock markets fell sharply after the announcement of new tariffs.",
    "",
    "Photosynthesis converts light energy into chemical energy stored in glucose, releasing oxygen.",
]


def test_is_an_embedder(minilm: LocalEmbedder) -> None:
    embedder: Embedder = minilm
    assert (embedder.provider, embedder.model, embedder.dimension) == ("local", "all-MiniLM-L6-v2", 384)
    assert embedder.max_tokens == MINILM_L6_V2.spec.max_tokens == 254


async def test_documents_are_unit_float32_rows_of_384(minilm: LocalEmbedder) -> None:
    vectors = await minilm.embed_documents(SENTENCES)
    assert vectors.shape == (4, 384)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


async def test_no_texts_give_an_empty_matrix(minilm: LocalEmbedder) -> None:
    vectors = await minilm.embed_documents([])
    assert vectors.shape == (0, 384)
    assert vectors.dtype == np.float32


async def test_same_input_gives_identical_vectors(minilm: LocalEmbedder) -> None:
    first = await minilm.embed_documents(SENTENCES)
    second = await minilm.embed_documents(SENTENCES)
    np.testing.assert_array_equal(first, second)


async def test_every_load_gives_the_same_vectors(minilm: LocalEmbedder) -> None:
    # The int8 graph is built at load from a calibration run; a second embedder must build the same one.
    fresh = LocalEmbedder()
    try:
        np.testing.assert_array_equal(await fresh.embed_documents(SENTENCES), await minilm.embed_documents(SENTENCES))
    finally:
        await fresh.aclose()


async def test_query_equals_single_document_for_a_symmetric_model(minilm: LocalEmbedder) -> None:
    query = await minilm.embed_query("how do vaccines train the immune system?")
    document = await minilm.embed_documents(["how do vaccines train the immune system?"])
    assert query.shape == (384,)
    np.testing.assert_array_equal(query, document[0])


async def test_paraphrase_ranks_above_unrelated_sentence(minilm: LocalEmbedder) -> None:
    anchor, paraphrase, unrelated = await minilm.embed_documents(
        [
            "The committee postponed the vote until next week.",
            "The vote was delayed by the committee for a week.",
            "Penguins huddle together to survive the Antarctic winter.",
        ]
    )
    assert float(anchor @ paraphrase) > float(anchor @ unrelated) + 0.3


@pytest.mark.parametrize("item", REFERENCE["items"], ids=lambda item: repr(item["text"][:24]))
async def test_agrees_with_sentence_transformers(minilm: LocalEmbedder, item: dict[str, object]) -> None:
    expected = np.asarray(item["vector"], dtype=np.float32)
    ours = await minilm.embed_query(str(item["text"]))
    # The packaged weights are stored as int8 and the feed-forward arithmetic is int8. Measured on these texts:
    # 0.9989 to 0.9991, and 0.9960 for the empty string, whose [CLS] [SEP] alone magnifies the rounding.
    assert float(ours @ expected) / float(np.linalg.norm(expected)) >= 0.995


MIXED_LENGTHS = [LONG, "short", "a medium length sentence about rivers and bridges", "", LONG[:300], "tiny one"]


async def test_length_sorted_batches_come_back_in_input_order(minilm_batched: LocalEmbedder) -> None:
    together = await minilm_batched.embed_documents(MIXED_LENGTHS)
    alone = np.stack([await minilm_batched.embed_query(text) for text in MIXED_LENGTHS])
    # int8 activations are scaled per batch, so padded neighbours move a vector slightly (measured: cosine
    # 0.996 for the empty text beside the long one), never which row is which.
    assert float(np.min(np.sum(together * alone, axis=1))) >= 0.99
    assert (np.argmax(together @ alone.T, axis=1) == np.arange(len(MIXED_LENGTHS))).all()


async def test_default_vectors_do_not_depend_on_batch_neighbours(minilm: LocalEmbedder) -> None:
    together = await minilm.embed_documents(MIXED_LENGTHS)
    alone = np.stack([await minilm.embed_query(text) for text in MIXED_LENGTHS])
    np.testing.assert_array_equal(together, alone)


async def test_long_text_is_truncated_for_embedding_but_counted_in_full(minilm: LocalEmbedder) -> None:
    (length,) = minilm.count_tokens([LONG])
    assert length > minilm.max_tokens + 50
    tail_changed = LONG + " Completely different closing words about volcanoes and lava."
    original, extended = await minilm.embed_documents([LONG, tail_changed])
    np.testing.assert_allclose(original, extended, atol=1e-6)
    (longer,) = minilm.count_tokens([tail_changed])
    assert longer > length


def test_count_tokens_excludes_special_tokens(minilm: LocalEmbedder) -> None:
    assert minilm.count_tokens(["", "hello", "hello world", "unaffable"]) == [0, 1, 2, 3]
    assert minilm.count(["hello world"]) == [2]
    assert minilm.count_tokens([]) == []


async def test_event_loop_keeps_running_during_a_big_batch(minilm: LocalEmbedder) -> None:
    ticks = 0
    done = asyncio.Event()

    async def ticker() -> None:
        nonlocal ticks
        while not done.is_set():
            ticks += 1
            await asyncio.sleep(0)

    task = asyncio.create_task(ticker())
    try:
        await minilm.embed_documents([f"{LONG} {i}" for i in range(24)])
    finally:
        done.set()
        await task
    assert ticks > 100


async def test_concurrent_callers_each_get_their_own_vectors(minilm: LocalEmbedder) -> None:
    texts = ["first text about apples", "second text about engines", "third text about oceans"]
    concurrent = await asyncio.gather(*(minilm.embed_query(text) for text in texts))
    sequential = await minilm.embed_documents(texts)
    np.testing.assert_allclose(np.stack(concurrent), sequential, atol=1e-5)
