"""Placeholder for #18 (reembedding); filled in by the work on it.

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-01
"""

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
