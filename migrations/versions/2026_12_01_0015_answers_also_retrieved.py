"""An answer keeps apart the passages it cites (``citations``) and those it was given without citing them.

Before, ``citations`` held every retrieved passage, cited or not. Existing answers keep theirs as they are (all
counted as cited, so a revocation still withholds them). Downgrading folds the passages back into
``citations``, the list the previous code showed.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-01
"""

from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE kappi.messages ADD COLUMN also_retrieved jsonb NOT NULL DEFAULT '[]'")


def downgrade() -> None:
    op.execute("UPDATE kappi.messages SET citations = citations || also_retrieved WHERE also_retrieved <> '[]'")
    op.execute("ALTER TABLE kappi.messages DROP COLUMN also_retrieved")
