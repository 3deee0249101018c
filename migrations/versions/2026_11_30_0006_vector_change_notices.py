"""pgvector collections announce their changes: ``NOTIFY ragu_vectors, '<collection>'`` after every statement
that writes one, so processes that keep a collection in memory (``common.vectors.resident``) drop their copy
the moment a write commits — whoever the writer is.

A statement-level trigger on each collection table calls :func:`vectors.ragu_collection_changed`; PostgreSQL
delivers the notice at commit and folds duplicates within a transaction, so a batch of upserts costs one
notice. The SQL is ``common.vectors.changes``'s, which collections created later get too; this revision adds
the trigger to the collection tables that already exist.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-30
"""

# ruff: noqa: S608 -- the SQL is built from common.vectors.changes's constants only.

from alembic import op

from common.vectors.changes import NOTIFY_FUNCTION, add_trigger

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

# Every table of the schema shaped like a collection (id uuid, embedding, payload jsonb) gets the trigger.
ADD_TO_EXISTING = f"""
DO $$
DECLARE t record;
BEGIN
    FOR t IN
        SELECT c.oid::regclass AS tab FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = 'vectors' AND c.relkind = 'r'
          AND EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = 'id' AND NOT a.attisdropped)
          AND EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = 'embedding'
                      AND NOT a.attisdropped)
          AND EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = 'payload'
                      AND NOT a.attisdropped)
    LOOP
        EXECUTE format('{add_trigger("%s")}', t.tab);
    END LOOP;
END
$$
"""


def upgrade() -> None:
    op.execute(NOTIFY_FUNCTION)
    op.execute(ADD_TO_EXISTING)


def downgrade() -> None:
    op.execute("DROP FUNCTION vectors.ragu_collection_changed() CASCADE")  # CASCADE: the triggers go with it
