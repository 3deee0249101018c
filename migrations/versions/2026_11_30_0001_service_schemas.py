"""Separate Postgres schemas for chonkit and kappi, so either service can move to its own database.

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""

from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("CREATE SCHEMA chonkit")
    op.execute("CREATE SCHEMA kappi")


def downgrade() -> None:
    op.execute("DROP SCHEMA kappi CASCADE")
    op.execute("DROP SCHEMA chonkit CASCADE")
