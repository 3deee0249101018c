"""Re-embedding (#18): a collection's move to another embedding model, built beside it and swapped in at once.

``chonkit.collection_migrations`` holds one row per move: the job whose items re-embed the collection's documents
(kind ``reembed``), the store-side name of the new version being built, the target provider, model and dimension,
and its state (``building`` → ``done``, or ``failed`` / ``cancelled`` with the new version dropped). At most one is
``building`` per collection. ``chonkit.migration_documents`` keeps what each re-embedded document will be in the
collection once swapped (its chunk count, config hash and parent chunks), so that the swap rewrites chonkit's rows
in the same transaction that records it.

The ``reembed`` job kind is added to whatever kinds the jobs table allows (another revision may add its own).

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-01
"""

from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("""
    DO $$
    DECLARE definition text;
    BEGIN
        SELECT pg_get_constraintdef(oid) INTO definition FROM pg_constraint
        WHERE conrelid = 'chonkit.jobs'::regclass AND conname = 'jobs_kind_check';
        IF definition NOT LIKE '%''reembed''%' THEN
            ALTER TABLE chonkit.jobs DROP CONSTRAINT jobs_kind_check;
            EXECUTE 'ALTER TABLE chonkit.jobs ADD CONSTRAINT jobs_kind_check '
                || replace(definition, '''remove''::text', '''remove''::text, ''reembed''::text');
        END IF;
    END $$
    """)
    op.execute("""
    CREATE TABLE chonkit.collection_migrations (
        job_id             uuid PRIMARY KEY REFERENCES chonkit.jobs (id) ON DELETE CASCADE,
        collection_id      uuid NOT NULL REFERENCES chonkit.collections (id) ON DELETE CASCADE,
        version            text NOT NULL,
        from_provider      text NOT NULL,
        from_model         text NOT NULL,
        embedding_provider text NOT NULL,
        model              text NOT NULL,
        dimension          integer NOT NULL CHECK (dimension > 0),
        state              text NOT NULL DEFAULT 'building'
                           CHECK (state IN ('building', 'done', 'failed', 'cancelled')),
        error_code         text,
        error              text,
        created_at         timestamptz NOT NULL DEFAULT now(),
        finished_at        timestamptz
    )
    """)
    op.execute("""
    CREATE UNIQUE INDEX collection_migrations_one_building_idx ON chonkit.collection_migrations (collection_id)
        WHERE state = 'building'
    """)
    op.execute("CREATE INDEX collection_migrations_collection_idx ON chonkit.collection_migrations (collection_id)")
    op.execute("""
    CREATE TABLE chonkit.migration_documents (
        job_id          uuid NOT NULL REFERENCES chonkit.collection_migrations (job_id) ON DELETE CASCADE,
        document_id     uuid NOT NULL,
        document_sha256 text NOT NULL,
        config_hash     text NOT NULL,
        chunk_count     integer NOT NULL,
        parents         jsonb NOT NULL DEFAULT '[]',
        PRIMARY KEY (job_id, document_id)
    )
    """)


def downgrade() -> None:
    op.execute("DROP TABLE chonkit.migration_documents")
    op.execute("DROP TABLE chonkit.collection_migrations")
    op.execute("DELETE FROM chonkit.jobs WHERE kind = 'reembed'")
    op.execute("""
    DO $$
    DECLARE definition text;
    BEGIN
        SELECT pg_get_constraintdef(oid) INTO definition FROM pg_constraint
        WHERE conrelid = 'chonkit.jobs'::regclass AND conname = 'jobs_kind_check';
        IF definition LIKE '%''reembed''%' THEN
            ALTER TABLE chonkit.jobs DROP CONSTRAINT jobs_kind_check;
            EXECUTE 'ALTER TABLE chonkit.jobs ADD CONSTRAINT jobs_kind_check '
                || replace(definition, ', ''reembed''::text', '');
        END IF;
    END $$
    """)
