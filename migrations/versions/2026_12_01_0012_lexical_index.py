"""Every pgvector collection gets its lexical index, for lexical and hybrid retrieval (#16).

Each collection table of the ``vectors`` schema gains ``terms int4[]``, ``term_weights real[]`` (BM25's tf
weights) and ``lexical_length int4``, filter indexes on the payload's ``tags`` and ``label``, and two tables of
the same name that statement-level triggers keep exact from those columns: the term statistics in
``vectors_lexical`` (document frequencies, chunk count, total length) and the postings in ``vectors_postings``
(term, chunk, weight: the inverted index a keyword query scans). The SQL is
``common.vectors.pgvector``'s, which collections created later get too. Existing chunks are analysed here, in
Python, with the same analyser the adapter uses at upsert (:mod:`common.vectors.lexical`), against the
collection's exact mean length.

Downgrade drops both schemas (the triggers go with their functions), the filter indexes and the columns.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-01
"""

# ruff: noqa: S608 -- table names come from the catalog and pass the collection name rule before use.

from __future__ import annotations

import uuid

import sqlalchemy as sa
from alembic import op

from common.vectors.pgvector import (
    LEXICAL_FUNCTIONS,
    LEXICAL_SCHEMA,
    POSTINGS_SCHEMA,
    SCHEMA,
    lexical_columns,
    lexical_index,
    table_of,
)
from common.vectors.records import is_collection_name

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

FILL_BATCH = 1000

COLLECTION_TABLES = """
SELECT c.relname AS name FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = :schema AND c.relkind = 'r'
  AND EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = 'id' AND NOT a.attisdropped)
  AND EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = 'embedding' AND NOT a.attisdropped)
  AND EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = 'payload' AND NOT a.attisdropped)
  AND (:with_terms OR NOT EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = 'terms'
                                  AND NOT a.attisdropped))
ORDER BY c.relname
"""


def _collections(bind: sa.Connection, *, with_terms: bool) -> list[str]:
    rows = bind.execute(sa.text(COLLECTION_TABLES), {"schema": SCHEMA, "with_terms": with_terms})
    return [row.name for row in rows if is_collection_name(row.name)]


def _fill(bind: sa.Connection, name: str) -> None:
    """Analyse every chunk's content and write its lexical columns; the triggers count them as they land."""
    table = table_of(name)
    rows = bind.execute(
        sa.text(f"SELECT id, coalesce(payload->>'content', '') AS content FROM {table} WHERE id <> :nil"),
        {"nil": uuid.UUID(int=0)},
    ).all()
    columns = lexical_columns([row.content for row in rows], chunks=0, length=0)
    update = sa.text(
        f"UPDATE {table} t SET terms = string_to_array(u.terms, ',')::int4[], "
        "term_weights = string_to_array(u.weights, ',')::real[], lexical_length = u.length "
        "FROM unnest(CAST(:ids AS uuid[]), CAST(:terms AS text[]), CAST(:weights AS text[]), CAST(:lengths AS int4[])) "
        "AS u(id, terms, weights, length) WHERE t.id = u.id"
    )
    for start in range(0, len(rows), FILL_BATCH):
        end = start + FILL_BATCH
        bind.execute(
            update,
            {
                "ids": [row.id for row in rows[start:end]],
                "terms": columns.terms[start:end],
                "weights": columns.weights[start:end],
                "lengths": columns.lengths[start:end],
            },
        )


def upgrade() -> None:
    bind = op.get_bind()
    for statement in LEXICAL_FUNCTIONS:
        op.execute(statement)
    for name in _collections(bind, with_terms=False):
        for statement in lexical_index(name):
            op.execute(statement)
        _fill(bind, name)


def downgrade() -> None:
    bind = op.get_bind()
    op.execute(f"DROP SCHEMA IF EXISTS {POSTINGS_SCHEMA} CASCADE")
    op.execute(f"DROP SCHEMA IF EXISTS {LEXICAL_SCHEMA} CASCADE")  # statistics, functions and the triggers on them
    for name in _collections(bind, with_terms=True):
        table = table_of(name)
        filter_indexes = bind.execute(
            sa.text(
                "SELECT indexrelid::regclass::text AS index FROM pg_index WHERE indrelid = to_regclass(:table) "
                "AND (strpos(pg_get_indexdef(indexrelid), :tags) > 0 "
                "OR strpos(pg_get_indexdef(indexrelid), :label) > 0)"
            ),
            {"table": table, "tags": "(payload -> 'tags'::text)", "label": "(payload ->> 'label'::text)"},
        ).all()
        for row in filter_indexes:
            op.execute(f"DROP INDEX {row.index}")
        op.execute(
            f"ALTER TABLE {table} DROP COLUMN IF EXISTS terms, DROP COLUMN IF EXISTS term_weights, "
            "DROP COLUMN IF EXISTS lexical_length"
        )
