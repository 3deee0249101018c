"""Collections written by another application that follows the contract, not by chonkit."""

from __future__ import annotations

import uuid

import numpy as np

from common.db.database import Pool
from schemas.models import Identity


async def foreign_pgvector_collection(
    pool: Pool, identity: Identity, contents: list[str], *, dimension: int
) -> list[list[float]]:
    """The table, the identity at the nil UUID, chunks carrying the identity's properties; no lexical index, no
    change trigger (only Ragu makes those). Returns the chunks' vectors, in ``contents``' order."""
    vectors: list[list[float]] = (
        np.random.default_rng(5).standard_normal((len(contents), dimension)).astype(np.float32).tolist()
    )
    table = f'vectors."{identity.name}"'
    async with pool.acquire() as conn:
        await conn.execute(f"CREATE TABLE {table} (id uuid PRIMARY KEY, embedding vector({dimension}), payload jsonb)")
        await conn.execute(
            f"INSERT INTO {table} VALUES ($1, $2, $3)", uuid.UUID(int=0), [1.0] * dimension, identity.to_dict()
        )
        for n, (content, vector) in enumerate(zip(contents, vectors, strict=True), start=1):
            payload = {**identity.to_dict(), "content": content, "document_id": str(uuid.UUID(int=100 + n))}
            await conn.execute(f"INSERT INTO {table} VALUES ($1, $2, $3)", uuid.UUID(int=n), vector, payload)
    return vectors
