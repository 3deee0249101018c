"""Kappi's MCP endpoint (streamable HTTP, ``/mcp``) and its protected-resource metadata (RFC 9728).

Authorization is the MCP specification's for a protected resource: every request carries the caller's own bearer
token from the configured identity provider, checked by kappi's authenticator exactly as the API checks it (the
same ``principal`` dependency); there is no key of the server's own. A request without a valid token is a 401
problem whose ``WWW-Authenticate`` names the metadata document, which names the authorization server (the
issuer kappi accepts tokens from).

The SDK's session manager runs stateless, answering each POST with JSON: every message is authenticated on its
own, no session outlives its request, and any kappi process can answer any message. The server sends nothing
unasked, so a GET (the stream for that) is 405, as the transport's specification allows.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, cast

from litestar import Litestar, Request, get
from litestar.handlers import asgi
from litestar.types import Receive, Scope, Send
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings

from common.config import Settings
from common.errors import AppError
from common.http.problems import problem_response
from common.http.security import provide_principal
from kappi.mcp_server.tools import PRINCIPAL_SCOPE_KEY, build_server

MCP_PATH = "/mcp"
METADATA_PATH = "/.well-known/oauth-protected-resource" + MCP_PATH
"""RFC 9728's well-known path with the resource's path inserted: at a kappi served on its own, exactly where a
client looks; under ``ragu serve``'s ``/kappi``, where ``WWW-Authenticate`` points."""


def authorization_servers(settings: Settings) -> list[str]:
    """The issuer whose tokens kappi accepts (``auth_issuer``), else the console's OpenID provider; none with
    development tokens (``ragu token`` signs them: there is no authorization server to name)."""
    issuer = settings.auth.issuer or settings.oidc.issuer
    return [issuer] if issuer else []


def _base(request: Request[Any, Any, Any]) -> str:
    return str(request.base_url).rstrip("/")


@get(METADATA_PATH, include_in_schema=False, media_type="application/json", sync_to_thread=False)
def protected_resource_metadata(request: Request[Any, Any, Any]) -> dict[str, Any]:
    """The MCP endpoint as a protected resource: its URL, who issues its tokens, and that they go in a header."""
    settings: Settings = request.app.state.settings
    metadata: dict[str, Any] = {
        "resource": _base(request) + MCP_PATH,
        "bearer_methods_supported": ["header"],
        "resource_name": "Ragu (kappi)",
    }
    if servers := authorization_servers(settings):
        metadata["authorization_servers"] = servers
    return metadata


def challenge(request: Request[Any, Any, Any], error: AppError) -> str:
    """RFC 6750's challenge with RFC 9728's ``resource_metadata``; ``invalid_token`` when a token was sent."""
    parts = ['Bearer realm="ragu"']
    if error.code != "missing_token":
        detail = error.detail.replace("\\", "").replace('"', "'")
        parts += ['error="invalid_token"', f'error_description="{detail}"']
    parts.append(f'resource_metadata="{_base(request)}{METADATA_PATH}"')
    return ", ".join(parts)


@asgi(MCP_PATH, copy_scope=True)
async def mcp_endpoint(scope: Scope, receive: Receive, send: Send) -> None:
    """Authenticate, then hand the request to the SDK's transport with the caller in its scope."""
    request: Request[Any, Any, Any] = Request(scope, receive)
    try:
        principal = await provide_principal(request)
    except AppError as error:
        headers = {"WWW-Authenticate": challenge(request, error)} if error.status == 401 else {}
        response = problem_response(error.status, error.code, error.detail, error.extra)
        response.headers.update(headers)
        await response.to_asgi_response(None, request)(scope, receive, send)
        return
    if request.method == "GET":  # no server-initiated messages: the spec's 405 instead of an SSE stream held open
        response = problem_response(405, "method_not_allowed", "this MCP server answers POSTs only", {})
        response.headers["Allow"] = "POST"
        await response.to_asgi_response(None, request)(scope, receive, send)
        return
    cast(dict[str, Any], scope)[PRINCIPAL_SCOPE_KEY] = principal
    manager: StreamableHTTPSessionManager = request.app.state.mcp_sessions
    await manager.handle_request(cast(Any, scope), cast(Any, receive), cast(Any, send))


@asynccontextmanager
async def serve_mcp(app: Litestar) -> AsyncIterator[None]:
    """The SDK's session manager over kappi's chat service, for the app's lifetime (a manager runs once, so each
    start of the app makes its own). After kappi's composition root, which it reads."""
    manager = StreamableHTTPSessionManager(
        build_server(app.state.kappi.chats),
        stateless=True,
        json_response=True,
        # Host/Origin checks guard servers that trust whoever reaches them; this one trusts only a bearer token in
        # a header, which a page rebound to it cannot attach. They would also refuse kappi behind any proxy.
        security_settings=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    app.state.mcp_sessions = manager
    async with manager.run():
        yield
