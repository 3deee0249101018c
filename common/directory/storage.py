"""SCIM users and groups in PostgreSQL, as scim2-server's storage: the protocol (validation, PATCH, filters,
discovery) is the library's, this module only reads and writes rows.

A group's members live in ``directory.members`` only, never in the stored resource, so deleting a user takes them
out of every group at once (the foreign key cascades) and membership is read by one indexed query
(:mod:`common.directory.membership`). A user's ``groups`` (read-only in RFC 7643) is filled from the same table.
A search comparing ``id``, ``userName``, ``externalId`` or ``displayName`` with ``eq`` (what identity providers send
before they create or update) reads the matching rows by index; any other filter reads the resource type's rows
and lets scim2-models evaluate it.
"""

from __future__ import annotations

import uuid
from typing import Any, Final, cast

import asyncpg
from scim2_models import (
    EnterpriseUser,
    Group,
    InvalidValueException,
    NotFoundException,
    PreconditionFailedException,
    Resource,
    ResourceType,
    ResponseParameters,
    SearchRequest,
    UniquenessException,
    User,
)
from scim2_models.path import CompareOperator, Comparison
from scim2_server.storage import AsyncScimStorage, SearchPage

from common.db.database import Connection

DirectoryUser = User[EnterpriseUser]
"""Users carry the enterprise extension: Entra ID and Okta send its attributes (department, manager)."""

_SERVER_SET: Final = ("id", "meta", "groups", "members")
_TABLES: Final = {"User": "directory.users", "Group": "directory.groups"}
_INDEXED: Final = {
    ("User", "id"): "id = $1::uuid",
    ("User", "username"): "lower(user_name) = lower($1)",
    ("User", "externalid"): "external_id = $1",
    ("Group", "id"): "id = $1::uuid",
    ("Group", "displayname"): "lower(display_name) = lower($1)",
    ("Group", "externalid"): "external_id = $1",
}
"""Equality filters read by index, by resource type and attribute (lower-cased, without its schema URN)."""

_USERS: Final = """
SELECT u.*, coalesce(
    (SELECT jsonb_agg(jsonb_build_object('value', g.id::text, 'display', g.display_name,
                                         '$ref', 'Groups/' || g.id::text, 'type', 'direct') ORDER BY g.id)
     FROM directory.members m JOIN directory.groups g ON g.id = m.group_id WHERE m.user_id = u.id),
    '[]'::jsonb) AS related
FROM directory.users u
"""
_GROUPS: Final = """
SELECT g.*, coalesce(
    (SELECT jsonb_agg(jsonb_build_object('value', u.id::text, 'display', coalesce(m.display, u.user_name),
                                         '$ref', 'Users/' || u.id::text, 'type', 'User') ORDER BY u.id)
     FROM directory.members m JOIN directory.users u ON u.id = m.user_id WHERE m.group_id = g.id),
    '[]'::jsonb) AS related
FROM directory.groups g
"""


def _version(number: int) -> str:
    return f'W/"{number}"'


def _resource(name: str, row: asyncpg.Record) -> Resource[Any]:
    """A stored row as its SCIM resource, with the server-set attributes filled in."""
    body = dict(row["resource"])
    body["id"] = str(row["id"])
    body["meta"] = {
        "resourceType": name,
        "created": row["created"].isoformat(),
        "lastModified": row["modified"].isoformat(),
        "version": _version(row["version"]),
    }
    related = list(row["related"])
    if related:
        body["groups" if name == "User" else "members"] = related
    return (DirectoryUser if name == "User" else Group).model_validate(body)


def _stored_body(resource: Resource[Any]) -> dict[str, Any]:
    body = resource.model_dump()
    for key in _SERVER_SET:
        body.pop(key, None)
    return body


def _indexed_condition(name: str, search_request: SearchRequest[Any]) -> tuple[str, str] | None:
    """The indexed ``WHERE`` for a filter comparing one indexed attribute with ``eq``, and its value."""
    scim_filter = search_request.filter
    if scim_filter is None:
        return None
    node = scim_filter.ast
    if not isinstance(node, Comparison) or node.op != CompareOperator.eq or not isinstance(node.value, str):
        return None
    attribute = str(node.attr_path).rsplit(":", 1)[-1].lower()
    condition = _INDEXED.get((name, attribute))
    if condition is None or (attribute == "id" and not _is_uuid(node.value)):
        return None
    return condition, node.value


def _is_uuid(value: str) -> bool:
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True


def _members(group: Group) -> dict[uuid.UUID, str | None]:
    """The users a group names, with the display sent for each; a member that is not a user of this directory is
    refused, nested groups too."""
    members: dict[uuid.UUID, str | None] = {}
    for member in group.members or []:
        if member.type not in (None, "User") or member.value is None or not _is_uuid(member.value):
            raise InvalidValueException(detail=f"member {member.value!r} is not a user of this directory")
        members[uuid.UUID(member.value)] = member.display
    return members


_INSERT: Final = {
    "User": "INSERT INTO directory.users (id, user_name, external_id, active, resource) VALUES ($1, $2, $3, $4, $5)",
    "Group": "INSERT INTO directory.groups (id, display_name, external_id, resource) VALUES ($1, $2, $3, $4)",
}
_UPDATE: Final = {
    "User": "UPDATE directory.users SET user_name = $2, external_id = $3, active = $4, resource = $5, "
    "version = version + 1, modified = now() WHERE id = $1",
    "Group": "UPDATE directory.groups SET display_name = $2, external_id = $3, resource = $4, "
    "version = version + 1, modified = now() WHERE id = $1",
}


class PostgresStorage(AsyncScimStorage):
    """The directory tables over one connection, inside the transaction of one SCIM request.

    Args:
        conn: The request's connection, in its transaction.
        for_update: Lock what :meth:`get` reads until the request ends (any method but GET): a PATCH reads,
            applies and writes back, and two at once on one group must not lose either's change.
    """

    def __init__(self, conn: Connection, *, for_update: bool) -> None:
        self._conn = conn
        self._lock = " FOR UPDATE OF " if for_update else ""

    async def get(
        self,
        resource_type: ResourceType,
        resource_id: str,
        *,
        response_parameters: ResponseParameters[Any] | None = None,
    ) -> Resource[Any]:
        del response_parameters  # members and groups are one query away; the server trims the response
        name = cast(str, resource_type.name)
        query = _USERS if name == "User" else _GROUPS
        lock = f"{self._lock}{'u' if name == 'User' else 'g'}" if self._lock else ""
        row = None
        if _is_uuid(resource_id):
            row = await self._conn.fetchrow(f"{query} WHERE id = $1::uuid{lock}", resource_id)
        if row is None:
            raise NotFoundException(detail=f"{name} {resource_id!r} not found")
        return _resource(name, row)

    async def search(
        self,
        resource_types: list[ResourceType],
        search_request: SearchRequest[Any],
        *,
        position: Any = None,
    ) -> SearchPage:
        del position  # no cursors announced
        found: list[Resource[Any]] = []
        for resource_type in resource_types:
            name = cast(str, resource_type.name)
            query = _USERS if name == "User" else _GROUPS
            indexed = _indexed_condition(name, search_request)
            if indexed is None:
                rows = await self._conn.fetch(query)
            else:
                rows = await self._conn.fetch(f"{query} WHERE {indexed[0]}", indexed[1])
            resources = [_resource(name, row) for row in rows]
            scim_filter = search_request.filter
            found += [r for r in resources if scim_filter is None or scim_filter.match(r)]
        return _page(search_request, found)

    async def create(self, resource_type: ResourceType, resource: Resource[Any]) -> Resource[Any]:
        new_id = str(uuid.uuid4())
        await self._write(resource_type, resource, new_id, _INSERT)
        return await self.get(resource_type, new_id)

    async def update(
        self,
        resource_type: ResourceType,
        resource: Resource[Any],
        *,
        expected_version: str | None = None,
    ) -> Resource[Any]:
        resource_id = cast(str, resource.id)
        stored = await self.get(resource_type, resource_id)
        if expected_version is not None and stored.meta is not None and stored.meta.version != expected_version:
            raise PreconditionFailedException
        await self._write(resource_type, resource, resource_id, _UPDATE)
        return await self.get(resource_type, resource_id)

    async def _write(
        self, resource_type: ResourceType, resource: Resource[Any], resource_id: str, statements: dict[str, str]
    ) -> None:
        """A user's or a group's row (and a group's members) by ``statements``' INSERT or UPDATE of that type."""
        try:
            if resource_type.name == "User":
                user = cast(User[Any], resource)
                values: tuple[Any, ...] = (
                    user.user_name,
                    user.external_id,
                    user.active is not False,
                    _stored_body(user),
                )
                await self._conn.execute(statements["User"], uuid.UUID(resource_id), *values)
            else:
                group = cast(Group, resource)
                values = (group.display_name, group.external_id, _stored_body(group))
                await self._conn.execute(statements["Group"], uuid.UUID(resource_id), *values)
                await self._set_members(resource_id, _members(group))
        except asyncpg.UniqueViolationError:
            raise UniquenessException(detail="a user with this userName exists") from None
        except asyncpg.NotNullViolationError:
            raise InvalidValueException(detail="userName and displayName are required") from None

    async def delete(
        self,
        resource_type: ResourceType,
        resource_id: str,
        *,
        expected_version: str | None = None,
    ) -> None:
        stored = await self.get(resource_type, resource_id)
        if expected_version is not None and stored.meta is not None and stored.meta.version != expected_version:
            raise PreconditionFailedException
        table = _TABLES[cast(str, resource_type.name)]
        await self._conn.execute(f"DELETE FROM {table} WHERE id = $1::uuid", resource_id)  # noqa: S608 - a constant

    async def _set_members(self, group_id: str, members: dict[uuid.UUID, str | None]) -> None:
        user_ids = list(members)
        known = await self._conn.fetchval("SELECT count(*) FROM directory.users WHERE id = ANY($1::uuid[])", user_ids)
        if known != len(user_ids):
            raise InvalidValueException(detail="a member is not a user of this directory")
        await self._conn.execute("DELETE FROM directory.members WHERE group_id = $1::uuid", group_id)
        await self._conn.execute(
            "INSERT INTO directory.members (group_id, user_id, display) "
            "SELECT $1::uuid, * FROM unnest($2::uuid[], $3::text[])",
            group_id,
            user_ids,
            list(members.values()),
        )


def _page(search_request: SearchRequest[Any], found: list[Resource[Any]]) -> SearchPage:
    """Sort (missing values last, then by id) and cut the page ``startIndex`` and ``count`` ask for."""

    def key(resource: Resource[Any]) -> tuple[bool, Any, str]:
        value = search_request.sort_value(resource) if search_request.sort_by is not None else None
        return value is None, value if value is not None else "", cast(str, resource.id)

    descending = search_request.sort_by is not None and search_request.sort_order == SearchRequest.SortOrder.descending
    ordered = sorted(found, key=key, reverse=descending)
    start = search_request.start_index_0 or 0
    stop = None if search_request.count is None else start + search_request.count
    return SearchPage(total=len(ordered), resources=ordered[start:stop])
