"""The local embedder's rewritten graph, kept in a cache folder: the same vectors, no rewrite on the next load, and
a cached file that is not what it should be is never used."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

from common.clients import SharedClients
from common.config import load_settings
from common.embedders import local
from common.embedders.local import MINILM_L6_V2, LocalEmbedder, LocalProvider
from tests.common.embedders.test_local_embedder import SENTENCES


def _cached(folder: Path) -> list[Path]:
    return sorted((folder / "embedders").glob("*.onnx"))


async def _vectors(embedder: LocalEmbedder) -> np.ndarray:
    try:
        return await embedder.embed_documents(SENTENCES)
    finally:
        await embedder.aclose()


def _no_rewrite(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_: object) -> bytes:
        raise AssertionError("the graph was rewritten although it was cached")

    monkeypatch.setattr(local, "_rewrite", refuse)


async def test_a_cached_graph_gives_the_same_vectors_without_a_rewrite(
    tmp_path: Path, minilm: LocalEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    rewritten_in_memory = await minilm.embed_documents(SENTENCES)
    first = await _vectors(LocalEmbedder(cache_dir=tmp_path))
    assert len(_cached(tmp_path)) == 1
    _no_rewrite(monkeypatch)

    again = await _vectors(LocalEmbedder(cache_dir=tmp_path))

    np.testing.assert_array_equal(first, again)
    np.testing.assert_array_equal(again, rewritten_in_memory)


@pytest.mark.parametrize("damage", ["graph", "digest", "missing digest"])
async def test_a_damaged_cached_graph_is_rewritten_not_used(tmp_path: Path, minilm: LocalEmbedder, damage: str) -> None:
    LocalProvider(cache_dir=tmp_path).prepare()
    (graph,) = _cached(tmp_path)
    digest = graph.with_suffix(".sha256")
    if damage == "graph":
        graph.write_bytes(graph.read_bytes()[:-1000])
    elif damage == "digest":
        digest.write_text("0" * 64)
    else:
        digest.unlink()

    vectors = await _vectors(LocalEmbedder(cache_dir=tmp_path))

    np.testing.assert_array_equal(vectors, await minilm.embed_documents(SENTENCES))
    assert local._read_cached(graph) is not None  # written whole again


async def test_a_folder_that_cannot_be_written_only_means_no_cache(
    tmp_path: Path, minilm: LocalEmbedder, caplog: pytest.LogCaptureFixture
) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")

    with caplog.at_level(logging.WARNING, logger=local.__name__):
        vectors = await _vectors(LocalEmbedder(cache_dir=blocked))

    np.testing.assert_array_equal(vectors, await minilm.embed_documents(SENTENCES))
    assert "is not cached" in caplog.text


def test_the_cached_name_follows_the_packaged_weights(tmp_path: Path) -> None:
    """Another model file (a dependency bump) is another recipe, so an old graph is never loaded for it."""
    other = type(MINILM_L6_V2)(
        spec=MINILM_L6_V2.spec,
        onnx=type(MINILM_L6_V2.onnx)(MINILM_L6_V2.onnx.package, MINILM_L6_V2.onnx.relative_path, "0" * 64),
        tokenizer=MINILM_L6_V2.tokenizer,
    )
    assert local._recipe(other) != local._recipe(MINILM_L6_V2)


async def test_a_service_process_caches_the_graph_before_it_serves(tmp_path: Path, database_url: str) -> None:
    environment = {"RAGU_LOCAL_EMBEDDER_CACHE_DIR": str(tmp_path / "cache")}
    settings = load_settings(environment, data_dir=str(tmp_path / "data"), database_url=database_url)
    clients = SharedClients(settings)

    async with clients.opened():
        assert len(_cached(tmp_path / "cache")) == 1
