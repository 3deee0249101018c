"""Chonkit's chunkers: a parsed document in, chunks that point back at their source out.

A pure library (no I/O): the document service calls :func:`chunk` with the collection's
:data:`ChunkConfig` and the embedding model's :class:`TokenCounter`.
"""

from chonkit.document.chunking.chunker import HEADING_SEPARATOR, chunk
from chonkit.document.chunking.config import (
    MAX_CHUNK_SIZE,
    ChunkConfig,
    FixedChunking,
    ParentChildChunking,
    StructureChunking,
    Unit,
    default_chunk_config,
    validate_chunk_config,
)
from chonkit.document.chunking.models import Chunk, ChunkResult
from chonkit.document.chunking.tokens import CharacterCounter, TokenCounter, TokenOffsets

__all__ = [
    "HEADING_SEPARATOR",
    "MAX_CHUNK_SIZE",
    "CharacterCounter",
    "Chunk",
    "ChunkConfig",
    "ChunkResult",
    "FixedChunking",
    "ParentChildChunking",
    "StructureChunking",
    "TokenCounter",
    "TokenOffsets",
    "Unit",
    "chunk",
    "default_chunk_config",
    "validate_chunk_config",
]
