"""The console server's half of OpenID Connect sign-in, against a stand-in identity provider over real HTTP.

The browser's half (PKCE values, state, redirects) is driven here by hand with the same parameters, so each
refusal the server owes — wrong nonce, wrong verifier, a token the platform would not accept, a provider
that lies about its issuer or cannot be reached — is checked without a browser.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from common.auth import Authenticator
from common.config import Settings, load_settings
from common.errors import InvalidInput
from console.app import create_app
from tests.console.oidc_standin import StandinIdp, User

CLIENT_ID = "ragu-console"
API_AUDIENCE = "ragu-api"
REDIRECT_URI = "http://console.test/"
SERVICES = {"chonkit": "/chonkit", "kappi": "/kappi"}


@pytest.fixture(scope="module")
def idp() -> Iterator[StandinIdp]:
    users = {
        "alice": User(subject="alice", name="Alice Adams", groups=("hr",)),
        "rita": User(subject="rita", name="Rita Root", roles=("admin",)),
    }
    provider = StandinIdp(client_id=CLIENT_ID, api_audience=API_AUDIENCE, users=users, redirect_uris=[REDIRECT_URI])
    with provider.start():
        yield provider


def _settings(tmp_path: Path, idp: StandinIdp, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "data_dir": str(tmp_path / "data"),
        "auth_jwks_url": f"{idp.url}/jwks",
        "auth_issuer": idp.issuer,
        "auth_audience": API_AUDIENCE,
        "oidc_issuer": idp.issuer,
        "oidc_client_id": CLIENT_ID,
    }
    return load_settings({}, **(values | overrides))


def _client(settings: Settings) -> httpx.AsyncClient:
    app = create_app(settings, services=SERVICES)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://console.test")  # type: ignore[arg-type]


@contextmanager
def _port_nobody_listens_on() -> Iterator[int]:
    """A loopback port bound but not listening (connections are refused), held so no other test takes it."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        yield port


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class BrowserSide:
    """What the page does around the redirect: PKCE verifier and challenge, state and nonce."""

    def __init__(self) -> None:
        self.verifier = _b64(secrets.token_bytes(32))
        self.challenge = _b64(hashlib.sha256(self.verifier.encode()).digest())
        self.state = _b64(secrets.token_bytes(16))
        self.nonce = _b64(secrets.token_bytes(16))

    def code_from(self, idp: StandinIdp, user: str) -> str:
        """Sign in at the provider and return the code it redirects back with (state checked, as the page does)."""
        form = {
            "response_type": "code",
            "client_id": CLIENT_ID,
            "redirect_uri": REDIRECT_URI,
            "scope": "openid profile email",
            "state": self.state,
            "nonce": self.nonce,
            "code_challenge": self.challenge,
            "code_challenge_method": "S256",
            "username": user,
            "decision": "allow",
        }
        response = httpx.post(f"{idp.url}/authorize", data=form)
        assert response.status_code == 302
        query = parse_qs(urlsplit(response.headers["location"]).query)
        assert query["state"] == [self.state]
        assert query["iss"] == [idp.issuer]
        return query["code"][0]

    def exchange(self, code: str, **changes: str) -> dict[str, str]:
        body = {"code": code, "code_verifier": self.verifier, "redirect_uri": REDIRECT_URI, "nonce": self.nonce}
        return body | changes


async def test_standin_idp_code_exchange_returns_a_session_the_services_accept(tmp_path: Path, idp: StandinIdp) -> None:
    settings = _settings(tmp_path, idp)
    browser = BrowserSide()
    async with _client(settings) as client:
        config = (await client.get("/console/config")).json()
        provider = (await client.get("/console/oidc/provider")).json()
        response = await client.post("/console/oidc/token", json=browser.exchange(browser.code_from(idp, "rita")))
    assert config["sign_in"] == ["oidc"]
    assert config["oidc"] == {
        "issuer": idp.issuer,
        "client_id": CLIENT_ID,
        "scopes": "openid profile email",
        "redirect_uri": None,
    }
    assert provider == {
        "issuer": idp.issuer,
        "authorization_endpoint": f"{idp.url}/authorize",
        "end_session_endpoint": f"{idp.url}/logout",
    }
    assert response.status_code == 200
    assert response.headers["cache-control"] == "no-store"
    session = response.json()
    assert (session["subject"], session["name"], session["is_admin"]) == ("rita", "Rita Root", True)
    assert session["token"] == idp.issued_access_tokens[-1]
    assert 0 < session["expires_in"] <= 300
    assert session["refresh_token"]
    principal = await Authenticator(settings).authenticate(f"Bearer {session['token']}")
    assert principal.subject == "rita"


async def test_standin_idp_id_token_with_another_nonce_is_refused(tmp_path: Path, idp: StandinIdp) -> None:
    browser = BrowserSide()
    code = browser.code_from(idp, "alice")
    async with _client(_settings(tmp_path, idp)) as client:
        response = await client.post("/console/oidc/token", json=browser.exchange(code, nonce=_b64(b"x" * 16)))
    assert response.status_code == 401
    assert response.json()["code"] == "oidc_nonce_mismatch"
    assert "token" not in response.json()


async def test_standin_idp_refuses_the_wrong_verifier_and_a_reused_code(tmp_path: Path, idp: StandinIdp) -> None:
    browser = BrowserSide()
    code = browser.code_from(idp, "alice")
    async with _client(_settings(tmp_path, idp)) as client:
        wrong = await client.post("/console/oidc/token", json=browser.exchange(code, code_verifier="a" * 43))
        again = await client.post("/console/oidc/token", json=browser.exchange(code))
    assert (wrong.status_code, wrong.json()["code"], wrong.json()["error"]) == (
        401,
        "oidc_token_refused",
        "invalid_grant",
    )
    assert "PKCE verification failed" in wrong.json()["detail"]
    assert (again.status_code, again.json()["code"]) == (401, "oidc_token_refused")  # codes work once


async def test_standin_idp_token_for_another_audience_is_refused_before_the_page_gets_it(
    tmp_path: Path, idp: StandinIdp
) -> None:
    browser = BrowserSide()
    code = browser.code_from(idp, "alice")
    async with _client(_settings(tmp_path, idp, auth_audience="another-api")) as client:
        response = await client.post("/console/oidc/token", json=browser.exchange(code))
    body = response.json()
    assert (response.status_code, body["code"], body["reason"]) == (401, "oidc_token_not_accepted", "invalid_audience")
    assert body["detail"].startswith("signed in at the identity provider, but its access token is not accepted")


async def test_standin_idp_id_token_can_be_the_bearer(tmp_path: Path, idp: StandinIdp) -> None:
    """For providers whose access tokens are opaque: the services then check the ID token's audience."""
    browser = BrowserSide()
    code = browser.code_from(idp, "alice")
    settings = _settings(tmp_path, idp, oidc_use_id_token=True, auth_audience=CLIENT_ID)
    async with _client(settings) as client:
        session = (await client.post("/console/oidc/token", json=browser.exchange(code))).json()
    assert session["token"] == session["id_token"]
    assert session["name"] == "Alice Adams"
    assert session["is_admin"] is False


async def test_standin_idp_refresh_token_renews_the_session_once(tmp_path: Path, idp: StandinIdp) -> None:
    browser = BrowserSide()
    code = browser.code_from(idp, "alice")
    async with _client(_settings(tmp_path, idp)) as client:
        first = (await client.post("/console/oidc/token", json=browser.exchange(code))).json()
        renewed = await client.post("/console/oidc/refresh", json={"refresh_token": first["refresh_token"]})
        replayed = await client.post("/console/oidc/refresh", json={"refresh_token": first["refresh_token"]})
    assert renewed.status_code == 200
    assert renewed.headers["cache-control"] == "no-store"
    assert renewed.json()["token"] != first["token"]
    assert renewed.json()["subject"] == "alice"
    assert renewed.json()["refresh_token"] != first["refresh_token"]
    assert (replayed.status_code, replayed.json()["code"]) == (401, "oidc_refresh_refused")


async def test_standin_idp_that_names_another_issuer_is_refused(tmp_path: Path, idp: StandinIdp) -> None:
    """Discovery must name exactly the configured issuer (OpenID Connect Discovery §4.3); a trailing slash
    is a different issuer, and every ID token would then fail its issuer check."""
    async with _client(_settings(tmp_path, idp, oidc_issuer=idp.issuer + "/")) as client:
        response = await client.get("/console/oidc/provider")
    assert (response.status_code, response.json()["code"]) == (503, "oidc_misconfigured")
    assert idp.issuer in response.json()["detail"]


async def test_unreachable_provider_is_reported_in_plain_words(tmp_path: Path, idp: StandinIdp) -> None:
    with _port_nobody_listens_on() as port:
        settings = _settings(tmp_path, idp, oidc_issuer=f"http://127.0.0.1:{port}")
        async with _client(settings) as client:
            response = await client.get("/console/oidc/provider")
    assert (response.status_code, response.json()["code"]) == (503, "oidc_unavailable")
    assert "could not be read" in response.json()["detail"]


def test_oidc_settings_that_cannot_work_are_refused_at_start(tmp_path: Path) -> None:
    base = {"data_dir": str(tmp_path), "auth_jwks_url": "https://idp.example/jwks"}
    cases = [
        ({"oidc_issuer": "https://idp.example"}, "invalid_setting"),  # no client id
        ({"oidc_client_id": "console"}, "invalid_setting"),  # no issuer
        ({"oidc_issuer": "https://idp.example", "oidc_client_id": "c", "oidc_scopes": "profile"}, "invalid_setting"),
        ({"oidc_issuer": "http://idp.example", "oidc_client_id": "c"}, "invalid_setting"),  # not https
    ]
    for overrides, code in cases:
        with pytest.raises(InvalidInput) as refused:
            create_app(load_settings({}, **(base | overrides)), services=SERVICES)
        assert refused.value.code == code, overrides
    without_jwks = load_settings({}, data_dir=str(tmp_path), oidc_issuer="https://idp.example", oidc_client_id="c")
    with pytest.raises(InvalidInput) as refused:
        create_app(without_jwks, services=SERVICES)
    assert refused.value.code == "oidc_needs_jwks"


async def test_oidc_endpoints_answer_404_when_no_provider_is_configured(tmp_path: Path) -> None:
    settings = load_settings({}, data_dir=str(tmp_path / "data"))
    async with _client(settings) as client:
        response = await client.get("/console/oidc/provider")
        config = (await client.get("/console/config")).json()
    assert (response.status_code, response.json()["code"]) == (404, "oidc_not_configured")
    assert config == {"sign_in": ["development"], "oidc": None, "services": SERVICES}
