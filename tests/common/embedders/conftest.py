"""One real all-MiniLM-L6-v2 embedder for the whole session: loading the ONNX session is the slow part."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from common.embedders.local import LocalEmbedder


@pytest.fixture(scope="session")
async def minilm() -> AsyncIterator[LocalEmbedder]:
    embedder = LocalEmbedder()
    yield embedder
    await embedder.aclose()
