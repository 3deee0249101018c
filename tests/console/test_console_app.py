"""The console's own endpoints and how the host serves it next to the services (no browser needed)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest
from litestar import Litestar, get

from common.auth import Authenticator
from common.config import Settings, load_settings
from console.app import STATIC_DIR, create_app
from ragu.host import ServiceHost

SERVICES = {"chonkit": "/chonkit", "kappi": "/kappi"}


@pytest.fixture
def dev_settings(tmp_path: Path) -> Settings:
    return load_settings({}, data_dir=str(tmp_path / "data"))


def _client(app: object) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://console.test")  # type: ignore[arg-type]


async def test_dev_token_is_accepted_by_the_services_authenticator(dev_settings: Settings) -> None:
    async with _client(create_app(dev_settings, services=SERVICES)) as client:
        response = await client.post(
            "/console/dev-token", json={"subject": "alice", "groups": ["hr", "legal", "hr"], "admin": True}
        )
    assert response.status_code == 200
    assert response.headers["cache-control"] == "no-store"
    body = response.json()
    assert body["groups"] == ["hr", "legal"]
    principal = await Authenticator(dev_settings).authenticate(f"Bearer {body['token']}")
    assert (principal.subject, principal.groups, principal.is_admin) == ("alice", frozenset({"hr", "legal"}), True)


async def test_dev_token_without_admin_gives_a_plain_user(dev_settings: Settings) -> None:
    async with _client(create_app(dev_settings, services=SERVICES)) as client:
        body = (await client.post("/console/dev-token", json={"subject": "bob"})).json()
    principal = await Authenticator(dev_settings).authenticate(f"Bearer {body['token']}")
    assert not principal.is_admin
    assert principal.groups == frozenset()


async def test_dev_token_is_refused_when_a_jwks_is_configured(tmp_path: Path) -> None:
    settings = load_settings({}, data_dir=str(tmp_path / "data"), auth_jwks_url="https://idp.example/jwks.json")
    async with _client(create_app(settings, services=SERVICES)) as client:
        refused = await client.post("/console/dev-token", json={"subject": "mallory", "admin": True})
        config = (await client.get("/console/config")).json()
    assert refused.status_code == 403
    assert refused.headers["content-type"].startswith("application/problem+json")
    assert refused.json()["code"] == "jwks_configured"
    assert "token" not in refused.json()
    assert config == {"sign_in": [], "oidc": None, "services": SERVICES}
    assert not (tmp_path / "data" / "auth" / "dev-secret").exists()


async def test_dev_token_rejects_an_empty_subject_and_unknown_fields(dev_settings: Settings) -> None:
    async with _client(create_app(dev_settings, services=SERVICES)) as client:
        empty = await client.post("/console/dev-token", json={"subject": ""})
        unknown = await client.post("/console/dev-token", json={"subject": "a", "roles": ["admin"]})
    assert (empty.status_code, empty.json()["code"]) == (400, "invalid_request")
    assert (unknown.status_code, unknown.json()["code"]) == (400, "invalid_request")


async def test_page_and_assets_are_served_with_a_strict_content_security_policy(dev_settings: Settings) -> None:
    async with _client(create_app(dev_settings, services=SERVICES)) as client:
        page = await client.get("/")
        script = await client.get("/console/static/js/main.js")
        config = (await client.get("/console/config")).json()
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert '<script type="module" src="/console/static/js/main.js">' in page.text
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert script.status_code == 200
    assert "javascript" in script.headers["content-type"]
    assert config == {"sign_in": ["development"], "oidc": None, "services": SERVICES}


def test_every_module_the_page_imports_exists() -> None:
    scripts = STATIC_DIR / "js"
    for module in scripts.glob("*.js"):
        for line in module.read_text(encoding="utf-8").splitlines():
            if line.startswith("import ") and " from " in line:
                target = line.rsplit(" from ", 1)[1].strip("\";' ")
                assert (scripts / target).resolve().is_file(), f"{module.name} imports missing {target}"


def test_the_console_never_persists_tokens_in_the_browser() -> None:
    """Only the PKCE verifier, state and nonce may wait in sessionStorage across the provider's redirect."""
    sources = {p.name: p.read_text(encoding="utf-8") for p in (STATIC_DIR / "js").glob("*.js")}
    everything = "\n".join(sources.values())
    for storage in ("localStorage.", "localStorage[", "document.cookie", ".innerHTML", "new EventSource"):
        assert storage not in everything
    elsewhere = "\n".join(text for name, text in sources.items() if name != "oidc.js")
    assert "sessionStorage." not in elsewhere
    writes = [line.strip() for line in sources["oidc.js"].splitlines() if "sessionStorage.setItem" in line]
    assert writes == ["sessionStorage.setItem(PENDING, JSON.stringify(pending));"]


async def test_host_serves_console_at_root_index_at_api_and_services_under_their_prefix(
    dev_settings: Settings,
) -> None:
    @get("/ping", sync_to_thread=False)
    def ping() -> dict[str, str]:
        return {"pong": "svc"}

    service = Litestar(route_handlers=[ping], logging_config=None)  # the default configures the root logger
    host = ServiceHost({"svc": service}, fallback=create_app(dev_settings, services={"svc": "/svc"}))
    async with _client(host) as client:
        root, index, routed, missing = await asyncio.gather(
            client.get("/"), client.get("/api"), client.get("/svc/ping"), client.get("/nothing-here")
        )
    assert root.headers["content-type"].startswith("text/html")
    assert index.json() == {"services": {"svc": {"health": "/svc/health", "docs": "/svc/docs"}}}
    assert routed.json() == {"pong": "svc"}
    assert (missing.status_code, missing.json()["code"]) == (404, "route_not_found")


@pytest.mark.parametrize("path", ["/console/dev-token", "/console/oidc/refresh"])
async def test_json_nested_past_the_decoders_depth_is_400_on_the_consoles_own_routes(
    dev_settings: Settings, path: str
) -> None:
    """Anyone may post to these, before signing in: a body 1,000 deep was a 500 (#26, item 11)."""
    async with _client(create_app(dev_settings, services=SERVICES)) as client:
        response = await client.post(
            path, content=b"[" * 1_000 + b"]" * 1_000, headers={"Content-Type": "application/json"}
        )
    assert (response.status_code, response.json()["code"]) == (400, "json_too_deep")
