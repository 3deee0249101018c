"""SQL for ``kappi.chats`` and ``kappi.messages``. Every read is scoped to the owner: another user's
chat is indistinguishable from one that does not exist."""

from __future__ import annotations

from typing import Any
from uuid import UUID

import msgspec

from common.db.database import Connection
from kappi.chat.models import ChatRow, Citation, Message, Timings
from kappi.llm.base import Usage

_CHAT = """SELECT c.id, c.agent_id, a.name AS agent_name, a.groups AS agent_groups, a.active AS agent_active,
                  c.title, c.created_at, c.updated_at
           FROM kappi.chats c JOIN kappi.agents a ON a.id = c.agent_id"""
_COLUMNS = "id, role, content, status, agent_version, citations, also_retrieved, usage, timings, error_code, created_at"
_MESSAGE = f"SELECT {_COLUMNS} FROM kappi.messages"


class ChatRepository:
    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    async def create(self, chat_id: UUID, agent_id: UUID, owner: str, title: str | None) -> None:
        await self.conn.execute(
            "INSERT INTO kappi.chats (id, agent_id, owner, title) VALUES ($1, $2, $3, $4)",
            chat_id,
            agent_id,
            owner,
            title,
        )

    async def get(self, chat_id: UUID, owner: str) -> ChatRow | None:
        record = await self.conn.fetchrow(_CHAT + " WHERE c.id = $1 AND c.owner = $2", chat_id, owner)
        return None if record is None else msgspec.convert(dict(record), ChatRow)

    async def of_owner(self, owner: str, limit: int, offset: int) -> list[ChatRow]:
        records = await self.conn.fetch(
            _CHAT + " WHERE c.owner = $1 ORDER BY c.updated_at DESC, c.id LIMIT $2 OFFSET $3", owner, limit, offset
        )
        return [msgspec.convert(dict(r), ChatRow) for r in records]

    async def title_if_untitled(self, chat_id: UUID, title: str) -> None:
        await self.conn.execute("UPDATE kappi.chats SET title = $2 WHERE id = $1 AND title IS NULL", chat_id, title)

    async def rename(self, chat_id: UUID, owner: str, title: str) -> bool:
        status = await self.conn.execute(
            "UPDATE kappi.chats SET title = $3, updated_at = now() WHERE id = $1 AND owner = $2", chat_id, owner, title
        )
        return status.endswith(" 1")

    async def delete(self, chat_id: UUID, owner: str) -> bool:
        status = await self.conn.execute("DELETE FROM kappi.chats WHERE id = $1 AND owner = $2", chat_id, owner)
        return status.endswith(" 1")

    async def messages(self, chat_id: UUID, *, limit: int | None = None) -> list[Message]:
        """Oldest first; with ``limit``, the most recent ones."""
        if limit is None:
            records = await self.conn.fetch(_MESSAGE + " WHERE chat_id = $1 ORDER BY created_at, id", chat_id)
        else:
            records = await self.conn.fetch(
                f"SELECT * FROM ({_MESSAGE} WHERE chat_id = $1 ORDER BY created_at DESC, id DESC LIMIT $2) recent "
                "ORDER BY created_at, id",
                chat_id,
                limit,
            )
        return [msgspec.convert(dict(r), Message) for r in records]

    async def add_message(
        self,
        message_id: UUID,
        chat_id: UUID,
        role: str,
        content: str,
        *,
        status: str = "complete",
        agent_version: int | None = None,
        citations: list[Citation] | None = None,
        also_retrieved: list[Citation] | None = None,
        usage: Usage | None = None,
        timings: Timings | None = None,
        error_code: str | None = None,
    ) -> Message:
        record = await self.conn.fetchrow(
            f"""INSERT INTO kappi.messages (id, chat_id, role, content, status, agent_version, citations,
                                            also_retrieved, usage, timings, error_code)
                VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
                RETURNING {_COLUMNS}""",
            message_id,
            chat_id,
            role,
            content,
            status,
            agent_version,
            _builtins(citations or []),
            _builtins(also_retrieved or []),
            _builtins(usage),
            _builtins(timings),
            error_code,
        )
        await self.conn.execute("UPDATE kappi.chats SET updated_at = now() WHERE id = $1", chat_id)
        return msgspec.convert(dict(record or {}), Message)

    async def finish_message(
        self,
        message_id: UUID,
        content: str,
        *,
        status: str,
        citations: list[Citation],
        usage: Usage,
        timings: Timings,
        error_code: str | None,
        also_retrieved: list[Citation] | None = None,
    ) -> Message | None:
        """Complete a ``pending`` answer in place; ``None`` when there is none (its chat was deleted meanwhile)."""
        record = await self.conn.fetchrow(
            f"""UPDATE kappi.messages
                SET content = $2, status = $3, citations = $4, usage = $5, timings = $6, error_code = $7,
                    also_retrieved = $8
                WHERE id = $1 AND status = 'pending'
                RETURNING {_COLUMNS}""",
            message_id,
            content,
            status,
            _builtins(citations),
            _builtins(usage),
            _builtins(timings),
            error_code,
            _builtins(also_retrieved or []),
        )
        if record is None:
            return None
        await self.conn.execute(
            "UPDATE kappi.chats SET updated_at = now() WHERE id = (SELECT chat_id FROM kappi.messages WHERE id = $1)",
            message_id,
        )
        return msgspec.convert(dict(record), Message)

    async def message(self, message_id: UUID) -> Message | None:
        record = await self.conn.fetchrow(_MESSAGE + " WHERE id = $1", message_id)
        return None if record is None else msgspec.convert(dict(record), Message)


def _builtins(value: Any) -> Any:
    return None if value is None else msgspec.to_builtins(value)
