"""Kappi's MCP server against a real ``ragu serve``, driven by the official ``mcp`` SDK client.

Each user sees through MCP exactly what the same token sees through kappi's API: the agents it lists, the passages
``retrieve`` finds and the answer ``query`` gives. A marker word sits in a document of a collection only ``hr`` may
read: it comes back to an ``hr`` user, never to one outside ``hr`` nor to a token with no groups. A request without a
valid token (none, forged, expired, for another audience) is a 401 whose ``WWW-Authenticate`` names the
protected-resource metadata, and that document names the issuer kappi accepts tokens from.

Both protocol eras are driven: ``ClientSession``'s initialize handshake and ``mcp.Client``'s newest protocol.

One embedded PostgreSQL and one server serve the module, with an issuer and an audience configured (development
tokens, HS256, carry both); the default ``extractive`` LLM answers.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import httpx2
import msgspec
import pytest
from mcp import Client, ClientSession
from mcp.client.auth.utils import (
    build_protected_resource_metadata_discovery_urls,
    extract_resource_metadata_from_www_auth,
    handle_protected_resource_response,
)
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from tests.hardening.live_stack import REPO, embedded_collection
from tests.kappi.channel_world import ChannelWorld, channel_world

SECRET = "live-mcp-hs256-secret-0123456789abcdef"
ISSUER = "https://id.example.test/realms/ragu"
AUDIENCE = "ragu-kappi"
QUESTION = "How many vacation days do employees get?"
MARKER = "Quokkaplan"
"""Only in the ``hr`` collection's document, in the sentence that answers the question."""
USERS = {"alice": ("hr",), "bob": ("legal",), "nobody": ()}
"""``nobody``'s token has no groups at all."""
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@dataclass
class Live(ChannelWorld):
    @property
    def mcp_url(self) -> str:
        return f"{self.server.base_url}/kappi/mcp"

    def api(self, subject: str, *groups: str, admin: bool = False) -> httpx.AsyncClient:
        token = self.token(subject, *groups, admin=admin)
        return httpx.AsyncClient(
            base_url=self.server.base_url, headers={"Authorization": f"Bearer {token}"}, timeout=60
        )


@asynccontextmanager
async def mcp_session(url: str, token: str) -> AsyncIterator[ClientSession]:
    """The SDK's client over streamable HTTP, the token sent with every request."""
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


@pytest.fixture(scope="module")
async def live() -> AsyncIterator[Live]:
    async with channel_world(Live, "ragu-live-mcp-", SECRET, issuer=ISSUER, audience=AUDIENCE, marker=MARKER) as world:
        yield world


def _structured(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content
    assert msgspec.json.decode(result.content[0].text) == result.structured_content  # the text is the same JSON
    structured: dict[str, Any] = result.structured_content
    return structured


def _problem(result: Any) -> dict[str, Any]:
    assert result.is_error
    problem: dict[str, Any] = msgspec.json.decode(result.content[0].text)
    return problem


@pytest.mark.parametrize("user", USERS)
async def test_list_agents_is_the_apis_list(live: Live, user: str) -> None:
    async with live.api(user, *USERS[user]) as api:
        expected = (await api.get("/kappi/agents")).json()
    async with mcp_session(live.mcp_url, live.token(user, *USERS[user])) as session:
        tools = {tool.name for tool in (await session.list_tools()).tools}
        listed = _structured(await session.call_tool("list_agents", {}))["agents"]
    assert tools == {"list_agents", "search", "ask"}
    assert listed == expected
    assert live.agent_id in {a["id"] for a in listed}
    assert live.secret_agent_id not in {a["id"] for a in listed}


@pytest.mark.parametrize("user", USERS)
async def test_search_finds_exactly_what_retrieve_finds_and_the_marker_only_for_hr(live: Live, user: str) -> None:
    async with live.api(user, *USERS[user]) as api:
        retrieved = await api.post(f"/kappi/agents/{live.agent_id}/retrieve", json={"content": QUESTION, "top_k": 20})
        assert retrieved.status_code == 200, retrieved.text
    async with mcp_session(live.mcp_url, live.token(user, *USERS[user])) as session:
        result = await session.call_tool("search", {"agent_id": live.agent_id, "query": QUESTION, "top_k": 20})
    found = _structured(result)
    assert found["citations"] == retrieved.json()["citations"]
    collections = {c["collection"] for c in found["citations"]}
    if "hr" in USERS[user]:
        assert live.restricted["name"] in collections
        assert MARKER in result.content[0].text
    else:
        assert collections == {live.public["name"]}
        text = result.content[0].text
        for withheld in (MARKER, live.restricted["name"], live.restricted["id"]):
            assert withheld not in text


@pytest.mark.parametrize("user", USERS)
async def test_ask_answers_as_query_does_and_cites_the_marker_only_for_hr(live: Live, user: str) -> None:
    async with live.api(user, *USERS[user]) as api:
        queried = await api.post(f"/kappi/agents/{live.agent_id}/query", json={"content": QUESTION})
        assert queried.status_code == 200, queried.text
    async with mcp_session(live.mcp_url, live.token(user, *USERS[user])) as session:
        result = await session.call_tool("ask", {"agent_id": live.agent_id, "question": QUESTION})
    answer, expected = _structured(result), queried.json()
    for key in ("answer", "citations", "also_retrieved", "grounding", "llm_fallback"):
        assert answer[key] == expected[key], key
    cited = {c["collection"] for c in answer["citations"]}
    if "hr" in USERS[user]:
        assert "25 vacation days" in answer["answer"]
        assert live.restricted["name"] in cited
        assert any(MARKER in c["text"] for c in answer["citations"])
    else:
        assert live.restricted["name"] not in cited
        text = result.content[0].text
        for withheld in (MARKER, live.restricted["name"], live.restricted["id"]):
            assert withheld not in text


@pytest.mark.parametrize("user", ["alice", "nobody"])
async def test_the_sdks_high_level_client_on_the_newest_protocol_sees_the_same(live: Live, user: str) -> None:
    """``mcp.Client`` negotiates the newest protocol (no initialize handshake: each request stands alone), which
    the SDK's transport serves on a path of its own: the caller and the results are the same."""
    async with live.api(user, *USERS[user]) as api:
        retrieved = await api.post(f"/kappi/agents/{live.agent_id}/retrieve", json={"content": QUESTION, "top_k": 20})
        queried = await api.post(f"/kappi/agents/{live.agent_id}/query", json={"content": QUESTION})
    token = live.token(user, *USERS[user])
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60) as http,
        Client(streamable_http_client(live.mcp_url, http_client=http)) as client,
    ):
        assert client.protocol_version not in HANDSHAKE_PROTOCOL_VERSIONS
        searched = await client.call_tool("search", {"agent_id": live.agent_id, "query": QUESTION, "top_k": 20})
        asked = await client.call_tool("ask", {"agent_id": live.agent_id, "question": QUESTION})
    assert _structured(searched)["citations"] == retrieved.json()["citations"]
    assert _structured(asked)["citations"] == queried.json()["citations"]
    assert (MARKER in asked.content[0].text) is (user == "alice")


async def test_an_agent_outside_the_users_groups_is_not_found_as_in_the_api(live: Live) -> None:
    async with live.api("alice", "hr") as api:
        refused = await api.post(f"/kappi/agents/{live.secret_agent_id}/query", json={"content": QUESTION})
    async with mcp_session(live.mcp_url, live.token("alice", "hr")) as session:
        for name, arguments in (("ask", {"question": QUESTION}), ("search", {"query": QUESTION})):
            result = await session.call_tool(name, {"agent_id": live.secret_agent_id, **arguments})
            assert _problem(result) == refused.json()  # the API's problem document, word for word


async def test_a_revoked_group_is_excluded_from_the_very_next_tool_call(live: Live) -> None:
    """The chunks' own groups change before chonkit's ``PUT`` returns, so no identity cache can delay this."""
    marker = "Wombatcode"
    async with live.api("admin", admin=True) as admin:
        ops = await embedded_collection(
            admin, f"Ops_{uuid.uuid4().hex[:6]}", f"Vacation days for the night shift: ask {marker}.".encode(), ["ops"]
        )
        agent = (await admin.post("/kappi/admin/agents", json={"name": "Ops"})).json()
        assign = {"add": [{"vector_provider": "pgvector", "name": ops["name"], "instruction": "ops"}]}
        assert (await admin.put(f"/kappi/admin/agents/{agent['id']}/collections", json=assign)).status_code == 200
        search = {"agent_id": agent["id"], "query": QUESTION}
        async with mcp_session(live.mcp_url, live.token("carol", "ops")) as session:
            assert marker in (await session.call_tool("search", search)).content[0].text
            revoked = await admin.put(f"/chonkit/collections/{ops['id']}/groups", json={"groups": ["finance"]})
            assert revoked.status_code == 200, revoked.text
            for _ in range(10):
                searched = await session.call_tool("search", search)
                asked = await session.call_tool("ask", {"agent_id": agent["id"], "question": QUESTION})
                for result in (searched, asked):
                    assert marker not in str(result.content), result


async def test_bad_arguments_are_errors_with_codes(live: Live) -> None:
    async with mcp_session(live.mcp_url, live.token("alice", "hr")) as session:
        by_name = await session.call_tool("ask", {"agent_id": "Helper", "question": QUESTION})
        assert _problem(by_name)["code"] == "invalid_id"
        for arguments in (
            {"agent_id": live.agent_id, "query": ""},
            {"agent_id": live.agent_id, "query": QUESTION, "top_k": 0},
            {"agent_id": live.agent_id, "query": QUESTION, "unknown": 1},
            {"agent_id": live.agent_id},
        ):
            problem = _problem(await session.call_tool("search", arguments))
            assert (problem["status"], problem["code"]) == (422, "invalid_arguments"), arguments
        with pytest.raises(MCPError, match="Unknown tool"):
            await session.call_tool("delete_everything", {})


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _foreign(**claims: Any) -> str:
    """A token as alice's with ``claims`` changed, HS256-signed with kappi's secret (or ``secret``), by hand as an
    attacker would (only common/auth.py imports a JWT library)."""
    secret = claims.pop("secret", SECRET)
    now = int(time.time())
    payload = {"sub": "alice", "groups": ["hr"], "iss": ISSUER, "aud": AUDIENCE, "iat": now, "exp": now + 600}
    header = json.dumps({"alg": "HS256", "typ": "JWT"}).encode()
    signing_input = f"{_b64(header)}.{_b64(json.dumps(payload | claims).encode())}"
    signature = hmac.new(secret.encode(), signing_input.encode(), hashlib.sha256).digest()
    return f"{signing_input}.{_b64(signature)}"


@pytest.mark.parametrize(
    ("kind", "code"),
    [
        ("none", "missing_token"),
        ("malformed", "malformed_token"),
        ("forged", "invalid_signature"),
        ("expired", "token_expired"),
        ("foreign-audience", "invalid_audience"),
        ("foreign-issuer", "invalid_issuer"),
        ("shared-key", "malformed_token"),
    ],
)
async def test_a_request_without_a_valid_token_is_a_401_naming_the_metadata(live: Live, kind: str, code: str) -> None:
    token = {
        "none": None,
        "malformed": "not-a-jwt",
        "forged": _foreign(secret="someone-elses-secret-0123456789abcdef"),
        "expired": _foreign(iat=int(time.time()) - 7200, exp=int(time.time()) - 3600),
        "foreign-audience": _foreign(aud="another-service"),
        "foreign-issuer": _foreign(iss="https://evil.example.test"),
        "shared-key": "sk-ragu-0123456789abcdef0123456789abcdef",  # a server key, as peers' MCP servers take
    }[kind]
    headers = MCP_HEADERS | ({"Authorization": f"Bearer {token}"} if token else {})
    async with httpx.AsyncClient(timeout=30) as http:
        response = await http.post(live.mcp_url, json=INITIALIZE, headers=headers)
    assert response.status_code == 401
    assert response.headers["content-type"].startswith("application/problem+json")
    assert response.json()["code"] == code
    challenge = response.headers["www-authenticate"]
    assert challenge.startswith("Bearer ")
    metadata_url = f"{live.server.base_url}/kappi/.well-known/oauth-protected-resource/mcp"
    assert f'resource_metadata="{metadata_url}"' in challenge
    assert ('error="invalid_token"' in challenge) is (kind != "none")  # RFC 6750: no error without a token


def _leaves(error: BaseException) -> list[BaseException]:
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in _leaves(inner)]
    return [error]


async def test_the_sdk_client_with_a_bad_token_gets_no_session(live: Live) -> None:
    with pytest.raises(BaseExceptionGroup) as raised:
        async with mcp_session(live.mcp_url, "not-a-jwt") as session:
            await session.call_tool("list_agents", {})
    assert [type(leaf) for leaf in _leaves(raised.value)] == [MCPError]


async def test_the_sdks_oauth_discovery_finds_the_metadata_and_reads_it(live: Live) -> None:
    """What the SDK's OAuth client does on a 401: the ``resource_metadata`` of the challenge first, then the
    document, read as its RFC 9728 model (which requires an authorization server)."""
    async with httpx2.AsyncClient(timeout=30) as http:
        refused = await http.post(live.mcp_url, json=INITIALIZE, headers=MCP_HEADERS)
        urls = build_protected_resource_metadata_discovery_urls(
            extract_resource_metadata_from_www_auth(refused), live.mcp_url
        )
        metadata = await handle_protected_resource_response(await http.get(urls[0]))
    assert urls[0] == f"{live.server.base_url}/kappi/.well-known/oauth-protected-resource/mcp"
    assert metadata is not None
    assert str(metadata.resource) == live.mcp_url
    assert [str(server) for server in metadata.authorization_servers] == [ISSUER]


async def test_the_protected_resource_metadata_names_the_resource_and_its_issuer(live: Live) -> None:
    async with httpx.AsyncClient(timeout=30) as http:
        response = await http.get(f"{live.server.base_url}/kappi/.well-known/oauth-protected-resource/mcp")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    assert response.json() == {
        "resource": live.mcp_url,
        "authorization_servers": [ISSUER],
        "bearer_methods_supported": ["header"],
        "resource_name": "Ragu (kappi)",
    }


async def test_an_admin_without_groups_reads_no_restricted_passage(live: Live) -> None:
    """Admins get no bypass through MCP, as in chat: the role is not a group."""
    async with mcp_session(live.mcp_url, live.token("root", admin=True)) as session:
        searched = await session.call_tool("search", {"agent_id": live.agent_id, "query": QUESTION, "top_k": 20})
        asked = await session.call_tool("ask", {"agent_id": live.agent_id, "question": QUESTION})
    for result in (searched, asked):
        _structured(result)
        assert MARKER not in result.content[0].text
        assert live.restricted["name"] not in result.content[0].text


@pytest.mark.parametrize(
    ("method", "headers", "body", "status"),
    [
        ("GET", {"Accept": "text/event-stream"}, None, 405),
        ("DELETE", {}, None, 405),
        ("PUT", MCP_HEADERS, b"{}", 405),
        ("POST", MCP_HEADERS, b"{nope", 400),
        ("POST", MCP_HEADERS, b"[" * 5000 + b"]" * 5000, 400),
        ("POST", MCP_HEADERS, b'{"hello": 1}', 400),
        ("POST", MCP_HEADERS | {"Content-Type": "text/plain"}, b"{}", 400),
        ("POST", MCP_HEADERS, b'{"a": "' + b"x" * (5 * 1024 * 1024) + b'"}', 413),
    ],
    ids=["get", "delete", "put", "bad-json", "deep-json", "not-json-rpc", "text-plain", "5-mib"],
)
async def test_bad_requests_to_the_endpoint_are_4xx_never_500(
    live: Live, method: str, headers: dict[str, str], body: bytes | None, status: int
) -> None:
    authorized = headers | {"Authorization": f"Bearer {live.token('alice', 'hr')}"}
    async with httpx.AsyncClient(timeout=30) as http:
        response = await http.request(method, live.mcp_url, headers=authorized, content=body)
    assert response.status_code == status, response.text
    async with mcp_session(live.mcp_url, live.token("alice", "hr")) as session:  # and the server still answers
        assert _structured(await session.call_tool("list_agents", {}))["agents"]


async def test_the_docs_example_runs_as_written(live: Live) -> None:
    page = (REPO / "docs" / "clients.md").read_text()
    section = page.split("\n## MCP\n", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert match, "docs/clients.md's MCP section has a python block"
    namespace: dict[str, Any] = {}
    exec(compile(match.group(1), "docs/clients.md", "exec"), namespace)  # noqa: S102 -- our own docs
    answer = await namespace["ask_ragu"](live.mcp_url, live.token("alice", "hr"), QUESTION)
    assert "25 vacation days" in answer["answer"]
    assert MARKER in str(answer["citations"])
