"""Placeholder for #18 (ocr); filled in by the work on it.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-01
"""

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
