"""Property (#28 item 5): with a directory, the groups every channel acts under are the directory's current
membership, whatever the token claims, and a deactivated user gets none at all.

Hypothesis draws a directory (users, their ``active`` flag, groups and members, written through the SCIM storage to
real PostgreSQL) and, for each user, the groups their token claims (an attacker's wish list, or stale ones); each
user's real HS256 token goes through :meth:`Authenticator.authenticate`, the one place every channel gets its
principal. The access property tests (tests/kappi/test_access_property*.py) prove that chunks follow the principal's
groups; this one proves the principal's groups follow the directory. Run with the directory switched off (the
token's claim decides), the property must fail: Hypothesis finds the counterexample, so the check is what holds it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import asyncpg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from common.auth import Authenticator, mint_dev_token
from common.config import Settings, load_settings
from common.db import SingleConnectionDatabase
from common.db.database import init_connection
from common.directory.scim import PROVIDER
from common.directory.storage import PostgresStorage
from common.errors import Forbidden
from tests.conftest import TEST_SECRET
from tests.support.directory import SCIM_TOKEN, group, user

T = TypeVar("T")
GROUPS = ("hr", "legal", "exec", "eng")
USERS = ("ann", "ben", "cy")
group_sets = st.frozensets(st.sampled_from(GROUPS))
directories = st.fixed_dictionaries(
    {
        "membership": st.fixed_dictionaries(dict.fromkeys(USERS, group_sets)),
        "active": st.fixed_dictionaries({u: st.booleans() for u in USERS}),
        "claimed": st.fixed_dictionaries(dict.fromkeys(USERS, group_sets)),
    }
)


class DirectoryWorld:
    """One connection in a transaction rolled back at the end, on a private event loop (a synchronous property)."""

    def __init__(self, database_url: str, tmp_path: Path) -> None:
        self.loop = asyncio.new_event_loop()
        self.conn = self.run(asyncpg.connect(database_url))
        self.run(init_connection(self.conn))
        self.tx = self.conn.transaction()
        self.run(self.tx.start())
        self.db = SingleConnectionDatabase(self.conn)
        self.settings = load_settings({}, data_dir=str(tmp_path / "data"), auth_hs256_secret=TEST_SECRET)

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return self.loop.run_until_complete(coroutine)

    async def write(self, example: dict[str, Any]) -> None:
        """The drawn directory, through the SCIM storage (what the endpoint writes with), replacing the last one."""
        async with self.db.transaction() as conn:
            await conn.execute("DELETE FROM directory.groups; DELETE FROM directory.users")
            storage = PostgresStorage(conn, for_update=True)
            users, groups = PROVIDER.resource_types
            ids = {}
            for name in USERS:
                ids[name] = (await storage.create(users, user(name, active=example["active"][name]))).id
            for name in GROUPS:
                members = [str(ids[u]) for u in USERS if name in example["membership"][u]]
                await storage.create(groups, group(name, *members))

    def authenticator(self, *, directory: bool) -> Authenticator:
        settings: Settings = self.settings
        if directory:
            settings = load_settings(
                {}, data_dir=settings.server.data_dir, auth_hs256_secret=TEST_SECRET, scim_token=SCIM_TOKEN
            )
        authenticator = Authenticator(settings)
        authenticator.bind_database(self.db)
        return authenticator

    def close(self) -> None:
        self.run(self.tx.rollback())
        self.run(self.conn.close())
        self.loop.close()


@pytest.fixture
def directory_world(database_url: str, tmp_path: Path) -> Iterator[DirectoryWorld]:
    world = DirectoryWorld(database_url, tmp_path)
    try:
        yield world
    finally:
        world.close()


async def _check(world: DirectoryWorld, authenticator: Authenticator, example: dict[str, Any]) -> None:
    await world.write(example)
    for name in USERS:
        token = mint_dev_token(world.settings, subject=name, groups=example["claimed"][name])
        try:
            groups: frozenset[str] | str = (await authenticator.authenticate(f"Bearer {token}")).groups
        except Forbidden as refused:
            groups = refused.code
        assert groups == (example["membership"][name] if example["active"][name] else "user_deactivated"), name


def _property(world: DirectoryWorld, *, directory: bool) -> None:
    authenticator = world.authenticator(directory=directory)

    @settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(example=directories)
    def holds(example: dict[str, Any]) -> None:
        world.run(_check(world, authenticator, example))

    holds()


def test_the_principals_groups_are_the_directorys_membership(directory_world: DirectoryWorld) -> None:
    _property(directory_world, directory=True)


def test_without_the_directory_check_the_property_fails(directory_world: DirectoryWorld) -> None:
    """The check switched off: a token's own claim decides, and Hypothesis finds a user it lets in wrongly."""
    with pytest.raises((AssertionError, ExceptionGroup)) as failed:  # several distinct failures come grouped
        _property(directory_world, directory=False)
    if isinstance(failed.value, ExceptionGroup):
        assert failed.value.subgroup(AssertionError) is not None


def test_a_membership_drawn_is_written_as_drawn(directory_world: DirectoryWorld) -> None:
    """The world is not vacuous: what the storage wrote is what the SQL reads back, group by group."""
    example = {
        "membership": {"ann": frozenset({"hr", "eng"}), "ben": frozenset(), "cy": frozenset({"hr"})},
        "active": dict.fromkeys(USERS, True),
        "claimed": dict.fromkeys(USERS, frozenset()),
    }
    directory_world.run(directory_world.write(example))
    rows = directory_world.run(
        directory_world.conn.fetch(
            "SELECT g.display_name, array_agg(u.user_name ORDER BY u.user_name) AS users FROM directory.members m "
            "JOIN directory.groups g ON g.id = m.group_id JOIN directory.users u ON u.id = m.user_id "
            "GROUP BY g.display_name ORDER BY 1"
        )
    )
    assert [(r["display_name"], r["users"]) for r in rows] == [("eng", ["ann"]), ("hr", ["ann", "cy"])]
