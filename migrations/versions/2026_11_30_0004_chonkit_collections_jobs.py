"""Chonkit collections, their documents, durable embedding jobs, parent chunks and embedding reports.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30
"""

from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("""
    CREATE TABLE chonkit.collections (
        id                 uuid PRIMARY KEY,
        name               text NOT NULL,
        vector_provider    text NOT NULL,
        embedding_provider text NOT NULL,
        model              text NOT NULL,
        dimension          integer NOT NULL CHECK (dimension > 0),
        groups             text[] NOT NULL DEFAULT '{}',
        created_at         timestamptz NOT NULL DEFAULT now(),
        updated_at         timestamptz NOT NULL DEFAULT now(),
        CONSTRAINT collections_provider_name_key UNIQUE (vector_provider, name)
    )
    """)
    # What each collection holds: the document version and configuration its vectors came from.
    op.execute("""
    CREATE TABLE chonkit.collection_documents (
        collection_id   uuid NOT NULL REFERENCES chonkit.collections (id) ON DELETE CASCADE,
        document_id     uuid NOT NULL REFERENCES chonkit.documents (id) ON DELETE CASCADE,
        document_sha256 char(64) NOT NULL,
        config_hash     text NOT NULL,
        chunk_count     integer NOT NULL,
        embedded_at     timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (collection_id, document_id)
    )
    """)
    op.execute("CREATE INDEX collection_documents_document_idx ON chonkit.collection_documents (document_id)")
    op.execute("""
    CREATE TABLE chonkit.jobs (
        id               uuid PRIMARY KEY,
        collection_id    uuid NOT NULL REFERENCES chonkit.collections (id) ON DELETE CASCADE,
        kind             text NOT NULL CHECK (kind IN ('embed', 'remove')),
        cancel_requested boolean NOT NULL DEFAULT false,
        created_at       timestamptz NOT NULL DEFAULT now()
    )
    """)
    op.execute("CREATE INDEX jobs_collection_idx ON chonkit.jobs (collection_id, created_at DESC)")
    # One row per document of a job; workers claim rows with FOR UPDATE SKIP LOCKED.
    op.execute("""
    CREATE TABLE chonkit.job_items (
        job_id        uuid NOT NULL REFERENCES chonkit.jobs (id) ON DELETE CASCADE,
        document_id   uuid NOT NULL,
        collection_id uuid NOT NULL,
        position      integer NOT NULL,
        stage         text NOT NULL DEFAULT 'queued' CHECK (stage IN
                      ('queued', 'parsing', 'chunking', 'embedding', 'writing',
                       'done', 'skipped', 'failed', 'cancelled')),
        error_code    text,
        error         text,
        attempts      integer NOT NULL DEFAULT 0,
        worker        text,
        heartbeat_at  timestamptz,
        started_at    timestamptz,
        finished_at   timestamptz,
        chunks        integer,
        tokens        integer,
        timings       jsonb NOT NULL DEFAULT '{}',
        PRIMARY KEY (job_id, document_id)
    )
    """)
    op.execute("CREATE INDEX job_items_claim_idx ON chonkit.job_items (stage, heartbeat_at)")
    # At most one unfinished item per (collection, document): concurrent requests cannot double-embed.
    op.execute("""
    CREATE UNIQUE INDEX job_items_one_pending_idx ON chonkit.job_items (collection_id, document_id)
        WHERE stage IN ('queued', 'parsing', 'chunking', 'embedding', 'writing')
    """)
    op.execute("""
    CREATE TABLE chonkit.parent_chunks (
        collection_id uuid NOT NULL REFERENCES chonkit.collections (id) ON DELETE CASCADE,
        document_id   uuid NOT NULL REFERENCES chonkit.documents (id) ON DELETE CASCADE,
        parent_index  integer NOT NULL,
        content       text NOT NULL,
        char_start    integer NOT NULL,
        char_end      integer NOT NULL,
        page_start    integer,
        page_end      integer,
        heading_path  text[] NOT NULL DEFAULT '{}',
        PRIMARY KEY (collection_id, document_id, parent_index)
    )
    """)
    op.execute("""
    CREATE TABLE chonkit.embedding_reports (
        id            bigserial PRIMARY KEY,
        collection_id uuid NOT NULL REFERENCES chonkit.collections (id) ON DELETE CASCADE,
        document_id   uuid NOT NULL,
        job_id        uuid,
        model         text NOT NULL,
        tokens        integer NOT NULL,
        vectors       integer NOT NULL,
        duration_ms   double precision NOT NULL,
        created_at    timestamptz NOT NULL DEFAULT now()
    )
    """)
    op.execute(
        "CREATE INDEX embedding_reports_collection_idx ON chonkit.embedding_reports (collection_id, document_id)"
    )


def downgrade() -> None:
    op.execute("DROP TABLE chonkit.embedding_reports")
    op.execute("DROP TABLE chonkit.parent_chunks")
    op.execute("DROP TABLE chonkit.job_items")
    op.execute("DROP TABLE chonkit.jobs")
    op.execute("DROP TABLE chonkit.collection_documents")
    op.execute("DROP TABLE chonkit.collections")
