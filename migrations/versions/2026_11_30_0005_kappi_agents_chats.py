"""Kappi agents (with versioned configurations), their collection assignments, chats and messages.

Assignments name a collection by vector provider and name, and remember the identity's
collection_id only to notice a collection replaced under the same name. Groups are never copied
here: kappi reads them from the identity record on every question.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-30
"""

from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("""
    CREATE TABLE kappi.agents (
        id              uuid PRIMARY KEY,
        name            text NOT NULL CHECK (length(name) BETWEEN 1 AND 120),
        description     text NOT NULL DEFAULT '',
        groups          text[] NOT NULL DEFAULT '{}',
        active          boolean NOT NULL DEFAULT true,
        current_version integer NOT NULL,
        created_at      timestamptz NOT NULL DEFAULT now(),
        updated_at      timestamptz NOT NULL DEFAULT now()
    )
    """)
    op.execute("""
    CREATE TABLE kappi.agent_versions (
        agent_id         uuid NOT NULL REFERENCES kappi.agents (id) ON DELETE CASCADE,
        version          integer NOT NULL,
        llm_provider     text NOT NULL,
        llm_model        text NOT NULL,
        system_prompt    text NOT NULL,
        context_template text,
        temperature      real NOT NULL,
        max_tokens       integer NOT NULL,
        created_by       text NOT NULL,
        created_at       timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (agent_id, version)
    )
    """)
    op.execute("""
    CREATE TABLE kappi.agent_collections (
        agent_id        uuid NOT NULL REFERENCES kappi.agents (id) ON DELETE CASCADE,
        vector_provider text NOT NULL,
        collection_name text NOT NULL,
        collection_id   text NOT NULL,
        top_k           integer NOT NULL CHECK (top_k BETWEEN 1 AND 50),
        max_distance    real CHECK (max_distance >= 0 AND max_distance <= 2),
        instruction     text NOT NULL DEFAULT '',
        created_at      timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (agent_id, vector_provider, collection_name)
    )
    """)
    op.execute("""
    CREATE TABLE kappi.chats (
        id         uuid PRIMARY KEY,
        agent_id   uuid NOT NULL REFERENCES kappi.agents (id) ON DELETE CASCADE,
        owner      text NOT NULL,
        title      text NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now()
    )
    """)
    op.execute("CREATE INDEX chats_owner_idx ON kappi.chats (owner, updated_at DESC)")
    op.execute("""
    CREATE TABLE kappi.messages (
        id            uuid PRIMARY KEY,
        chat_id       uuid NOT NULL REFERENCES kappi.chats (id) ON DELETE CASCADE,
        role          text NOT NULL CHECK (role IN ('user', 'assistant')),
        content       text NOT NULL,
        status        text NOT NULL DEFAULT 'complete' CHECK (status IN ('complete', 'error', 'cancelled')),
        agent_version integer,
        citations     jsonb NOT NULL DEFAULT '[]',
        usage         jsonb,
        timings       jsonb,
        error_code    text,
        created_at    timestamptz NOT NULL DEFAULT clock_timestamp()
    )
    """)
    op.execute("CREATE INDEX messages_chat_idx ON kappi.messages (chat_id, created_at)")


def downgrade() -> None:
    op.execute("DROP TABLE kappi.messages")
    op.execute("DROP TABLE kappi.chats")
    op.execute("DROP TABLE kappi.agent_collections")
    op.execute("DROP TABLE kappi.agent_versions")
    op.execute("DROP TABLE kappi.agents")
