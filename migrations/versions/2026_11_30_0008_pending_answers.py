"""Answers are stored as ``pending`` together with their question, then completed in place.

Before, an answer row was written only when the answer ended, so a question whose answer could not be saved
(the database gone at that moment, or the process killed mid-answer) stayed in the history with no answer at
all. Downgrading turns answers still pending into errors, which the old statuses can hold.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-30
"""

from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE kappi.messages DROP CONSTRAINT messages_status_check")
    op.execute(
        "ALTER TABLE kappi.messages ADD CONSTRAINT messages_status_check "
        "CHECK (status IN ('pending', 'complete', 'error', 'cancelled'))"
    )


def downgrade() -> None:
    op.execute(
        "UPDATE kappi.messages SET status = 'error', error_code = coalesce(error_code, 'answer_interrupted') "
        "WHERE status = 'pending'"
    )
    op.execute("ALTER TABLE kappi.messages DROP CONSTRAINT messages_status_check")
    op.execute(
        "ALTER TABLE kappi.messages ADD CONSTRAINT messages_status_check "
        "CHECK (status IN ('complete', 'error', 'cancelled'))"
    )
