"""Job items say why they were skipped: a document already embedded with the same content and settings showed
stage ``skipped`` and nothing else.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-01
"""

from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE chonkit.job_items ADD COLUMN reason text")


def downgrade() -> None:
    op.execute("ALTER TABLE chonkit.job_items DROP COLUMN reason")
