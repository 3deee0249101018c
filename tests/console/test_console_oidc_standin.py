"""Signing in to the console through OpenID Connect, in a real Chromium, against a stand-in identity provider.

The platform (``ragu serve``) trusts the stand-in's JWKS, issuer and API audience, and the console is its
public client: the page runs the authorization-code flow with PKCE, the console server redeems the code, and
chonkit and kappi then accept the access token. No real provider can run here; the stand-in speaks the real
wire format (see ``oidc_standin.py``) and sends no CORS headers, so every pass also shows the page never
calls the provider's token endpoint itself.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.console.harness import CHROMIUM, Console, free_port, nav, running_platform
from tests.console.oidc_standin import StandinIdp, User

CLIENT_ID = "ragu-console"
API_AUDIENCE = "ragu-api"
SIGN_IN = "Sign in with your organisation's account"

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(), reason="Debian's Chromium is not installed (apt-get install -y chromium)"
)


@pytest.fixture(scope="module")
def idp() -> Iterator[StandinIdp]:
    users = {
        "rita": User(subject="rita", name="Rita Root", roles=("admin",)),
        "alice": User(subject="alice", name="Alice Adams", groups=("hr",)),
    }
    with StandinIdp(client_id=CLIENT_ID, api_audience=API_AUDIENCE, users=users).start() as provider:
        yield provider


@pytest.fixture(scope="module")
def platform(idp: StandinIdp) -> Iterator[str]:
    port = free_port()
    idp.redirect_uris.append(f"http://127.0.0.1:{port}/")
    with running_platform(
        port,
        RAGU_AUTH_JWKS_URL=f"{idp.url}/jwks",
        RAGU_AUTH_ISSUER=idp.issuer,
        RAGU_AUTH_AUDIENCE=API_AUDIENCE,
        RAGU_OIDC_ISSUER=idp.issuer,
        RAGU_OIDC_CLIENT_ID=CLIENT_ID,
    ) as base:
        yield base


def _at_the_provider(console: Console, idp: StandinIdp) -> None:
    console.page.get_by_role("button", name=SIGN_IN).click()
    console.page.wait_for_url(f"{idp.url}/authorize?*")


def _continue_as(console: Console, name: str) -> None:
    console.page.get_by_label("Account").select_option(label=name)
    console.page.get_by_role("button", name="Continue").click()


def test_standin_idp_sign_in_with_pkce_gives_tokens_the_services_accept_and_kept_in_memory_only(
    platform: str, browser: Any, idp: StandinIdp
) -> None:
    from playwright.sync_api import expect

    console = Console(browser, platform)
    page = console.page
    expect(page.get_by_role("button", name=SIGN_IN)).to_be_visible()
    expect(page.get_by_label("User name")).to_have_count(0)  # no development sign-in next to a provider
    expect(page.get_by_text("127.0.0.1")).to_be_visible()
    console.shot("30-oidc-sign-in")

    _at_the_provider(console, idp)
    query = page.evaluate("() => Object.fromEntries(new URLSearchParams(location.search))")
    assert query["code_challenge_method"] == "S256"
    assert query["client_id"] == CLIENT_ID
    assert query["scope"] == "openid profile email"
    assert len(query["code_challenge"]) == 43  # base64url of a SHA-256 digest
    assert query["state"] != query["nonce"]
    console.shot("31-oidc-provider")
    _continue_as(console, "Rita Root")

    # Collections come from chonkit, agents from kappi: both accepted the provider's access token.
    expect(page.get_by_text("Rita Root (admin)")).to_be_visible()
    expect(page.get_by_text("No collections yet. Create one above.")).to_be_visible()
    nav(page, "Agents")
    expect(page.get_by_text("No agents yet. Create one above.")).to_be_visible()
    console.shot("32-oidc-signed-in")
    assert "code=" not in page.url
    assert "state=" not in page.url
    assert idp.token_requests[-1] == {"grant_type": "authorization_code", "outcome": "issued"}
    assert console.stored() == [{}, {}, ""]
    page_text = page.content()
    assert idp.issued_access_tokens[-1] not in page_text

    refused = httpx.post(f"{platform}/console/dev-token", json={"subject": "mallory", "admin": True})
    assert (refused.status_code, refused.json()["code"]) == (403, "oidc_configured")

    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_role("button", name=SIGN_IN)).to_be_visible()
    logout = idp.logouts[-1]
    assert logout["client_id"] == CLIENT_ID
    assert logout["post_logout_redirect_uri"] == f"{platform}/"
    assert logout["id_token_hint"].count(".") == 2
    assert console.stored() == [{}, {}, ""]
    assert console.close() == []


def test_standin_idp_answer_with_a_wrong_state_is_refused_before_the_code_is_redeemed(
    platform: str, browser: Any, idp: StandinIdp
) -> None:
    from playwright.sync_api import expect

    console = Console(browser, platform)
    page = console.page
    _at_the_provider(console, idp)
    page.locator("input[name=state]").evaluate("input => { input.value = 'forged-by-someone-else' }")
    requests_before = len(idp.token_requests)
    _continue_as(console, "Alice Adams")

    expect(page.get_by_text("state mismatch")).to_be_visible()
    expect(page.get_by_role("button", name=SIGN_IN)).to_be_visible()
    expect(page.get_by_role("button", name="Sign out")).to_have_count(0)
    assert len(idp.token_requests) == requests_before  # the code was never redeemed
    assert "code=" not in page.url
    assert console.stored() == [{}, {}, ""]
    console.shot("33-oidc-wrong-state")
    assert console.close() == []


def test_standin_idp_refuses_a_code_whose_pkce_verifier_does_not_match_and_the_page_says_so(
    platform: str, browser: Any, idp: StandinIdp
) -> None:
    """A code obtained with someone else's challenge (code injection) cannot be redeemed with this tab's
    verifier: the provider's token endpoint refuses it, and the page shows its reason in plain words."""
    from playwright.sync_api import expect

    console = Console(browser, platform)
    page = console.page
    _at_the_provider(console, idp)
    page.locator("input[name=code_challenge]").evaluate(
        "input => { input.value = 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM' }"
    )
    _continue_as(console, "Alice Adams")

    message = page.get_by_text("The identity provider refused the sign-in")
    expect(message).to_be_visible()
    expect(message).to_contain_text("PKCE verification failed")
    assert "{" not in message.inner_text()
    expect(page.get_by_role("button", name="Sign out")).to_have_count(0)
    assert idp.token_requests[-1] == {"grant_type": "authorization_code", "outcome": "invalid_grant"}
    assert console.stored() == [{}, {}, ""]
    console.shot("34-oidc-verifier-mismatch")
    errors = console.close()
    # Chromium logs the refused exchange (401 from /console/oidc/token) as a console error; nothing else may appear.
    assert len(errors) == 1, errors
    assert "401" in errors[0], errors


def test_standin_idp_cancelled_sign_in_is_explained(platform: str, browser: Any, idp: StandinIdp) -> None:
    from playwright.sync_api import expect

    console = Console(browser, platform)
    page = console.page
    _at_the_provider(console, idp)
    page.get_by_role("button", name="Cancel").click()
    expect(
        page.get_by_text("The identity provider did not sign you in: The user cancelled the sign-in.")
    ).to_be_visible()
    assert console.stored() == [{}, {}, ""]
    assert console.close() == []


def test_standin_idp_tokens_are_refreshed_before_they_expire(platform: str, browser: Any, idp: StandinIdp) -> None:
    from playwright.sync_api import expect

    idp.access_ttl = 6
    try:
        console = Console(browser, platform)
        page = console.page
        _at_the_provider(console, idp)
        with page.expect_request(lambda r: "/kappi/agents" in r.url) as request:
            _continue_as(console, "Alice Adams")
        first = idp.issued_access_tokens[-1]
        assert request.value.headers["authorization"] == f"Bearer {first}"
        expect(page.get_by_text("No agents are available to you yet.")).to_be_visible()

        deadline = time.monotonic() + 20
        while not any(r == {"grant_type": "refresh_token", "outcome": "issued"} for r in idp.token_requests):
            assert time.monotonic() < deadline, "the page never refreshed its tokens"
            page.wait_for_timeout(250)
        with page.expect_request(lambda r: "/kappi/agents" in r.url) as request:
            page.evaluate("() => window.dispatchEvent(new HashChangeEvent('hashchange'))")  # show the screen again
        renewed = idp.issued_access_tokens[-1]
        assert renewed != first
        assert request.value.headers["authorization"] == f"Bearer {renewed}"
        expect(page.get_by_text("No agents are available to you yet.")).to_be_visible()
        assert console.stored() == [{}, {}, ""]
        assert console.close() == []
    finally:
        idp.access_ttl = 300
