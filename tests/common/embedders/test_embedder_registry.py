"""Registry look-ups by the identity vector's provider and model, and the local provider's failure modes."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from common.embedders import EmbedderRegistry, EmbedderSpec, default_registry
from common.embedders.local import MINILM_L6_V2, LocalEmbedder, LocalModel, LocalProvider
from common.errors import InvalidInput, Unavailable
from common.packaged import PackagedFile


def test_default_registry_lists_local_minilm() -> None:
    registry = default_registry()
    assert registry.providers() == ["local"]
    assert registry.models("local") == [
        EmbedderSpec(provider="local", model="all-MiniLM-L6-v2", dimension=384, max_tokens=254)
    ]


async def test_get_returns_one_cached_embedder_per_model() -> None:
    registry = default_registry(local_threads=1, local_batch_size=4)
    try:
        first = registry.get("local", "all-MiniLM-L6-v2")
        assert registry.get("local", "all-MiniLM-L6-v2") is first
        vector = await first.embed_query("registry smoke test")
        assert vector.shape == (384,)
    finally:
        await registry.aclose()


def test_unknown_provider_lists_the_valid_ones() -> None:
    registry = default_registry()
    with pytest.raises(InvalidInput) as caught:
        registry.get("openai", "text-embedding-3-small")
    assert caught.value.code == "unknown_embedding_provider"
    assert "local" in caught.value.detail
    assert caught.value.extra == {"provider": "openai", "valid_providers": ["local"]}
    with pytest.raises(InvalidInput, match="unknown embedding provider"):
        registry.models("openai")


def test_unknown_model_lists_the_valid_ones() -> None:
    registry = default_registry()
    with pytest.raises(InvalidInput) as caught:
        registry.get("local", "all-MiniLM-L12-v2")
    assert caught.value.code == "unknown_embedding_model"
    assert "all-MiniLM-L6-v2" in caught.value.detail
    assert caught.value.extra == {
        "provider": "local",
        "model": "all-MiniLM-L12-v2",
        "valid_models": ["all-MiniLM-L6-v2"],
    }


def test_a_provider_name_registered_twice_is_refused() -> None:
    with pytest.raises(ValueError, match="registered twice"):
        EmbedderRegistry([LocalProvider(), LocalProvider()])


async def test_missing_model_package_fails_on_first_use_not_on_lookup() -> None:
    absent = PackagedFile("ragu_no_such_model_package", "model.onnx", "0" * 64, what="embedding_model")
    missing = dataclasses.replace(MINILM_L6_V2, onnx=absent)
    registry = EmbedderRegistry([LocalProvider(models=(missing,))])
    embedder = registry.get("local", "all-MiniLM-L6-v2")
    try:
        with pytest.raises(Unavailable) as caught:
            await embedder.embed_query("anything")
        assert caught.value.code == "embedding_model_unavailable"
        assert caught.value.extra == {"package": "ragu_no_such_model_package"}
    finally:
        await registry.aclose()


async def test_changed_model_file_is_refused() -> None:
    tampered = LocalModel(
        spec=MINILM_L6_V2.spec,
        onnx=MINILM_L6_V2.onnx,
        tokenizer=dataclasses.replace(MINILM_L6_V2.tokenizer, sha256="0" * 64),
    )
    embedder = LocalEmbedder(tampered)
    try:
        with pytest.raises(Unavailable) as caught:
            embedder.count_tokens(["hello"])
        assert caught.value.code == "embedding_model_mismatch"
        assert caught.value.extra["expected_sha256"] == "0" * 64
    finally:
        await embedder.aclose()


async def test_local_embedder_settings_are_validated() -> None:
    with pytest.raises(ValueError, match="positive"):
        LocalEmbedder(threads=0)
    small_batches = LocalEmbedder(batch_size=1)
    try:
        vectors = await small_batches.embed_documents(["one", "two words", "three words here"])
        np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    finally:
        await small_batches.aclose()
