"""Real all-MiniLM-L6-v2 embedders shared by the session: loading the ONNX session is the slow part."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from common.embedders.local import LocalEmbedder


@pytest.fixture(scope="session")
async def minilm() -> AsyncIterator[LocalEmbedder]:
    """The default configuration: one text per inference call."""
    embedder = LocalEmbedder()
    yield embedder
    await embedder.aclose()


@pytest.fixture(scope="session")
async def minilm_batched() -> AsyncIterator[LocalEmbedder]:
    """Several texts per call, to exercise length-sorted padded batches."""
    embedder = LocalEmbedder(batch_size=4)
    yield embedder
    await embedder.aclose()
