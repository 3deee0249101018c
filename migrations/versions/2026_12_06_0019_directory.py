"""The directory an identity provider pushes over SCIM (#28 item 5).

``directory.users`` and ``directory.groups`` hold each SCIM resource as its identity provider sent it (``resource``,
without ``id``, ``meta`` and the membership), plus the columns membership is read by: a user's ``user_name`` (unique
without regard to case, as RFC 7643 makes ``userName``), ``external_id`` and ``active``; a group's ``display_name``,
the group name collections are restricted to. ``directory.members`` is the membership itself (with the ``display``
the identity provider sent for the member, if any), the one table a request reads (by ``user_id``) to learn a
user's groups. Downgrade drops the schema and the directory with it.

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-06
"""

from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("CREATE SCHEMA directory")
    op.execute(
        """
        CREATE TABLE directory.users (
            id uuid PRIMARY KEY,
            user_name text NOT NULL,
            external_id text,
            active boolean NOT NULL,
            resource jsonb NOT NULL,
            version bigint NOT NULL DEFAULT 1,
            created timestamptz NOT NULL DEFAULT now(),
            modified timestamptz NOT NULL DEFAULT now()
        )
        """
    )
    op.execute("CREATE UNIQUE INDEX users_user_name ON directory.users (lower(user_name))")
    op.execute("CREATE INDEX users_external_id ON directory.users (external_id)")
    op.execute(
        """
        CREATE TABLE directory.groups (
            id uuid PRIMARY KEY,
            display_name text NOT NULL,
            external_id text,
            resource jsonb NOT NULL,
            version bigint NOT NULL DEFAULT 1,
            created timestamptz NOT NULL DEFAULT now(),
            modified timestamptz NOT NULL DEFAULT now()
        )
        """
    )
    op.execute("CREATE INDEX groups_display_name ON directory.groups (lower(display_name))")
    op.execute("CREATE INDEX groups_external_id ON directory.groups (external_id)")
    op.execute(
        """
        CREATE TABLE directory.members (
            group_id uuid NOT NULL REFERENCES directory.groups (id) ON DELETE CASCADE,
            user_id uuid NOT NULL REFERENCES directory.users (id) ON DELETE CASCADE,
            display text,
            PRIMARY KEY (group_id, user_id)
        )
        """
    )
    op.execute("CREATE INDEX members_user ON directory.members (user_id)")


def downgrade() -> None:
    op.execute("DROP SCHEMA directory CASCADE")
