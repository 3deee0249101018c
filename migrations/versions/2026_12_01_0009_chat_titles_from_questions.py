"""A chat started without a title is titled from its first question.

Until then its title is NULL (shown as "New chat"); the first question sets it, unless the user named the chat.
Downgrading gives untitled chats the old placeholder back.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-01
"""

from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE kappi.chats ALTER COLUMN title DROP NOT NULL")


def downgrade() -> None:
    op.execute("UPDATE kappi.chats SET title = 'New chat' WHERE title IS NULL")
    op.execute("ALTER TABLE kappi.chats ALTER COLUMN title SET NOT NULL")
