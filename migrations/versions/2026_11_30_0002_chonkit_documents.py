"""Chonkit documents: metadata of uploaded originals (the bytes live in the content-addressed store).

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""

from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("""
    CREATE TABLE chonkit.documents (
        id           uuid PRIMARY KEY,
        name         text NOT NULL CHECK (length(name) BETWEEN 1 AND 255),
        label        text CHECK (length(label) <= 255),
        tags         text[] NOT NULL DEFAULT '{}',
        doc_type     text NOT NULL,
        media_type   text NOT NULL,
        sha256       char(64) NOT NULL,
        size_bytes   bigint NOT NULL CHECK (size_bytes > 0),
        page_count   integer,
        parse_config jsonb,
        chunk_config jsonb,
        created_at   timestamptz NOT NULL DEFAULT now(),
        updated_at   timestamptz NOT NULL DEFAULT now(),
        CONSTRAINT documents_sha256_key UNIQUE (sha256)
    )
    """)
    op.execute("CREATE INDEX documents_created_at_idx ON chonkit.documents (created_at DESC, id)")
    op.execute("CREATE INDEX documents_name_idx ON chonkit.documents (lower(name))")


def downgrade() -> None:
    op.execute("DROP TABLE chonkit.documents")
