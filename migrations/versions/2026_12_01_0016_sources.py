"""Placeholder for #18 (sources); filled in by the work on it.

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-01
"""

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
