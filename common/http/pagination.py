"""The paging query parameters every listing takes, bounded where they are declared.

Declared bounds are checked by Litestar before a handler runs (a ``400 invalid_request`` naming the parameter) and
are published in the OpenAPI documents as ``minimum``/``maximum``, so clients and schemathesis see them. Without an
upper bound an ``offset`` reached PostgreSQL, whose ``OFFSET`` is a bigint: ``?offset=9223372036854775808`` was a
500 for any caller (#26).
"""

from __future__ import annotations

from typing import Annotated

from litestar.params import QueryParameter

MAX_OFFSET = 1_000_000_000
"""Past any listing a Ragu service holds (paging that far would take millions of requests), and well inside
PostgreSQL's bigint, so every offset a caller may send is one the database takes."""

Offset = Annotated[int, QueryParameter(ge=0, le=MAX_OFFSET, description="items to skip")]
"""How many items of the listing to skip; pair it with a ``limit`` that has its own ``le=``."""
