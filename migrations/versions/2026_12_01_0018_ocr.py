"""Documents say which of their pages OCR reads (#18).

``chonkit.documents.ocr_pages``: the pages the upload's check found without a text layer (every frame of an image),
which the parse option ``ocr: auto`` recognises. Existing rows get ``{}``, which is true of them: before OCR a
document without text was refused at upload. Downgrade drops the column; image documents stay readable by the
previous code as rows (their ``doc_type`` is text), though it cannot parse them.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-01
"""

from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE chonkit.documents ADD COLUMN ocr_pages integer[] NOT NULL DEFAULT '{}'")


def downgrade() -> None:
    op.execute("ALTER TABLE chonkit.documents DROP COLUMN ocr_pages")
