"""Kappi as an MCP server: the caller's agents, search and cited answers as tools, over streamable HTTP.

:mod:`.tools` holds the tools (one call of kappi's chat service each), :mod:`.http` the endpoint, its bearer-token
authorization and the protected-resource metadata; ``kappi/app.py`` registers :data:`ROUTES` and :func:`serve_mcp`.
"""

from kappi.mcp_server.http import mcp_endpoint, protected_resource_metadata, serve_mcp

ROUTES = [mcp_endpoint, protected_resource_metadata]

__all__ = ["ROUTES", "serve_mcp"]
