"""The SCIM endpoint (#28 item 5) in process, driven by the official scim2-client: users and groups kept in
PostgreSQL, PATCH, the filters identity providers send, discovery, and its own credential (a user's token is
refused there, the SCIM credential is refused everywhere else)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import msgspec
import pytest
from scim2_models import Error, Group, SearchRequest, ServiceProviderConfig

from common.auth import mint_dev_token
from common.clients import SharedClients
from common.config import Settings, reveal
from common.db import SingleConnectionDatabase
from common.directory.membership import Directory
from common.directory.storage import DirectoryUser
from common.errors import Forbidden, Unavailable
from kappi.app import create_app as create_kappi
from tests.conftest import AppClient
from tests.support.directory import SCIM_TOKEN, group, hs256_token, remove_member, scim_client, user, with_directory


@pytest.fixture
async def served(
    settings: Settings, db: SingleConnectionDatabase, clients: SharedClients, app_client: AppClient
) -> AsyncIterator[tuple[Any, httpx.AsyncClient, Settings]]:
    configured = with_directory(settings)
    app = create_kappi(configured, database=db, clients=clients)
    async with app_client(app) as client:
        yield app, client, configured


def _search(scim_filter: str) -> Any:
    return SearchRequest.model_validate({"filter": scim_filter})


async def test_users_and_groups_round_trip_and_a_patch_removes_a_member(served: Any) -> None:
    app, _, _ = served
    scim = scim_client(app)
    alice = await scim.create(user("Alice@Example.com", external_id="00u1"))
    bob = await scim.create(user("bob@example.com"))
    hr = await scim.create(group("hr", alice.id, bob.id))
    assert sorted(m.value for m in hr.members) == sorted([alice.id, bob.id])
    read: Any = await scim.query(DirectoryUser, alice.id)
    assert [g.display for g in read.groups] == ["hr"]
    assert read.meta.location == f"http://ragu.test/scim/v2/Users/{alice.id}"  # below the mount, not the host
    assert {m.ref for m in hr.members} == {f"http://ragu.test/scim/v2/Users/{u.id}" for u in (alice, bob)}

    found: Any = await scim.query(DirectoryUser, query_parameters=_search('userName eq "alice@example.com"'))
    assert (type(found).__name__, [r.id for r in found.resources]) == ("ListResponse[User[EnterpriseUser]]", [alice.id])
    by_external = await scim.query(DirectoryUser, query_parameters=_search('externalId eq "00u1"'))
    assert [r.id for r in by_external.resources] == [alice.id]
    by_name = await scim.query(Group, query_parameters=_search('displayName eq "hr"'))
    assert [r.id for r in by_name.resources] == [hr.id]
    starts = await scim.query(DirectoryUser, query_parameters=_search('userName sw "bob"'))
    assert [r.id for r in starts.resources] == [bob.id]

    patched = await scim.modify(Group, hr.id, remove_member(alice.id))
    members = patched.members if patched is not None else (await scim.query(Group, hr.id)).members
    assert [m.value for m in members] == [bob.id]
    assert not (await scim.query(DirectoryUser, alice.id)).groups

    await scim.delete(DirectoryUser, bob.id)
    assert not (await scim.query(Group, hr.id)).members


async def test_a_taken_user_name_and_an_unknown_member_are_scim_errors(served: Any) -> None:
    app, _, _ = served
    scim = scim_client(app)
    await scim.create(user("carol@example.com"))
    taken = await scim.create(user("CAROL@example.com"), raise_scim_errors=False)
    assert isinstance(taken, Error)
    assert (taken.status, taken.scim_type) == (409, "uniqueness")
    unknown = await scim.create(group("hr", "3f1b8a9e-0000-4000-8000-000000000000"), raise_scim_errors=False)
    assert isinstance(unknown, Error)
    assert unknown.status == 400


async def test_discovery_answers_and_the_config_needs_no_credential(served: Any) -> None:
    _, client, _ = served
    config = await client.get("/scim/v2/ServiceProviderConfig")
    assert config.status_code == 200
    parsed: Any = ServiceProviderConfig.model_validate(config.json())
    assert (parsed.patch.supported, parsed.filter.supported, parsed.bulk.supported) == (True, True, False)
    headers = {"Authorization": f"Bearer {SCIM_TOKEN}"}
    types = (await client.get("/scim/v2/ResourceTypes", headers=headers)).json()
    assert sorted(r["name"] for r in types["Resources"]) == ["Group", "User"]
    schemas = (await client.get("/scim/v2/Schemas", headers=headers)).json()
    assert "urn:ietf:params:scim:schemas:core:2.0:Group" in {s["id"] for s in schemas["Resources"]}


@pytest.mark.parametrize(
    ("bearer", "code"),
    [
        (None, "scim_credential_required"),
        ("user", "scim_credential_invalid"),
        ("admin", "scim_credential_invalid"),
        ("expired", "scim_credential_invalid"),
        ("forged", "scim_credential_invalid"),
        ("almost", "scim_credential_invalid"),
    ],
)
async def test_only_the_scim_credential_opens_the_endpoint(served: Any, bearer: str | None, code: str) -> None:
    _, client, settings = served
    tokens = {
        "user": mint_dev_token(settings, subject="alice", groups=["hr"]),
        "admin": mint_dev_token(settings, subject="admin", roles=[settings.auth.admin_role]),
        "expired": hs256_token(reveal(settings.auth.hs256_secret) or "", lifetime=-3600, roles=["admin"]),
        "forged": hs256_token("not-our-secret", roles=["admin"]),
        "almost": SCIM_TOKEN[:-1] + "x",
    }
    headers = {} if bearer is None else {"Authorization": f"Bearer {tokens[bearer]}"}
    for method, path in (("GET", "/scim/v2/Users"), ("POST", "/scim/v2/Groups"), ("GET", "/scim/v2/Schemas")):
        response = await client.request(method, path, headers=headers, json={"displayName": "hr"})
        assert response.status_code == 401, (method, path, response.text)
        assert response.headers["ragu-error-code"] == code
        assert Error.model_validate(response.json()).status == 401
        assert response.headers["www-authenticate"].startswith("Bearer")


@pytest.mark.parametrize("path", ["/agents", "/admin/agents", "/v1/models"])
async def test_the_scim_credential_is_no_user_token(served: Any, path: str) -> None:
    _, client, _ = served
    response = await client.get(path, headers={"Authorization": f"Bearer {SCIM_TOKEN}"})
    assert response.status_code == 401
    assert response.json()["code"] == "scim_credential_not_user_token"


async def test_without_a_directory_the_endpoint_is_not_there(
    settings: Settings, db: SingleConnectionDatabase, clients: SharedClients, app_client: AppClient
) -> None:
    async with app_client(create_kappi(settings, database=db, clients=clients)) as client:
        response = await client.get("/scim/v2/Users", headers={"Authorization": f"Bearer {SCIM_TOKEN}"})
    assert response.status_code == 404
    assert response.headers["ragu-error-code"] == "scim_not_configured"


PATCH_OP = "urn:ietf:params:scim:api:messages:2.0:PatchOp"
ENTRA_AND_OKTA = {
    "entra: remove a member by value": {"op": "Remove", "path": "members", "value": [{"value": "{alice}"}]},
    "okta: remove a member by filter": {"op": "remove", "path": 'members[value eq "{alice}"]'},
}


@pytest.mark.parametrize("operation", ENTRA_AND_OKTA)
async def test_the_membership_patches_identity_providers_send_take_effect(served: Any, operation: str) -> None:
    """The raw bodies as Entra ID and Okta send them (Entra's departs from RFC 7644; the policy accepts it)."""
    app, client, _ = served
    scim = scim_client(app)
    alice, bob = await scim.create(user("alice")), await scim.create(user("bob"))
    hr = await scim.create(group("hr", alice.id, bob.id))
    body = msgspec.json.decode(msgspec.json.encode(ENTRA_AND_OKTA[operation]).replace(b"{alice}", alice.id.encode()))
    headers = {"Authorization": f"Bearer {SCIM_TOKEN}", "Content-Type": "application/scim+json"}
    payload = {"schemas": [PATCH_OP], "Operations": [body]}
    response = await client.patch(f"/scim/v2/Groups/{hr.id}", json=payload, headers=headers)
    assert response.status_code in (200, 204), response.text
    assert [m.value for m in (await scim.query(Group, hr.id)).members] == [bob.id]


@pytest.mark.parametrize("value", [False, "False", {"active": False}])
async def test_a_deactivation_as_identity_providers_send_it_refuses_the_user(served: Any, value: Any) -> None:
    """Okta sends ``active: false`` (sometimes with no path), Entra ID the string ``"False"``."""
    app, client, settings = served
    scim = scim_client(app)
    carl = await scim.create(user("carl"))
    token = {"Authorization": f"Bearer {mint_dev_token(settings, subject='carl')}"}
    assert (await client.get("/agents", headers=token)).status_code == 200
    operation = (
        {"op": "replace", "value": value}
        if isinstance(value, dict)
        else {"op": "Replace", "path": "active", "value": value}
    )
    headers = {"Authorization": f"Bearer {SCIM_TOKEN}", "Content-Type": "application/scim+json"}
    payload = {"schemas": [PATCH_OP], "Operations": [operation]}
    response = await client.patch(f"/scim/v2/Users/{carl.id}", json=payload, headers=headers)
    assert response.status_code in (200, 204), response.text
    refused = await client.get("/agents", headers=token)
    assert (refused.status_code, refused.json()["code"]) == (403, "user_deactivated")


async def test_an_authenticator_no_service_binds_reads_the_directory_on_its_own(settings: Settings) -> None:
    """The console's authenticator binds no database: the directory opens its own pool on ``database_url`` (this
    test's database, where no user is provisioned: the refusal shows it read it), and fails closed without one."""
    directory = Directory(with_directory(settings))
    try:
        with pytest.raises(Forbidden) as refused:
            await directory.membership("nobody-provisioned")
        assert refused.value.code == "user_not_in_directory"
    finally:
        await (await directory._database()).aclose()
    without_database = Directory(with_directory(settings, database_url=None))
    with pytest.raises(Unavailable) as unavailable:
        await without_database.membership("anyone")
    assert unavailable.value.code == "directory_unavailable"


@pytest.mark.parametrize(
    ("method", "path", "body", "status"),
    [
        ("POST", "/scim/v2/Users", b"[" * 100_000, 400),  # nested past the JSON decoder's recursion limit
        ("POST", "/scim/v2/Users", b"{not json", 400),
        ("POST", "/scim/v2/Users", b'{"schemas": ["urn:ietf:params:scim:schemas:core:2.0:User"]}', 400),
        ("GET", "/scim/v2/Users?filter=" + "(" * 5000 + 'userName eq "a"' + ")" * 5000, b"", 200),  # read, no match
        ("GET", "/scim/v2/Users?filter=userName%20zz%20%22a%22", b"", 400),
        ("GET", "/scim/v2/Users/not-a-uuid", b"", 404),
        ("POST", "/scim/v2/Users", b"x" * (2 * 1024 * 1024), 413),
    ],
    ids=["deep-json", "bad-json", "no-username", "deep-filter", "bad-operator", "bad-id", "huge-body"],
)
async def test_hostile_scim_requests_are_scim_errors_never_a_500(
    served: Any, method: str, path: str, body: bytes, status: int
) -> None:
    _, client, _ = served
    headers = {"Authorization": f"Bearer {SCIM_TOKEN}", "Content-Type": "application/scim+json"}
    response = await client.request(method, path, content=body, headers=headers)
    assert response.status_code == status, response.text[:300]
    if status >= 400:
        assert Error.model_validate(response.json()).status == status
