"""Renamed documents: which collections' chunks must still be given the document's new name.

A chunk carries its document's name (for citations), so a rename rewrites the chunks in every collection that
holds the document. The rename request records one row per collection here in its own transaction, and the
embedding worker applies them; a row whose vector store is down stays, and is tried again later, so a rename
is never lost. The row holds no name: whoever applies it writes the document's name as it is then.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-01
"""

from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("""
    CREATE TABLE chonkit.pending_renames (
        collection_id   uuid NOT NULL REFERENCES chonkit.collections (id) ON DELETE CASCADE,
        document_id     uuid NOT NULL REFERENCES chonkit.documents (id) ON DELETE CASCADE,
        attempts        integer NOT NULL DEFAULT 0,
        next_attempt_at timestamptz NOT NULL DEFAULT now(),
        error           text,
        PRIMARY KEY (collection_id, document_id)
    )
    """)
    op.execute("CREATE INDEX pending_renames_due_idx ON chonkit.pending_renames (next_attempt_at)")
    op.execute("CREATE INDEX pending_renames_document_idx ON chonkit.pending_renames (document_id)")


def downgrade() -> None:
    op.execute("DROP TABLE chonkit.pending_renames")
