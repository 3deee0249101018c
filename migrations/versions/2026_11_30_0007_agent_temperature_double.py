"""Agent temperatures as double precision: ``real`` gave 0.2 back as 0.2000000029802322, so a client that sent
the value it had read looked like it changed the configuration (and made a new version). Stored values are
rounded to 4 decimals on the way, which is what they were before the single-precision rounding.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-30
"""

from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        "ALTER TABLE kappi.agent_versions ALTER COLUMN temperature TYPE double precision "
        "USING round(temperature::numeric, 4)::double precision"
    )


def downgrade() -> None:
    op.execute("ALTER TABLE kappi.agent_versions ALTER COLUMN temperature TYPE real")
