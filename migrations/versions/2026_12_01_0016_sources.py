"""Sources (#18): folders and web sites a collection is kept in sync with, what each one's items became (the
document and the content hash a sync compares with), and durable sync runs with their reports.

At most one run per source is unfinished (a partial unique index), so two requests, a schedule and any number
of workers can never sync one source twice at once.

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-01
"""

from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("""
    CREATE TABLE chonkit.sources (
        id               uuid PRIMARY KEY,
        collection_id    uuid NOT NULL REFERENCES chonkit.collections (id) ON DELETE CASCADE,
        name             text NOT NULL,
        kind             text NOT NULL CHECK (kind IN ('folder', 'web')),
        spec             jsonb NOT NULL,
        schedule_minutes integer CHECK (schedule_minutes > 0),
        created_at       timestamptz NOT NULL DEFAULT now(),
        updated_at       timestamptz NOT NULL DEFAULT now(),
        CONSTRAINT sources_collection_name_key UNIQUE (collection_id, name)
    )
    """)
    # What each item of a source became the last time it was synced: the sync's memory.
    op.execute("""
    CREATE TABLE chonkit.source_items (
        source_id    uuid NOT NULL REFERENCES chonkit.sources (id) ON DELETE CASCADE,
        key          text NOT NULL,
        document_id  uuid NOT NULL REFERENCES chonkit.documents (id) ON DELETE CASCADE,
        content_hash char(64) NOT NULL,
        synced_at    timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (source_id, key)
    )
    """)
    op.execute("CREATE INDEX source_items_document_idx ON chonkit.source_items (document_id)")
    op.execute("""
    CREATE TABLE chonkit.source_runs (
        id               uuid PRIMARY KEY,
        source_id        uuid NOT NULL REFERENCES chonkit.sources (id) ON DELETE CASCADE,
        trigger          text NOT NULL CHECK (trigger IN ('manual', 'schedule', 'retry')),
        status           text NOT NULL DEFAULT 'queued'
                         CHECK (status IN ('queued', 'listing', 'embedding', 'done', 'failed', 'cancelled')),
        job_id           uuid REFERENCES chonkit.jobs (id) ON DELETE SET NULL,
        cancel_requested boolean NOT NULL DEFAULT false,
        unchanged        integer NOT NULL DEFAULT 0,
        error_code       text,
        error            text,
        worker           text,
        heartbeat_at     timestamptz,
        attempts         integer NOT NULL DEFAULT 0,
        created_at       timestamptz NOT NULL DEFAULT now(),
        started_at       timestamptz,
        finished_at      timestamptz
    )
    """)
    op.execute("""
    CREATE UNIQUE INDEX source_runs_one_active_idx ON chonkit.source_runs (source_id)
        WHERE status IN ('queued', 'listing', 'embedding')
    """)
    op.execute("CREATE INDEX source_runs_source_idx ON chonkit.source_runs (source_id, created_at DESC)")
    # The items a run found new, changed, gone, failed or skipped (unchanged ones are only counted).
    op.execute("""
    CREATE TABLE chonkit.source_run_items (
        run_id               uuid NOT NULL REFERENCES chonkit.source_runs (id) ON DELETE CASCADE,
        key                  text NOT NULL,
        action               text NOT NULL CHECK (action IN ('added', 'changed', 'removed', 'failed', 'skipped')),
        document_id          uuid,
        previous_document_id uuid,
        content_hash         char(64),
        created_document     boolean NOT NULL DEFAULT false,
        code                 text,
        reason               text,
        PRIMARY KEY (run_id, key)
    )
    """)


def downgrade() -> None:
    op.execute("DROP TABLE chonkit.source_run_items")
    op.execute("DROP TABLE chonkit.source_runs")
    op.execute("DROP TABLE chonkit.source_items")
    op.execute("DROP TABLE chonkit.sources")
