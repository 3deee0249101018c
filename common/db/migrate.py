"""Run the Alembic revisions in ``migrations/`` programmatically (``ragu migrate``, app start, tests).

Alembic's commands are synchronous and start their own event loop, so call these from plain threads
(``asyncio.to_thread``) when a loop is already running.

Alembic (with SQLAlchemy, ~0.7 s to import) is imported by the function that runs it: most processes that import
this module (a server with ``RAGU_AUTO_MIGRATE=false``, ``ragu worker``, the CLI's other commands) never migrate,
and each would pay for it at start. These run before a server answers anything, never while it serves.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS_DIR = Path(__file__).resolve().parents[2] / "migrations"


def sqlalchemy_url(url: str) -> str:
    """Point SQLAlchemy at the asyncpg driver for a ``postgresql://`` URL."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme not in {"postgres", "postgresql", "postgresql+asyncpg"}:
        raise ValueError("DATABASE_URL must be a postgresql:// URL")
    return f"postgresql+asyncpg://{rest}"


def _config(url: str) -> Config:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.attributes["database_url"] = url
    return config


def upgrade(url: str, revision: str = "head") -> None:
    from alembic import command

    command.upgrade(_config(url), revision)


def downgrade(url: str, revision: str) -> None:
    from alembic import command

    command.downgrade(_config(url), revision)


def current_heads() -> set[str]:
    """The head revision(s) of the scripts on disk."""
    from alembic.script import ScriptDirectory

    return set(ScriptDirectory.from_config(_config("postgresql://unused")).get_heads())
