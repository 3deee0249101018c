"""The MCP server's parts that need no server: the tools' schemas against the API's, bad arguments, the caller's
lookup, the 401 challenge and the metadata's authorization server (``test_mcp_live.py`` runs them for real)."""

from __future__ import annotations

from typing import Any, cast

import msgspec
import pytest
from mcp import Client
from mcp.server.context import ServerRequestContext
from starlette.requests import Request as StarletteRequest

from common.auth import Principal
from common.config import load_settings
from common.errors import InvalidInput, Unauthorized, Unavailable
from kappi.chat.models import QueryRequest, RetrieveRequest
from kappi.chat.service import ChatService
from kappi.mcp_server.http import authorization_servers, challenge
from kappi.mcp_server.tools import (
    PRINCIPAL_SCOPE_KEY,
    TOOLS,
    AskArguments,
    SearchArguments,
    _arguments,
    build_server,
    object_schema,
    principal_of_request,
    problem_result,
)

AGENT_ID = "0b7f3c4e-8d52-4a55-9a1e-2f0f3b1a6c11"


def _property(struct: type[msgspec.Struct], name: str) -> Any:
    return object_schema(struct)["properties"][name]


def test_the_tools_arguments_have_the_apis_bounds() -> None:
    """A question the API refuses is refused by the tool alike, and the reverse."""
    assert _property(SearchArguments, "query") == _property(RetrieveRequest, "content")
    assert _property(AskArguments, "question") == _property(QueryRequest, "content")
    for name in ("top_k", "filters", "group_by"):
        assert _property(SearchArguments, name) == _property(RetrieveRequest, name), name
    assert _property(AskArguments, "filters") == _property(QueryRequest, "filters")


def test_three_read_only_tools_with_object_schemas() -> None:
    assert [tool.name for tool in TOOLS] == ["list_agents", "search", "ask"]
    for tool in TOOLS:
        assert tool.input_schema["type"] == "object"
        assert tool.output_schema is not None
        assert tool.output_schema["type"] == "object"
        assert tool.annotations is not None
        assert tool.annotations.read_only_hint
        assert not tool.annotations.destructive_hint
    assert TOOLS[0].input_schema["properties"] == {}


@pytest.mark.parametrize(
    ("arguments", "code"),
    [
        ({"agent_id": "Helper", "query": "q"}, "invalid_id"),
        ({"agent_id": 7, "query": "q"}, "invalid_id"),
        ({"query": "q"}, "invalid_arguments"),
        ({"agent_id": AGENT_ID, "query": ""}, "invalid_arguments"),
        ({"agent_id": AGENT_ID, "query": "q" * 10_001}, "invalid_arguments"),
        ({"agent_id": AGENT_ID, "query": "q", "top_k": 201}, "invalid_arguments"),
        ({"agent_id": AGENT_ID, "query": "q", "filters": {"tags": []}}, "invalid_arguments"),
        ({"agent_id": AGENT_ID, "query": "q", "group_by": "collection"}, "invalid_arguments"),
        ({"agent_id": AGENT_ID, "query": "q", "sql": "drop"}, "invalid_arguments"),
    ],
)
def test_bad_arguments_are_422_with_a_code(arguments: dict[str, Any], code: str) -> None:
    with pytest.raises(InvalidInput) as raised:
        _arguments(arguments, SearchArguments)
    assert raised.value.code == code
    result = problem_result(raised.value)
    assert result.is_error
    problem = msgspec.json.decode(result.content[0].text)
    assert problem == {
        "type": "about:blank",
        "title": "Unprocessable Entity",
        "status": 422,
        "code": code,
        "detail": raised.value.detail,
    }


def test_good_arguments_are_read() -> None:
    read = _arguments({"agent_id": AGENT_ID, "query": "q", "top_k": 3}, SearchArguments)
    assert (str(read.agent_id), read.query, read.top_k, read.group_by) == (AGENT_ID, "q", 3, "chunk")


def _context(request: Any) -> ServerRequestContext[Any, Any]:
    return ServerRequestContext(
        session=None,  # type: ignore[arg-type]
        lifespan_context=None,
        protocol_version="2025-06-18",
        method="tools/call",
        request=request,
    )


def test_the_caller_is_the_one_the_endpoint_left_in_the_requests_scope() -> None:
    alice = Principal(subject="alice", name=None, groups=frozenset({"hr"}), roles=frozenset(), is_admin=False)
    scope = {"type": "http", "headers": [], PRINCIPAL_SCOPE_KEY: alice}
    assert principal_of_request(_context(StarletteRequest(scope))) is alice


@pytest.mark.parametrize("request_", [None, "scope", "not-a-principal"])
def test_no_caller_is_a_missing_token(request_: Any) -> None:
    scope: dict[str, Any] = {"type": "http", "headers": []}
    if request_ == "not-a-principal":
        scope[PRINCIPAL_SCOPE_KEY] = {"subject": "alice", "groups": ["exec"]}
    request = None if request_ is None else StarletteRequest(scope)
    with pytest.raises(Unauthorized) as raised:
        principal_of_request(_context(request))
    assert raised.value.code == "missing_token"


class _Request:
    """What :func:`challenge` reads of a request: its base URL."""

    base_url = "http://kappi.test/kappi/"


def test_the_challenge_names_the_metadata_and_says_invalid_token_only_for_a_token() -> None:
    missing = challenge(_Request(), Unauthorized("no token", code="missing_token"))  # type: ignore[arg-type]
    assert missing == (
        'Bearer realm="ragu", resource_metadata="http://kappi.test/kappi/.well-known/oauth-protected-resource/mcp"'
    )
    bad = challenge(_Request(), Unauthorized('the "token" \\ expired', code="token_expired"))  # type: ignore[arg-type]
    assert bad == (
        'Bearer realm="ragu", error="invalid_token", error_description="the \'token\'  expired", '
        'resource_metadata="http://kappi.test/kappi/.well-known/oauth-protected-resource/mcp"'
    )


def test_the_authorization_server_is_the_issuer_kappi_accepts() -> None:
    assert authorization_servers(load_settings({}, auth_issuer="https://idp.test", oidc_issuer="https://o.test")) == [
        "https://idp.test"
    ]
    assert authorization_servers(load_settings({}, oidc_issuer="https://o.test")) == ["https://o.test"]
    assert authorization_servers(load_settings({})) == []


class _Failing:
    """A chat service that fails as told: a bug's exception, or a busy model."""

    def __init__(self, error: Exception) -> None:
        self.error = error

    async def usable_agents(self, _: Principal) -> list[Any]:
        raise self.error

    async def ask_once(self, *_: Any) -> Any:
        raise self.error


async def _call(error: Exception, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    alice = Principal(subject="alice", name=None, groups=frozenset(), roles=frozenset(), is_admin=False)
    server = build_server(cast(ChatService, _Failing(error)), principal_of=lambda _: alice)
    async with Client(server, mode="legacy") as client:
        result = await client.call_tool(name, arguments)
    assert result.is_error
    assert result.structured_content is None
    problem: dict[str, Any] = msgspec.json.decode(result.content[0].text)
    return problem


async def test_a_bug_in_a_tool_is_an_internal_problem_that_says_nothing_of_it() -> None:
    problem = await _call(RuntimeError("password=hunter2 at 10.0.0.7"), "list_agents", {})
    assert (problem["status"], problem["code"], problem["detail"]) == (500, "internal", "internal error")
    assert "hunter2" not in str(problem)


async def test_a_busy_model_says_when_to_try_again() -> None:
    busy = Unavailable("the model is busy", code="llm_busy", retry_after_seconds=3)
    problem = await _call(busy, "ask", {"agent_id": AGENT_ID, "question": "q"})
    assert (problem["status"], problem["code"], problem["retry_after_seconds"]) == (503, "llm_busy", 3)
