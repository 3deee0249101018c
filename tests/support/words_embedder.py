"""A second local embedder for tests: words hashed into a few dimensions, seeded, so that two of its models (and it
and MiniLM) embed the same text differently — which is what re-embedding tests need to tell versions apart. Fast and
deterministic; not a stand-in for anything remote."""

from __future__ import annotations

import asyncio
import re
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from common.embedders.base import Embedder, EmbedderSpec, SpecAttributes, Vectors

PROVIDER = "words"
SPECS = (
    EmbedderSpec(provider=PROVIDER, model="hashed-words-64a", dimension=64, max_tokens=400),
    EmbedderSpec(provider=PROVIDER, model="hashed-words-64b", dimension=64, max_tokens=400),
    EmbedderSpec(provider=PROVIDER, model="hashed-words-96", dimension=96, max_tokens=400),
)
_WORD = re.compile(r"\w+")


class WordsEmbedder(SpecAttributes):
    def __init__(self, spec: EmbedderSpec, *, delay: float = 0.0) -> None:
        self._spec = spec
        self._seed = zlib.crc32(spec.model.encode())
        self.delay = delay
        """Seconds each batch takes (a crash test needs a worker caught mid-way)."""
        self.calls = 0

    @property
    def spec(self) -> EmbedderSpec:
        return self._spec

    async def embed_documents(self, texts: Sequence[str]) -> Vectors:
        self.calls += 1
        if self.delay:
            await asyncio.sleep(self.delay)
        return np.stack([self._vector(text) for text in texts]) if texts else np.zeros((0, self.dimension), np.float32)

    async def embed_query(self, text: str) -> Vectors:
        return self._vector(text)

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        return [len(_WORD.findall(text)) for text in texts]

    def count(self, texts: Sequence[str]) -> list[int]:
        return self.count_tokens(texts)

    async def aclose(self) -> None:
        return None

    def _vector(self, text: str) -> Vectors:
        vector = np.zeros(self.dimension, np.float32)
        for word in _WORD.findall(text.lower()):
            vector[zlib.crc32(word.encode(), self._seed) % (self.dimension - 1) + 1] += 1.0
        if not vector.any():
            vector[1] = 1.0  # never the identity record's [1, 0, …]
        normalised: Vectors = vector / np.linalg.norm(vector)
        return normalised


@dataclass(frozen=True, slots=True)
class WordsProvider:
    delay: float = 0.0
    name: str = PROVIDER

    @property
    def specs(self) -> Sequence[EmbedderSpec]:
        return SPECS

    def create(self, spec: EmbedderSpec) -> Embedder:
        return WordsEmbedder(spec, delay=self.delay)
