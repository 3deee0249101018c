"""The MCP tools: the caller's agents, the passages an agent's collections hold for a question, and its cited answer.

Each tool is one call of kappi's chat service, the one the user API makes (``GET /agents``,
``POST /agents/{id}/retrieve``, ``POST /agents/{id}/query``), with the caller's own principal: a tool returns what
that user could read through the API and nothing more, and there is no second retrieval or answer path to keep in
step with the first. Results are the API's own models, as structured content and as their JSON text.

A failure is a tool result with ``isError`` whose text is the API's problem document (``status``, ``code``,
``detail``), so a model can read why and an application can branch on the code; the MCP error channel is left to
what is not a tool's failure (an unknown tool).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from importlib.metadata import version
from typing import Annotated, Any, Literal
from uuid import UUID

import msgspec
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.shared.exceptions import MCPError
from mcp.types import CallToolResult, ListToolsResult, TextContent, Tool, ToolAnnotations
from mcp_types import INVALID_PARAMS, CallToolRequestParams, PaginatedRequestParams
from starlette.requests import HTTPConnection

from common.auth import Principal
from common.errors import AppError, InvalidInput, Unauthorized
from common.http.problems import problem_response
from kappi.agent.models import UserAgent
from kappi.chat.models import QueryAnswer, RetrievalFilters, Retrieved, RetrieveRequest
from kappi.chat.service import ChatService

logger = logging.getLogger(__name__)

PRINCIPAL_SCOPE_KEY = "ragu_mcp_principal"
"""Where the MCP endpoint leaves the caller it authenticated, in the ASGI scope of the request that carries a
message; a tool reads it from there, so each message acts as the token it came with."""

Text = Annotated[str, msgspec.Meta(min_length=1, max_length=10_000)]
"""A question: the bounds of the API's ``content`` (``tests/kappi/test_mcp_tools.py`` holds them equal)."""
TopK = Annotated[int, msgspec.Meta(ge=1, le=200)]


class SearchArguments(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    agent_id: UUID
    """An agent's id, as ``list_agents`` gives it."""
    query: Text
    """What to find passages about."""
    top_k: TopK | None = None
    """At most this many passages (or documents), the best first; default: the agent's own depth."""
    filters: RetrievalFilters | None = None
    """Only documents with these tags or labels; they narrow the agent's own filters, never widen them."""
    group_by: Literal["chunk", "document"] = "chunk"
    """``document``: each document's best passage, with how many it had."""


class AskArguments(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    agent_id: UUID
    """An agent's id, as ``list_agents`` gives it."""
    question: Text
    filters: RetrievalFilters | None = None
    """Only documents with these tags or labels; they narrow the agent's own filters, never widen them."""


class NoArguments(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    pass


class AgentList(msgspec.Struct, frozen=True, kw_only=True):
    agents: list[UserAgent]


def object_schema(struct: type[msgspec.Struct]) -> dict[str, Any]:
    """``struct``'s JSON Schema with the object at its root (MCP wants ``type: object`` there), the types it
    refers to under ``$defs``."""
    (reference,), components = msgspec.json.schema_components([struct], ref_template="#/$defs/{name}")
    schema: dict[str, Any] = dict(components.pop(reference["$ref"].rsplit("/", 1)[1]))
    if components:
        schema["$defs"] = components
    return schema


READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)

TOOLS = [
    Tool(
        name="list_agents",
        title="List your agents",
        description="The Ragu agents you may use: id, name, description and LLM. Pass an agent's id to search or ask.",
        input_schema=object_schema(NoArguments),
        output_schema=object_schema(AgentList),
        annotations=READ_ONLY,
    ),
    Tool(
        name="search",
        title="Search an agent's collections",
        description=(
            "Passages from the collections of an agent that you may read, best first, each with its collection, "
            "document, pages and score. No LLM runs: for answering with your own model."
        ),
        input_schema=object_schema(SearchArguments),
        output_schema=object_schema(Retrieved),
        annotations=READ_ONLY,
    ),
    Tool(
        name="ask",
        title="Ask an agent",
        description=(
            "The agent's answer, grounded in the passages you may read: each [n] in it is citations[n-1]; "
            "it says so plainly when nothing answers. Nothing is stored."
        ),
        input_schema=object_schema(AskArguments),
        output_schema=object_schema(QueryAnswer),
        annotations=ToolAnnotations(read_only_hint=True, destructive_hint=False, open_world_hint=False),
    ),
]

PrincipalOf = Callable[[ServerRequestContext[Any, Any]], Principal]


def principal_of_request(ctx: ServerRequestContext[Any, Any]) -> Principal:
    """The caller the HTTP endpoint authenticated for the request this message came in; none is a 401."""
    request = ctx.request
    principal = request.scope.get(PRINCIPAL_SCOPE_KEY) if isinstance(request, HTTPConnection) else None
    if not isinstance(principal, Principal):
        raise Unauthorized("an Authorization: Bearer token is required", code="missing_token")
    return principal


class RaguTools:
    """The tools' work, apart from the protocol: one service call each, as the principal."""

    def __init__(self, chats: ChatService) -> None:
        self.chats = chats

    async def list_agents(self, principal: Principal, _: NoArguments) -> AgentList:
        agents = await self.chats.usable_agents(principal)
        return AgentList(
            agents=[
                UserAgent(id=a.id, name=a.name, description=a.description, llm_model=a.config.llm_model) for a in agents
            ]
        )

    async def search(self, principal: Principal, arguments: SearchArguments) -> Retrieved:
        request = RetrieveRequest(
            content=arguments.query, top_k=arguments.top_k, filters=arguments.filters, group_by=arguments.group_by
        )
        return await self.chats.retrieve_once(arguments.agent_id, request, principal)

    async def ask(self, principal: Principal, arguments: AskArguments) -> QueryAnswer:
        return await self.chats.ask_once(arguments.agent_id, arguments.question, principal, arguments.filters)

    async def call(self, name: str, principal: Principal, arguments: dict[str, Any] | None) -> msgspec.Struct:
        """Run tool ``name`` with ``arguments`` (validated as the API validates a body).

        Raises:
            AppError: What the service raised, or ``invalid_arguments`` / ``invalid_id`` for bad arguments.
            KeyError: No tool is called ``name``.
        """
        kind, run = self._tools()[name]
        return await run(principal, _arguments(arguments or {}, kind))

    def _tools(self) -> dict[str, tuple[type[msgspec.Struct], Callable[[Principal, Any], Awaitable[msgspec.Struct]]]]:
        return {
            "list_agents": (NoArguments, self.list_agents),
            "search": (SearchArguments, self.search),
            "ask": (AskArguments, self.ask),
        }


def _arguments(arguments: dict[str, Any], kind: type[msgspec.Struct]) -> Any:
    try:
        return msgspec.convert(arguments, kind)
    except msgspec.ValidationError as exc:
        if str(exc).endswith("`$.agent_id`"):
            raise InvalidInput(
                "agent_id must be an agent's id (a UUID, as list_agents gives it), not its name",
                code="invalid_id",
            ) from None
        raise InvalidInput(f"invalid arguments: {exc}", code="invalid_arguments") from None


def problem_result(error: AppError) -> CallToolResult:
    """A failed call as the API's problem document, in words a model reads and a code an application keeps; the
    ``Retry-After`` the API would send (a busy model) as ``retry_after_seconds``."""
    problem = problem_response(error.status, error.code, error.detail, error.extra).content
    if error.retry_after_seconds is not None:
        problem["retry_after_seconds"] = error.retry_after_seconds
    return CallToolResult(content=[TextContent(text=msgspec.json.encode(problem).decode())], is_error=True)


def build_server(chats: ChatService, principal_of: PrincipalOf = principal_of_request) -> Server[Any]:
    """The MCP server over ``chats``; ``principal_of`` says who sent a message (the HTTP endpoint's caller; the
    access property test gives its own, with no HTTP in between)."""
    tools = RaguTools(chats)

    async def list_tools(_: ServerRequestContext[Any, Any], __: PaginatedRequestParams | None) -> ListToolsResult:
        return ListToolsResult(tools=TOOLS)

    async def call_tool(ctx: ServerRequestContext[Any, Any], params: CallToolRequestParams) -> CallToolResult:
        if params.name not in {tool.name for tool in TOOLS}:
            raise MCPError(INVALID_PARAMS, f"Unknown tool: {params.name}")
        try:
            result = await tools.call(params.name, principal_of(ctx), params.arguments)
        except AppError as error:
            return problem_result(error)
        except Exception:  # a bug: logged with its traceback, reported as the API reports one, leaking nothing
            logger.exception("MCP tool %s failed", params.name)
            return problem_result(AppError("internal error", code="internal"))
        structured = msgspec.to_builtins(result)
        return CallToolResult(
            content=[TextContent(text=msgspec.json.encode(structured).decode())], structured_content=structured
        )

    return Server(
        "ragu-kappi",
        version=version("ragu"),
        title="Ragu",
        instructions=(
            "Ragu's agents answer from private documents, and only from what your groups may read. list_agents "
            "gives the agents you may use; search finds passages (no LLM); ask gives a cited answer."
        ),
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )
