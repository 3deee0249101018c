"""pgvector collections: the ``vector`` extension and the ``vectors`` schema that holds one table per collection.

The collection tables themselves are created at run time by ``common.vectors.pgvector`` (collections are
data, not schema), so the downgrade drops the schema with CASCADE: every pgvector collection goes with it.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30
"""

from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("CREATE EXTENSION IF NOT EXISTS vector")
    op.execute("CREATE SCHEMA vectors")


def downgrade() -> None:
    op.execute("DROP SCHEMA vectors CASCADE")
    # The extension is left installed: it may predate this revision (IF NOT EXISTS above) or serve other
    # tables, and dropping it would need CASCADE through objects that are not ours.
