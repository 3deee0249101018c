"""The local embedder's rewritten graph, kept in a cache folder: the same vectors, no rewrite on the next load, and
a cached file that is not what it should be is never used.

The graph is rewritten for real once (:func:`cache`); the other tests count rewrites with a stand-in that returns
that graph, since what they check is when a rewrite happens and what is kept, not the rewrite itself."""

from __future__ import annotations

import dataclasses
import logging
import shutil
from pathlib import Path

import numpy as np
import pytest

from common.clients import SharedClients
from common.config import load_settings
from common.embedders import local
from common.embedders.local import MINILM_L6_V2, LocalEmbedder, LocalModel, LocalProvider
from tests.common.embedders.test_local_embedder import SENTENCES


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cache folder holding the real rewritten graph."""
    folder = tmp_path_factory.mktemp("embedder-cache")
    LocalProvider(cache_dir=folder).prepare()
    return folder


@pytest.fixture
def rewrites(cache: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Each rewrite from now on, by model name; each gives the real rewritten graph."""
    (graph,) = _cached(cache)
    done: list[str] = []

    def rewrite(model: LocalModel, _: bytes) -> bytes:
        done.append(model.spec.model)
        return graph.read_bytes()

    monkeypatch.setattr(local, "_rewrite", rewrite)
    return done


def _cached(folder: Path) -> list[Path]:
    return sorted((folder / "embedders").glob("*.onnx"))


def _copy(cache: Path, folder: Path) -> Path:
    shutil.copytree(cache, folder)
    return folder


async def _vectors(embedder: LocalEmbedder) -> np.ndarray:
    try:
        return await embedder.embed_documents(SENTENCES)
    finally:
        await embedder.aclose()


async def test_a_cached_graph_gives_the_same_vectors_without_a_rewrite(
    cache: Path, tmp_path: Path, minilm: LocalEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    rewritten_in_memory = await minilm.embed_documents(SENTENCES)  # minilm has no cache
    monkeypatch.setattr(local, "_rewrite", None)  # a rewrite would fail

    vectors = await _vectors(LocalEmbedder(cache_dir=_copy(cache, tmp_path / "cache")))

    np.testing.assert_array_equal(vectors, rewritten_in_memory)


@pytest.mark.parametrize("damage", ["graph", "digest", "missing digest"])
async def test_a_damaged_cached_graph_is_rewritten_not_used(
    cache: Path, tmp_path: Path, rewrites: list[str], damage: str
) -> None:
    folder = _copy(cache, tmp_path / "cache")
    (graph,) = _cached(folder)
    digest = graph.with_suffix(".sha256")
    if damage == "graph":
        graph.write_bytes(graph.read_bytes()[:-1000])
    elif damage == "digest":
        digest.write_text("0" * 64)
    else:
        digest.unlink()

    await _vectors(LocalEmbedder(cache_dir=folder))

    assert rewrites == ["all-MiniLM-L6-v2"]
    assert local._read_cached(graph) is not None  # written whole again


async def test_a_folder_that_cannot_be_written_only_means_no_cache(
    tmp_path: Path, rewrites: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")

    with caplog.at_level(logging.WARNING, logger=local.__name__):
        vectors = await _vectors(LocalEmbedder(cache_dir=blocked))

    assert vectors.shape == (len(SENTENCES), 384)
    assert rewrites == ["all-MiniLM-L6-v2"]
    assert "is not cached" in caplog.text


def test_the_cached_name_follows_the_packaged_weights() -> None:
    """Another model file (a dependency bump) is another recipe, so an old graph is never loaded for it."""
    other = dataclasses.replace(MINILM_L6_V2, onnx=dataclasses.replace(MINILM_L6_V2.onnx, sha256="0" * 64))
    assert local._recipe(other) != local._recipe(MINILM_L6_V2)


async def test_a_service_process_caches_the_graph_before_it_serves(
    tmp_path: Path, database_url: str, rewrites: list[str]
) -> None:
    environment = {"RAGU_LOCAL_EMBEDDER_CACHE_DIR": str(tmp_path / "cache")}
    settings = load_settings(environment, data_dir=str(tmp_path / "data"), database_url=database_url)

    async with SharedClients(settings).opened():
        assert rewrites == ["all-MiniLM-L6-v2"]
        assert len(_cached(tmp_path / "cache")) == 1


def test_the_rewrite_calibrates_on_the_text_as_embedding_tokenizes_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """The outlier channels kept in float are found on the calibration text unpadded, as every text is embedded:
    the packaged ``tokenizer.json`` pads to 128 tokens, and calibrating on that padding picked other channels, which
    moved every vector (so a collection embedded before would no longer match its questions' vectors exactly)."""
    from common.embedders import onnx_graph

    seen: list[dict[str, np.ndarray]] = []
    real = onnx_graph.widest_channels

    def spy(model: object, tensors: list[str], feeds: dict[str, np.ndarray], count: int) -> object:
        seen.append(dict(feeds))
        return real(model, tensors, feeds, count)  # type: ignore[arg-type]

    monkeypatch.setattr(onnx_graph, "widest_channels", spy)
    local._rewrite(MINILM_L6_V2, MINILM_L6_V2.onnx.read_verified())

    (feeds,) = seen
    embedded = LocalEmbedder()._tokenizers()[0].encode(local.CALIBRATION_TEXT)
    assert feeds["input_ids"].tolist() == [embedded.ids]
    assert feeds["attention_mask"].all()
