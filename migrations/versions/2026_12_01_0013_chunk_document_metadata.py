"""Chunks carry their document's tags and label: the pending rename queue becomes a pending document update queue.

A chunk carries its document's name, tags and label (for citations and for metadata filters), so changing any of
them rewrites the chunks in every collection that holds the document. ``chonkit.pending_renames`` already held
exactly that work for names — one row per (collection, document), applied by the embedding worker with the
document's values as they are then, retried while a store is down — so it is renamed to
``chonkit.pending_document_updates`` and now applies all three fields.

Chunks written before this revision have no tags or label, so an update is queued for every document already
in a collection: the worker backfills them (a vector store being down only delays it).

Downgrade renames the queue back; its rows then mean renames again, which the previous code applies harmlessly
(it writes the document's current name). Tags and labels already written to chunks stay, unread.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-01
"""

from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE chonkit.pending_renames RENAME TO pending_document_updates")
    op.execute("ALTER INDEX chonkit.pending_renames_due_idx RENAME TO pending_document_updates_due_idx")
    op.execute("ALTER INDEX chonkit.pending_renames_document_idx RENAME TO pending_document_updates_document_idx")
    op.execute("ALTER INDEX chonkit.pending_renames_pkey RENAME TO pending_document_updates_pkey")
    for column in ("collection_id", "document_id"):
        op.execute(
            f"ALTER TABLE chonkit.pending_document_updates "
            f"RENAME CONSTRAINT pending_renames_{column}_fkey TO pending_document_updates_{column}_fkey"
        )
    op.execute("""
    INSERT INTO chonkit.pending_document_updates (collection_id, document_id)
    SELECT collection_id, document_id FROM chonkit.collection_documents
    ON CONFLICT (collection_id, document_id) DO UPDATE SET attempts = 0, error = NULL, next_attempt_at = now()
    """)


def downgrade() -> None:
    for column in ("collection_id", "document_id"):
        op.execute(
            f"ALTER TABLE chonkit.pending_document_updates "
            f"RENAME CONSTRAINT pending_document_updates_{column}_fkey TO pending_renames_{column}_fkey"
        )
    op.execute("ALTER INDEX chonkit.pending_document_updates_pkey RENAME TO pending_renames_pkey")
    op.execute("ALTER INDEX chonkit.pending_document_updates_document_idx RENAME TO pending_renames_document_idx")
    op.execute("ALTER INDEX chonkit.pending_document_updates_due_idx RENAME TO pending_renames_due_idx")
    op.execute("ALTER TABLE chonkit.pending_document_updates RENAME TO pending_renames")
