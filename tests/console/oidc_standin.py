"""A stand-in OpenID Connect provider for the console's tests, speaking the real wire format.

No real provider (Keycloak, Auth0, Entra ID) can run on this machine, so this one serves what the console
meets in production: the discovery document, ``/authorize`` (an HTML sign-in form, as providers show, that
redirects back with ``code``, ``state`` and ``iss``), ``/token`` (``authorization_code`` with the RFC 7636 S256
check of the ``code_verifier``, and rotating ``refresh_token``s), ``/jwks`` and ``/logout`` (RP-initiated
logout). Errors follow RFC 6749: redirected ``error``/``error_description`` from the authorization endpoint,
a 400 JSON body from the token endpoint. Tokens are RS256 JWTs signed with ``cryptography`` directly,
independently of the python-jose code that verifies them.

It sends no CORS headers, as many providers do not: a page calling its token endpoint itself would fail.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import secrets
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

KID = "standin-key-1"


@dataclass(frozen=True)
class User:
    subject: str
    name: str
    groups: tuple[str, ...] = ()
    roles: tuple[str, ...] = ()


@dataclass(frozen=True)
class _Grant:
    client_id: str
    redirect_uri: str
    code_challenge: str
    nonce: str | None
    user: User
    expires_at: float


@dataclass
class StandinIdp:
    """The provider; ``start()`` serves it on a free loopback port until the context exits."""

    client_id: str
    api_audience: str
    users: dict[str, User]
    redirect_uris: list[str] = field(default_factory=list)
    access_ttl: int = 300
    token_requests: list[dict[str, str]] = field(default_factory=list)
    """Every token request: its grant type and outcome (``issued`` or the OAuth error code)."""
    logouts: list[dict[str, str]] = field(default_factory=list)
    issued_access_tokens: list[str] = field(default_factory=list)
    url: str = ""
    _key: rsa.RSAPrivateKey = field(
        default_factory=lambda: rsa.generate_private_key(public_exponent=65537, key_size=2048)
    )
    _codes: dict[str, _Grant] = field(default_factory=dict)
    _refresh: dict[str, User] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def issuer(self) -> str:
        return self.url

    @contextmanager
    def start(self) -> Iterator[StandinIdp]:
        server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.url = f"http://127.0.0.1:{server.server_address[1]}"
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            server.shutdown()
            server.server_close()
            thread.join()

    def discovery(self) -> dict[str, Any]:
        return {
            "issuer": self.issuer,
            "authorization_endpoint": f"{self.url}/authorize",
            "token_endpoint": f"{self.url}/token",
            "jwks_uri": f"{self.url}/jwks",
            "end_session_endpoint": f"{self.url}/logout",
            "response_types_supported": ["code"],
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": ["RS256"],
            "scopes_supported": ["openid", "profile", "email"],
            "grant_types_supported": ["authorization_code", "refresh_token"],
            "token_endpoint_auth_methods_supported": ["none"],
            "code_challenge_methods_supported": ["S256"],
        }

    def jwks(self) -> dict[str, Any]:
        numbers = self._key.public_key().public_numbers()
        return {
            "keys": [
                {
                    "kty": "RSA",
                    "kid": KID,
                    "use": "sig",
                    "alg": "RS256",
                    "n": _b64(numbers.n.to_bytes((numbers.n.bit_length() + 7) // 8, "big")),
                    "e": _b64(numbers.e.to_bytes(3, "big")),
                }
            ]
        }

    def sign(self, claims: dict[str, Any]) -> str:
        header = {"alg": "RS256", "typ": "JWT", "kid": KID}
        signing_input = f"{_b64_json(header)}.{_b64_json(claims)}".encode()
        signature = self._key.sign(signing_input, padding.PKCS1v15(), hashes.SHA256())
        return f"{signing_input.decode()}.{_b64(signature)}"

    def authorize_problem(self, query: dict[str, str]) -> str | None:
        """Why the authorization request cannot even be answered by a redirect (RFC 6749 §4.1.2.1)."""
        if query.get("client_id") != self.client_id:
            return "unknown client_id"
        if query.get("redirect_uri") not in self.redirect_uris:
            return "redirect_uri is not registered for this client"
        return None

    def authorize_error(self, query: dict[str, str]) -> tuple[str, str] | None:
        if query.get("response_type") != "code":
            return "unsupported_response_type", "only the authorization code flow is supported"
        if "openid" not in query.get("scope", "").split():
            return "invalid_scope", "the openid scope is required"
        if not query.get("code_challenge") or query.get("code_challenge_method") != "S256":
            return "invalid_request", "PKCE with code_challenge_method=S256 is required"
        return None

    def issue_code(self, query: dict[str, str], user: User) -> str:
        code = secrets.token_urlsafe(24)
        with self._lock:
            self._codes[code] = _Grant(
                client_id=query["client_id"],
                redirect_uri=query["redirect_uri"],
                code_challenge=query["code_challenge"],
                nonce=query.get("nonce"),
                user=user,
                expires_at=time.time() + 60,
            )
        return code

    def token(self, form: dict[str, str]) -> tuple[int, dict[str, Any]]:
        status, body = self._token(form)
        self.token_requests.append({"grant_type": form.get("grant_type", ""), "outcome": body.get("error", "issued")})
        return status, body

    def _token(self, form: dict[str, str]) -> tuple[int, dict[str, Any]]:
        if form.get("client_id") != self.client_id:
            return 401, _oauth_error("invalid_client", "unknown client")
        grant_type = form.get("grant_type")
        if grant_type == "refresh_token":
            with self._lock:
                user = self._refresh.pop(form.get("refresh_token", ""), None)  # rotated: each one works once
            if user is None:
                return 400, _oauth_error("invalid_grant", "the refresh token is unknown, used or revoked")
            return 200, self._tokens(user, nonce=None)
        if grant_type != "authorization_code":
            return 400, _oauth_error("unsupported_grant_type", f"grant_type {grant_type!r} is not supported")
        with self._lock:
            grant = self._codes.pop(form.get("code", ""), None)  # one use only, whatever the outcome
        if refusal := _grant_refusal(grant, form):
            return 400, _oauth_error("invalid_grant", refusal)
        assert grant is not None
        return 200, self._tokens(grant.user, nonce=grant.nonce)

    def _tokens(self, user: User, *, nonce: str | None) -> dict[str, Any]:
        now = int(time.time())
        access = self.sign(
            {
                "iss": self.issuer,
                "sub": user.subject,
                "aud": self.api_audience,
                "azp": self.client_id,
                "iat": now,
                "exp": now + self.access_ttl,
                "jti": secrets.token_hex(8),
                "scope": "openid profile email",
                "name": user.name,
                "groups": list(user.groups),
                "roles": list(user.roles),
            }
        )
        id_claims: dict[str, Any] = {
            "iss": self.issuer,
            "sub": user.subject,
            "aud": self.client_id,
            "iat": now,
            "exp": now + 300,
            "auth_time": now,
            "name": user.name,
            "preferred_username": user.subject,
        }
        if nonce is not None:
            id_claims["nonce"] = nonce
        refresh = secrets.token_urlsafe(32)
        with self._lock:
            self._refresh[refresh] = user
            self.issued_access_tokens.append(access)
        return {
            "access_token": access,
            "token_type": "Bearer",
            "expires_in": self.access_ttl,
            "id_token": self.sign(id_claims),
            "refresh_token": refresh,
            "scope": "openid profile email",
        }


class _IdpHandler(BaseHTTPRequestHandler):
    """The provider's endpoints; :func:`_handler` binds a subclass to one :class:`StandinIdp`."""

    idp: StandinIdp

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        parts = urlsplit(self.path)
        query = _single(parse_qs(parts.query))
        if parts.path == "/.well-known/openid-configuration":
            self._json(200, self.idp.discovery())
        elif parts.path == "/jwks":
            self._json(200, self.idp.jwks())
        elif parts.path == "/authorize":
            self._authorize_page(query)
        elif parts.path == "/logout":
            self._logout(query)
        else:
            self._json(404, {"error": "not_found"})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        form = _single(parse_qs(self.rfile.read(length).decode()))
        path = urlsplit(self.path).path
        if path == "/token":
            status, body = self.idp.token(form)
            self._json(status, body)
        elif path == "/authorize":
            self._authorize_decision(form)
        else:
            self._json(404, {"error": "not_found"})

    def _authorize_page(self, query: dict[str, str]) -> None:
        if problem := self.idp.authorize_problem(query):
            self._html(400, f"<h1>Sign-in error</h1><p>{html.escape(problem)}</p>")
            return
        if error := self.idp.authorize_error(query):
            self._redirect_error(query, *error)
            return
        hidden = "".join(
            f'<input type="hidden" name="{html.escape(k)}" value="{html.escape(v)}">' for k, v in query.items()
        )
        options = "".join(
            f'<option value="{html.escape(u.subject)}">{html.escape(u.name)}</option>' for u in self.idp.users.values()
        )
        self._html(
            200,
            "<h1>Stand-in identity provider</h1>"
            f'<form method="post" action="/authorize">{hidden}'
            f'<label>Account <select name="username">{options}</select></label>'
            '<button name="decision" value="allow">Continue</button>'
            '<button name="decision" value="deny">Cancel</button></form>',
        )

    def _authorize_decision(self, form: dict[str, str]) -> None:
        if problem := self.idp.authorize_problem(form):
            self._html(400, f"<h1>Sign-in error</h1><p>{html.escape(problem)}</p>")
            return
        if error := self.idp.authorize_error(form):
            self._redirect_error(form, *error)
            return
        user = self.idp.users.get(form.get("username", ""))
        if form.get("decision") != "allow" or user is None:
            self._redirect_error(form, "access_denied", "The user cancelled the sign-in.")
            return
        code = self.idp.issue_code(form, user)
        self._redirect(form["redirect_uri"], {"code": code, "state": form.get("state", ""), "iss": self.idp.issuer})

    def _logout(self, query: dict[str, str]) -> None:
        self.idp.logouts.append(query)
        target = query.get("post_logout_redirect_uri")
        if target in self.idp.redirect_uris:
            self._redirect(target, {"state": query["state"]} if "state" in query else {})
        else:
            self._html(200, "<h1>Signed out</h1>")

    def _redirect_error(self, query: dict[str, str], error: str, description: str) -> None:
        params = {"error": error, "error_description": description, "iss": self.idp.issuer}
        if "state" in query:
            params["state"] = query["state"]
        self._redirect(query["redirect_uri"], params)

    def _redirect(self, target: str, params: dict[str, str]) -> None:
        separator = "&" if "?" in target else "?"
        self.send_response(302)
        self.send_header("Location", f"{target}{separator}{urlencode(params)}" if params else target)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _json(self, status: int, body: dict[str, Any]) -> None:
        self._send(status, "application/json", json.dumps(body).encode(), no_store=True)

    def _html(self, status: int, body: str) -> None:
        head = '<title>Stand-in IdP</title><link rel="icon" href="data:,">'
        page = f'<!doctype html><html lang="en"><head>{head}</head><body>{body}</body></html>'
        self._send(status, "text/html; charset=utf-8", page.encode())

    def _send(self, status: int, content_type: str, data: bytes, *, no_store: bool = False) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        if no_store:
            self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(data)


def _handler(idp: StandinIdp) -> type[BaseHTTPRequestHandler]:
    return type("Handler", (_IdpHandler,), {"idp": idp})


def _grant_refusal(grant: _Grant | None, form: dict[str, str]) -> str | None:
    if grant is None or grant.expires_at < time.time():
        return "the authorization code is unknown, used or expired"
    if form.get("redirect_uri") != grant.redirect_uri:
        return "redirect_uri differs from the authorization request"
    if _b64(hashlib.sha256(form.get("code_verifier", "").encode("ascii")).digest()) != grant.code_challenge:
        return "PKCE verification failed: code_verifier does not match code_challenge"
    return None


def _single(values: dict[str, list[str]]) -> dict[str, str]:
    return {k: v[0] for k, v in values.items()}


def _oauth_error(error: str, description: str) -> dict[str, Any]:
    return {"error": error, "error_description": description}


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _b64_json(value: object) -> str:
    return _b64(json.dumps(value, separators=(",", ":")).encode())
