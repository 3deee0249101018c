"""The API docs (``/docs``): Swagger UI from the installed ``swagger-ui-py`` package, never from a CDN.

Every URL on the page, and the server ``openapi.json`` names for "Try it out", starts at the request's
``root_path``: right both for a service served at ``/`` and for one mounted under ``/chonkit`` or ``/kappi``
by ``ragu serve``. The page loads nothing from another origin, and its Content-Security-Policy says so.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.util
from html import escape
from pathlib import Path
from typing import Any, Final

from litestar import Request, Router
from litestar.datastructures import ResponseHeader
from litestar.openapi.plugins import JsonRenderPlugin, OpenAPIRenderPlugin
from litestar.static_files import create_static_files_router

DOCS_PATH: Final = "/docs"
ASSETS_PATH: Final = "/static"  # under DOCS_PATH

# Constant, so the Content-Security-Policy can allow exactly this inline script by its hash; the page's
# addresses reach it as data attributes. No validator: its badge would send the spec's address to swagger.io.
_INIT_SCRIPT: Final = """
const root = document.getElementById("swagger-ui");
window.ui = SwaggerUIBundle({url: root.dataset.specUrl, dom_id: "#swagger-ui", deepLinking: true, validatorUrl: null});
"""
_INIT_HASH: Final = base64.b64encode(hashlib.sha256(_INIT_SCRIPT.encode()).digest()).decode()

CONTENT_SECURITY_POLICY: Final = (
    f"default-src 'self'; script-src 'self' 'sha256-{_INIT_HASH}'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'"
)
DOCS_HEADERS: Final = [
    ResponseHeader(name="Content-Security-Policy", value=CONTENT_SECURITY_POLICY),
    ResponseHeader(name="X-Content-Type-Options", value="nosniff"),
    ResponseHeader(name="Referrer-Policy", value="no-referrer"),
]


def swagger_ui_assets() -> Path:
    """The folder of Swagger UI's built files inside the installed ``swagger-ui-py``, found without importing
    the package (its adapters import Jinja and web frameworks we do not use)."""
    spec = importlib.util.find_spec("swagger_ui")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("swagger-ui-py is not installed; it ships the API docs page's scripts")
    return Path(spec.submodule_search_locations[0]) / "static"


class SwaggerUIPage(OpenAPIRenderPlugin):
    """Swagger UI 5 (it renders OpenAPI 3.1, which Litestar writes) with its files served next to the page."""

    def __init__(self) -> None:
        super().__init__(path="/")

    def render(self, request: Request[Any, Any, Any], openapi_schema: dict[str, Any]) -> bytes:
        docs = escape(request.scope.get("root_path", "") + DOCS_PATH)
        assets = f"{docs}{ASSETS_PATH}"
        title = escape(str(openapi_schema["info"]["title"]))
        return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<link rel="icon" type="image/png" href="{assets}/favicon-32x32.png">
<link rel="stylesheet" href="{assets}/swagger-ui.css">
<link rel="stylesheet" href="{assets}/index.css">
</head>
<body>
<div id="swagger-ui" data-spec-url="{docs}/openapi.json"></div>
<script src="{assets}/swagger-ui-bundle.js"></script>
<script>{_INIT_SCRIPT}</script>
</body>
</html>
""".encode()

    def receive_router(self, router: Router) -> None:
        router.register(create_static_files_router(ASSETS_PATH, directories=[swagger_ui_assets()], name="docs-assets"))


class MountedOpenAPIDocument(JsonRenderPlugin):
    """``openapi.json`` naming the service's own mount as its server (Litestar writes ``/`` whatever the mount)."""

    def render(self, request: Request[Any, Any, Any], openapi_schema: dict[str, Any]) -> bytes:
        server = {"url": request.scope.get("root_path") or "/"}
        return self.render_json(request, {**openapi_schema, "servers": [server]})


def docs_router() -> Router:
    """The router Litestar fills with the docs page and ``openapi.json``; its headers cover the assets too."""
    return Router(DOCS_PATH, route_handlers=[], include_in_schema=False, response_headers=DOCS_HEADERS)
