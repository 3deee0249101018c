"""How each assigned collection is searched, and the agent's reranker.

``kappi.agent_collections`` gains the retrieval mode (``dense``, ``lexical`` or ``hybrid``), the dense leg's
share of a hybrid search (``dense_weight``, 0..1) and metadata filters on the chunks' ``tags`` and ``label``
(NULL = no condition). Assignments that exist when this runs keep ``dense``, the only mode there was, so nobody's
answers change silently on upgrade; the column's default is then ``hybrid``, what a new assignment gets.

``kappi.agent_versions`` gains ``reranker`` and ``rerank_model`` (NULL = no reranking): they change answers, so
they are versioned like the LLM; existing versions have none, as before.

The downgrade drops the columns: the previous code searches every assignment densely and reranks nothing.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-01
"""

from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("""
    ALTER TABLE kappi.agent_collections
        ADD COLUMN mode text NOT NULL DEFAULT 'dense' CHECK (mode IN ('dense', 'lexical', 'hybrid')),
        ADD COLUMN dense_weight double precision NOT NULL DEFAULT 0.4 CHECK (dense_weight BETWEEN 0 AND 1),
        ADD COLUMN tags text[],
        ADD COLUMN labels text[]
    """)
    op.execute("ALTER TABLE kappi.agent_collections ALTER COLUMN mode SET DEFAULT 'hybrid'")
    op.execute("""
    ALTER TABLE kappi.agent_versions
        ADD COLUMN reranker text,
        ADD COLUMN rerank_model text,
        ADD CONSTRAINT agent_versions_rerank_model CHECK ((reranker IS NULL) = (rerank_model IS NULL))
    """)


def downgrade() -> None:
    op.execute("ALTER TABLE kappi.agent_versions DROP COLUMN rerank_model, DROP COLUMN reranker")
    op.execute(
        "ALTER TABLE kappi.agent_collections DROP COLUMN labels, DROP COLUMN tags, DROP COLUMN dense_weight, "
        "DROP COLUMN mode"
    )
