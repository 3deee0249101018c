"""Bearer-token verification with real keys: tokens are signed here with ``cryptography`` (independently of the
python-jose code under test), key sets are real JWKS documents, and time moves through an injected clock."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import stat
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature
from jose import jwt as jose_jwt

from common.auth import Authenticator, Principal, dev_secret, mint_dev_token
from common.config import Settings, load_settings
from common.errors import Forbidden, InvalidInput, Unauthorized, Unavailable

NOW = 1_700_000_000.0
HOUR = 3600
SECRET = "a-development-secret-that-is-long-enough"

PrivateKey = rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey


class Clock:
    """A clock the tests move by hand, shared by the authenticator's key cache and its claim checks."""

    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> float:
        return self.now


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def b64url_json(value: object) -> str:
    return b64url(json.dumps(value, separators=(",", ":")).encode())


def sign(
    claims: dict[str, Any],
    key: PrivateKey | bytes | None,
    *,
    alg: str,
    kid: str | None = None,
    header: dict[str, Any] | None = None,
) -> str:
    """A compact JWS built by hand, so forged variants (``none``, HMAC keyed with a public key) are easy to make."""
    full_header: dict[str, Any] = {"alg": alg, "typ": "JWT"}
    if kid is not None:
        full_header["kid"] = kid
    full_header.update(header or {})
    signing_input = f"{b64url_json(full_header)}.{b64url_json(claims)}".encode()
    if isinstance(key, rsa.RSAPrivateKey):
        signature = key.sign(signing_input, padding.PKCS1v15(), hashes.SHA256())
    elif isinstance(key, ec.EllipticCurvePrivateKey):
        r, s = decode_dss_signature(key.sign(signing_input, ec.ECDSA(hashes.SHA256())))
        signature = r.to_bytes(32, "big") + s.to_bytes(32, "big")
    elif isinstance(key, bytes):
        signature = hmac.new(key, signing_input, hashlib.sha256).digest()
    else:
        signature = b""
    return f"{signing_input.decode()}.{b64url(signature)}"


def public_jwk(key: PrivateKey, kid: str, **members: Any) -> dict[str, Any]:
    if isinstance(key, rsa.RSAPrivateKey):
        numbers = key.public_key().public_numbers()
        size = (numbers.n.bit_length() + 7) // 8
        jwk = {"kty": "RSA", "n": b64url(numbers.n.to_bytes(size, "big")), "e": b64url(numbers.e.to_bytes(3, "big"))}
    else:
        point = key.public_key().public_numbers()
        size = (key.curve.key_size + 7) // 8
        crv = {"secp256r1": "P-256", "secp384r1": "P-384"}[key.curve.name]
        jwk = {
            "kty": "EC",
            "crv": crv,
            "x": b64url(point.x.to_bytes(size, "big")),
            "y": b64url(point.y.to_bytes(size, "big")),
        }
    return {**jwk, "kid": kid, **members}


def claims(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"sub": "user-1", "iat": int(NOW), "nbf": int(NOW), "exp": int(NOW) + HOUR}
    base.update(overrides)
    return {k: v for k, v in base.items() if v is not None}


def bearer(token: str) -> str:
    return f"Bearer {token}"


async def rejected(auth: Authenticator, authorization: str | None, code: str) -> Unauthorized:
    with pytest.raises(Unauthorized) as caught:
        await auth.authenticate(authorization)
    assert caught.value.code == code
    if authorization:
        token = authorization.partition(" ")[2]
        assert not token or token not in caught.value.detail
    return caught.value


@pytest.fixture(scope="module")
def rsa_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture(scope="module")
def other_rsa_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture(scope="module")
def ec_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


@pytest.fixture
def clock() -> Clock:
    return Clock()


def make_settings(tmp_path: Path, **overrides: Any) -> Settings:
    return load_settings({}, data_dir=str(tmp_path / "data"), **overrides)


class JwksFile:
    """A JWKS file on disk, rewritten the way an operator rotates keys."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def publish(self, *jwks: object) -> None:
        self.path.write_text(json.dumps({"keys": list(jwks)}))


@pytest.fixture
def jwks_file(tmp_path: Path) -> JwksFile:
    return JwksFile(tmp_path / "jwks.json")


def file_auth(tmp_path: Path, jwks_file: JwksFile, clock: Clock, **overrides: Any) -> Authenticator:
    settings = make_settings(tmp_path, auth_jwks_file=str(jwks_file.path), **overrides)
    return Authenticator(settings, clock=clock)


class InjectedJwksEndpoint:
    """Stand-in for an identity provider's JWKS endpoint injected as ``fetch_jwks``; counts fetches."""

    url = "https://idp.example/jwks"

    def __init__(self, *jwks: dict[str, Any]) -> None:
        self.document: dict[str, Any] = {"keys": list(jwks)}
        self.fetches = 0
        self.failure: Exception | None = None

    async def __call__(self, url: str) -> dict[str, Any]:
        assert url == self.url
        self.fetches += 1
        await asyncio.sleep(0)  # let concurrent callers interleave, as a real request would
        if self.failure is not None:
            raise self.failure
        served: dict[str, Any] = json.loads(json.dumps(self.document))  # a fresh copy, as if it came over the wire
        return served


def url_auth(tmp_path: Path, endpoint: InjectedJwksEndpoint, clock: Clock, **overrides: Any) -> Authenticator:
    settings = make_settings(tmp_path, auth_jwks_url=endpoint.url, **overrides)
    return Authenticator(settings, fetch_jwks=endpoint, clock=clock)


def secret_auth(tmp_path: Path, clock: Clock, **overrides: Any) -> Authenticator:
    return Authenticator(make_settings(tmp_path, auth_hs256_secret=SECRET, **overrides), clock=clock)


# --- valid tokens -------------------------------------------------------------------------------------------------


async def test_rs256_token_from_jwks_file(
    tmp_path: Path, jwks_file: JwksFile, clock: Clock, rsa_key: rsa.RSAPrivateKey
) -> None:
    jwks_file.publish(public_jwk(rsa_key, "rsa-1"))
    auth = file_auth(tmp_path, jwks_file, clock)
    token = sign(claims(name="Ada", groups=["eng"], roles=["reader"]), rsa_key, alg="RS256", kid="rsa-1")

    principal = await auth.authenticate(bearer(token))

    assert principal == Principal(
        subject="user-1", name="Ada", groups=frozenset({"eng"}), roles=frozenset({"reader"}), is_admin=False
    )


async def test_es256_token_from_jwks_url(tmp_path: Path, clock: Clock, ec_key: ec.EllipticCurvePrivateKey) -> None:
    endpoint = InjectedJwksEndpoint(public_jwk(ec_key, "ec-1", alg="ES256", use="sig"))
    auth = url_auth(tmp_path, endpoint, clock)

    principal = await auth.authenticate(bearer(sign(claims(), ec_key, alg="ES256", kid="ec-1")))

    assert principal.subject == "user-1"


async def test_token_signed_by_python_jose_is_accepted(
    tmp_path: Path, jwks_file: JwksFile, clock: Clock, rsa_key: rsa.RSAPrivateKey
) -> None:
    jwks_file.publish(public_jwk(rsa_key, "rsa-1"))
    pem = rsa_key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    token = jose_jwt.encode(claims(), pem.decode(), algorithm="RS256", headers={"kid": "rsa-1"})

    assert (await file_auth(tmp_path, jwks_file, clock).authenticate(bearer(token))).subject == "user-1"


async def test_bearer_scheme_is_case_insensitive(tmp_path: Path, clock: Clock) -> None:
    token = sign(claims(), SECRET.encode(), alg="HS256")
    assert (await secret_auth(tmp_path, clock).authenticate(f"bearer {token}")).subject == "user-1"


# --- key sets: caching, rotation, failures ---------------------------------------------------------------------------


async def test_jwks_is_cached_between_requests(tmp_path: Path, clock: Clock, rsa_key: rsa.RSAPrivateKey) -> None:
    endpoint = InjectedJwksEndpoint(public_jwk(rsa_key, "rsa-1"))
    auth = url_auth(tmp_path, endpoint, clock, auth_jwks_cache_seconds=300)
    token = bearer(sign(claims(), rsa_key, alg="RS256", kid="rsa-1"))

    await auth.authenticate(token)
    clock.now += 299
    await auth.authenticate(token)
    assert endpoint.fetches == 1

    clock.now += 1
    await auth.authenticate(token)
    assert endpoint.fetches == 2


async def test_new_key_in_jwks_file_is_accepted_without_restart(
    tmp_path: Path, jwks_file: JwksFile, clock: Clock, rsa_key: rsa.RSAPrivateKey, ec_key: ec.EllipticCurvePrivateKey
) -> None:
    jwks_file.publish(public_jwk(rsa_key, "old"))
    auth = file_auth(tmp_path, jwks_file, clock)
    await auth.authenticate(bearer(sign(claims(), rsa_key, alg="RS256", kid="old")))
    rotated = bearer(sign(claims(), ec_key, alg="ES256", kid="new"))

    jwks_file.publish(public_jwk(rsa_key, "old"), public_jwk(ec_key, "new"))
    clock.now += 10  # the unknown kid triggers a re-read as soon as the rate limit allows, long before cache expiry

    assert (await auth.authenticate(rotated)).subject == "user-1"


async def test_unknown_kid_refetch_is_rate_limited(
    tmp_path: Path, clock: Clock, rsa_key: rsa.RSAPrivateKey, ec_key: ec.EllipticCurvePrivateKey
) -> None:
    endpoint = InjectedJwksEndpoint(public_jwk(rsa_key, "old"))
    auth = url_auth(tmp_path, endpoint, clock)
    unknown = bearer(sign(claims(), ec_key, alg="ES256", kid="new"))

    await rejected(auth, unknown, "unknown_key")  # first load; the fetch just happened, so no second one
    assert endpoint.fetches == 1
    clock.now += 10
    for _ in range(3):
        await rejected(auth, unknown, "unknown_key")
    assert endpoint.fetches == 2

    endpoint.document["keys"].append(public_jwk(ec_key, "new"))
    clock.now += 9
    await rejected(auth, unknown, "unknown_key")  # still inside the 10 s window
    clock.now += 1
    assert (await auth.authenticate(unknown)).subject == "user-1"
    assert endpoint.fetches == 3


async def test_removed_key_is_rejected_after_cache_expiry(
    tmp_path: Path, jwks_file: JwksFile, clock: Clock, rsa_key: rsa.RSAPrivateKey, ec_key: ec.EllipticCurvePrivateKey
) -> None:
    jwks_file.publish(public_jwk(rsa_key, "old"), public_jwk(ec_key, "new"))
    auth = file_auth(tmp_path, jwks_file, clock, auth_jwks_cache_seconds=300)
    old = bearer(sign(claims(exp=int(NOW) + 10 * HOUR), rsa_key, alg="RS256", kid="old"))
    await auth.authenticate(old)

    jwks_file.publish(public_jwk(ec_key, "new"))
    clock.now += 299
    assert (await auth.authenticate(old)).subject == "user-1"  # cached key set, by design
    clock.now += 1
    await rejected(auth, old, "unknown_key")


async def test_concurrent_requests_share_one_fetch(tmp_path: Path, clock: Clock, rsa_key: rsa.RSAPrivateKey) -> None:
    endpoint = InjectedJwksEndpoint(public_jwk(rsa_key, "rsa-1"))
    auth = url_auth(tmp_path, endpoint, clock)
    token = bearer(sign(claims(), rsa_key, alg="RS256", kid="rsa-1"))

    principals = await asyncio.gather(*(auth.authenticate(token) for _ in range(5)))

    assert {p.subject for p in principals} == {"user-1"}
    assert endpoint.fetches == 1


async def test_unreachable_jwks_url_is_unavailable(tmp_path: Path, clock: Clock, rsa_key: rsa.RSAPrivateKey) -> None:
    endpoint = InjectedJwksEndpoint(public_jwk(rsa_key, "rsa-1"))
    endpoint.failure = httpx.ConnectError("connection refused")
    auth = url_auth(tmp_path, endpoint, clock)
    token = bearer(sign(claims(), rsa_key, alg="RS256", kid="rsa-1"))

    with pytest.raises(Unavailable) as caught:
        await auth.authenticate(token)
    assert caught.value.code == "jwks_unavailable"

    endpoint.failure = None
    with pytest.raises(Unavailable):
        await auth.authenticate(token)  # a failed fetch is not retried for 10 s
    assert endpoint.fetches == 1
    clock.now += 10
    assert (await auth.authenticate(token)).subject == "user-1"


async def test_expired_cache_with_failing_source_does_not_trust_stale_keys(
    tmp_path: Path, clock: Clock, rsa_key: rsa.RSAPrivateKey
) -> None:
    endpoint = InjectedJwksEndpoint(public_jwk(rsa_key, "rsa-1"))
    auth = url_auth(tmp_path, endpoint, clock, auth_jwks_cache_seconds=60)
    token = bearer(sign(claims(), rsa_key, alg="RS256", kid="rsa-1"))
    await auth.authenticate(token)

    endpoint.failure = httpx.ReadTimeout("timed out")
    clock.now += 60
    for _ in range(3):  # refused, and the failing source is not hammered: one fetch per 10 s
        with pytest.raises(Unavailable) as caught:
            await auth.authenticate(token)
        assert caught.value.code == "jwks_unavailable"
    assert endpoint.fetches == 2


async def test_failed_refetch_for_unknown_kid_keeps_fresh_keys(
    tmp_path: Path, clock: Clock, rsa_key: rsa.RSAPrivateKey, ec_key: ec.EllipticCurvePrivateKey
) -> None:
    endpoint = InjectedJwksEndpoint(public_jwk(rsa_key, "rsa-1"))
    auth = url_auth(tmp_path, endpoint, clock)
    known = bearer(sign(claims(), rsa_key, alg="RS256", kid="rsa-1"))
    await auth.authenticate(known)

    endpoint.failure = httpx.ConnectError("down")
    clock.now += 10
    with pytest.raises(Unavailable):
        await auth.authenticate(bearer(sign(claims(), ec_key, alg="ES256", kid="other")))
    assert (await auth.authenticate(known)).subject == "user-1"


@pytest.mark.parametrize("content", ["not json", '{"no_keys": []}', '{"keys": "nope"}', "[]"])
async def test_unreadable_jwks_file_is_unavailable(
    tmp_path: Path, jwks_file: JwksFile, clock: Clock, rsa_key: rsa.RSAPrivateKey, content: str
) -> None:
    jwks_file.path.write_text(content)
    auth = file_auth(tmp_path, jwks_file, clock)
    with pytest.raises(Unavailable) as caught:
        await auth.authenticate(bearer(sign(claims(), rsa_key, alg="RS256", kid="rsa-1")))
    assert caught.value.code == "jwks_unavailable"


async def test_missing_jwks_file_is_unavailable(
    tmp_path: Path, jwks_file: JwksFile, clock: Clock, rsa_key: rsa.RSAPrivateKey
) -> None:
    auth = file_auth(tmp_path, jwks_file, clock)
    with pytest.raises(Unavailable) as caught:
        await auth.authenticate(bearer(sign(claims(), rsa_key, alg="RS256", kid="rsa-1")))
    assert caught.value.code == "jwks_unavailable"


class _JwksHandler(BaseHTTPRequestHandler):
    status = 200
    body = b"{}"

    def do_GET(self) -> None:
        self.send_response(self.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def jwks_server() -> Iterator[tuple[str, type[_JwksHandler]]]:
    handler = type("Handler", (_JwksHandler,), {})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/jwks", handler
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


async def test_default_fetcher_reads_jwks_over_http(
    tmp_path: Path, clock: Clock, rsa_key: rsa.RSAPrivateKey, jwks_server: tuple[str, type[_JwksHandler]]
) -> None:
    url, handler = jwks_server
    handler.body = json.dumps({"keys": [public_jwk(rsa_key, "rsa-1")]}).encode()
    auth = Authenticator(make_settings(tmp_path, auth_jwks_url=url), clock=clock)

    principal = await auth.authenticate(bearer(sign(claims(), rsa_key, alg="RS256", kid="rsa-1")))

    assert principal.subject == "user-1"


@pytest.mark.parametrize("response", [(500, b"{}"), (200, b"<html>"), (200, b"[1]")], ids=["500", "html", "array"])
async def test_default_fetcher_failures_are_unavailable(
    tmp_path: Path,
    clock: Clock,
    rsa_key: rsa.RSAPrivateKey,
    jwks_server: tuple[str, type[_JwksHandler]],
    response: tuple[int, bytes],
) -> None:
    url, handler = jwks_server
    handler.status, handler.body = response
    auth = Authenticator(make_settings(tmp_path, auth_jwks_url=url), clock=clock)
    with pytest.raises(Unavailable) as caught:
        await auth.authenticate(bearer(sign(claims(), rsa_key, alg="RS256", kid="rsa-1")))
    assert caught.value.code == "jwks_unavailable"


# --- which keys a JWKS contributes ---------------------------------------------------------------------------------


async def test_key_without_kid_in_token_is_unknown(
    tmp_path: Path, jwks_file: JwksFile, clock: Clock, rsa_key: rsa.RSAPrivateKey
) -> None:
    jwks_file.publish(public_jwk(rsa_key, "rsa-1"))
    await rejected(file_auth(tmp_path, jwks_file, clock), bearer(sign(claims(), rsa_key, alg="RS256")), "unknown_key")


@pytest.mark.parametrize(
    "members",
    [{"use": "enc"}, {"key_ops": ["encrypt"]}, {"alg": "RS384"}, {"alg": "PS256"}],
    ids=["encryption-use", "encryption-ops", "other-alg", "pss"],
)
async def test_non_signing_or_foreign_algorithm_keys_are_ignored(
    tmp_path: Path, jwks_file: JwksFile, clock: Clock, rsa_key: rsa.RSAPrivateKey, members: dict[str, Any]
) -> None:
    jwks_file.publish(public_jwk(rsa_key, "rsa-1", **members))
    auth = file_auth(tmp_path, jwks_file, clock)
    await rejected(auth, bearer(sign(claims(), rsa_key, alg="RS256", kid="rsa-1")), "unknown_key")


async def test_short_rsa_and_non_p256_keys_are_ignored(tmp_path: Path, jwks_file: JwksFile, clock: Clock) -> None:
    weak = rsa.generate_private_key(public_exponent=65537, key_size=1024)  # noqa: S505 - the point of the test
    p384 = ec.generate_private_key(ec.SECP384R1())
    jwks_file.publish(public_jwk(weak, "weak"), public_jwk(p384, "p384"))
    auth = file_auth(tmp_path, jwks_file, clock)
    await rejected(auth, bearer(sign(claims(), weak, alg="RS256", kid="weak")), "unknown_key")
    # An ES256-shaped signature (32-byte r and s) from the P-384 key: the key must still not be selectable.
    p256_shaped = sign(claims(), ec.generate_private_key(ec.SECP256R1()), alg="ES256", kid="p384")
    await rejected(auth, bearer(p256_shaped), "unknown_key")


async def test_one_broken_key_does_not_hide_the_others(
    tmp_path: Path, jwks_file: JwksFile, clock: Clock, rsa_key: rsa.RSAPrivateKey, ec_key: ec.EllipticCurvePrivateKey
) -> None:
    off_curve = {**public_jwk(ec_key, "broken"), "y": public_jwk(ec_key, "x")["x"]}
    jwks_file.publish({"kty": "RSA", "kid": "no-modulus"}, off_curve, "not-an-object", public_jwk(rsa_key, "rsa-1"))
    auth = file_auth(tmp_path, jwks_file, clock)

    assert (await auth.authenticate(bearer(sign(claims(), rsa_key, alg="RS256", kid="rsa-1")))).subject == "user-1"
    await rejected(auth, bearer(sign(claims(), ec_key, alg="ES256", kid="broken")), "unknown_key")


async def test_algorithm_must_match_the_key_type(
    tmp_path: Path, jwks_file: JwksFile, clock: Clock, rsa_key: rsa.RSAPrivateKey, ec_key: ec.EllipticCurvePrivateKey
) -> None:
    jwks_file.publish(public_jwk(rsa_key, "rsa-1"), public_jwk(ec_key, "ec-1"))
    auth = file_auth(tmp_path, jwks_file, clock)
    await rejected(auth, bearer(sign(claims(), ec_key, alg="ES256", kid="rsa-1")), "unsupported_algorithm")
    await rejected(auth, bearer(sign(claims(), rsa_key, alg="RS256", kid="ec-1")), "unsupported_algorithm")


async def test_algorithm_must_match_the_jwk_alg(
    tmp_path: Path, jwks_file: JwksFile, clock: Clock, rsa_key: rsa.RSAPrivateKey, ec_key: ec.EllipticCurvePrivateKey
) -> None:
    jwks_file.publish(public_jwk(ec_key, "ec-1", alg="ES256"))
    auth = file_auth(tmp_path, jwks_file, clock)
    await rejected(auth, bearer(sign(claims(), rsa_key, alg="RS256", kid="ec-1")), "unsupported_algorithm")


# --- forged and tampered tokens ------------------------------------------------------------------------------------


async def test_signature_by_another_key_with_the_same_kid(
    tmp_path: Path, jwks_file: JwksFile, clock: Clock, rsa_key: rsa.RSAPrivateKey, other_rsa_key: rsa.RSAPrivateKey
) -> None:
    jwks_file.publish(public_jwk(rsa_key, "rsa-1"))
    forged = bearer(sign(claims(), other_rsa_key, alg="RS256", kid="rsa-1"))
    await rejected(file_auth(tmp_path, jwks_file, clock), forged, "invalid_signature")


async def test_es256_signature_by_another_key(
    tmp_path: Path, jwks_file: JwksFile, clock: Clock, ec_key: ec.EllipticCurvePrivateKey
) -> None:
    jwks_file.publish(public_jwk(ec_key, "ec-1"))
    forged = bearer(sign(claims(), ec.generate_private_key(ec.SECP256R1()), alg="ES256", kid="ec-1"))
    await rejected(file_auth(tmp_path, jwks_file, clock), forged, "invalid_signature")


async def test_every_single_character_change_in_header_or_claims_is_rejected(
    tmp_path: Path, jwks_file: JwksFile, clock: Clock, rsa_key: rsa.RSAPrivateKey
) -> None:
    jwks_file.publish(public_jwk(rsa_key, "rsa-1"))
    auth = file_auth(tmp_path, jwks_file, clock)
    token = sign(claims(roles=["reader"]), rsa_key, alg="RS256", kid="rsa-1")
    signed_part_length = token.rindex(".")

    for index in range(signed_part_length):
        if token[index] == ".":
            continue
        replacement = "A" if token[index] != "A" else "B"
        tampered = token[:index] + replacement + token[index + 1 :]
        with pytest.raises(Unauthorized) as caught:
            await auth.authenticate(bearer(tampered))
        assert caught.value.code in {"invalid_signature", "malformed_token", "unsupported_algorithm", "unknown_key"}


@pytest.mark.parametrize("alg", ["none", "None", "NONE"])
async def test_alg_none_is_rejected_with_jwks(
    tmp_path: Path, jwks_file: JwksFile, clock: Clock, rsa_key: rsa.RSAPrivateKey, alg: str
) -> None:
    jwks_file.publish(public_jwk(rsa_key, "rsa-1"))
    token = bearer(sign(claims(roles=["admin"]), None, alg=alg, kid="rsa-1"))
    await rejected(file_auth(tmp_path, jwks_file, clock), token, "unsupported_algorithm")


async def test_alg_none_is_rejected_with_a_secret(tmp_path: Path, clock: Clock) -> None:
    await rejected(secret_auth(tmp_path, clock), bearer(sign(claims(), None, alg="none")), "unsupported_algorithm")


@pytest.mark.parametrize("encoding", [serialization.Encoding.PEM, serialization.Encoding.DER])
async def test_hs256_keyed_with_the_rsa_public_key_is_rejected(
    tmp_path: Path, jwks_file: JwksFile, clock: Clock, rsa_key: rsa.RSAPrivateKey, encoding: serialization.Encoding
) -> None:
    jwks_file.publish(public_jwk(rsa_key, "rsa-1"))
    public_bytes = rsa_key.public_key().public_bytes(encoding, serialization.PublicFormat.SubjectPublicKeyInfo)
    forged = sign(claims(roles=["admin"]), public_bytes, alg="HS256", kid="rsa-1")
    signing_input, _, signature = forged.rpartition(".")
    expected = hmac.new(public_bytes, signing_input.encode(), hashlib.sha256).digest()
    assert b64url(expected) == signature  # the forgery is a correct HMAC under the public key bytes

    await rejected(file_auth(tmp_path, jwks_file, clock), bearer(forged), "unsupported_algorithm")


async def test_rs256_is_rejected_when_only_hs256_is_configured(
    tmp_path: Path, clock: Clock, rsa_key: rsa.RSAPrivateKey
) -> None:
    token = bearer(sign(claims(), rsa_key, alg="RS256", kid="rsa-1"))
    await rejected(secret_auth(tmp_path, clock), token, "unsupported_algorithm")


async def test_hs256_with_a_wrong_secret_is_rejected(tmp_path: Path, clock: Clock) -> None:
    token = bearer(sign(claims(), b"some-other-secret", alg="HS256"))
    await rejected(secret_auth(tmp_path, clock), token, "invalid_signature")


@pytest.mark.parametrize("alg", [["HS256"], {"alg": "HS256"}, 256, None], ids=repr)
async def test_non_string_alg_is_rejected(tmp_path: Path, clock: Clock, alg: Any) -> None:
    token = sign(claims(), SECRET.encode(), alg="HS256", header={"alg": alg})
    await rejected(secret_auth(tmp_path, clock), bearer(token), "unsupported_algorithm")


async def test_critical_header_extensions_are_rejected(tmp_path: Path, clock: Clock) -> None:
    token = sign(claims(), SECRET.encode(), alg="HS256", header={"crit": ["b64"], "b64": False})
    await rejected(secret_auth(tmp_path, clock), bearer(token), "malformed_token")


async def test_claims_that_are_not_an_object_are_malformed(tmp_path: Path, clock: Clock) -> None:
    signing_input = f"{b64url_json({'alg': 'HS256'})}.{b64url(b'[1, 2]')}"
    signature = b64url(hmac.new(SECRET.encode(), signing_input.encode(), hashlib.sha256).digest())
    await rejected(secret_auth(tmp_path, clock), bearer(f"{signing_input}.{signature}"), "malformed_token")


# --- the Authorization header --------------------------------------------------------------------------------------


@pytest.mark.parametrize("authorization", [None, "", "   "])
async def test_missing_token(tmp_path: Path, clock: Clock, authorization: str | None) -> None:
    await rejected(secret_auth(tmp_path, clock), authorization, "missing_token")


@pytest.mark.parametrize(
    "authorization",
    [
        "Basic dXNlcjpwYXNz",
        "Bearer",
        "Bearer ",
        "Bearer garbage",
        "Bearer a.b",
        "Bearer a.b.c.d",
        "Bearer a b.c.d",
        "Token eyJhbGciOiJIUzI1NiJ9.e30.c2ln",
        "Bearer Zm9v.e30.c2ln",  # header segment decodes to "foo", not JSON
        "Bearer éé.e30.c2ln",
        "Bearer " + "a" * 20_000 + ".e30.c2ln",
    ],
    ids=lambda value: value[:30],
)
async def test_malformed_authorization(tmp_path: Path, clock: Clock, authorization: str) -> None:
    await rejected(secret_auth(tmp_path, clock), authorization, "malformed_token")


# --- time, issuer, audience ----------------------------------------------------------------------------------------


async def test_expired_token(tmp_path: Path, clock: Clock) -> None:
    token = bearer(sign(claims(exp=int(NOW) - 31), SECRET.encode(), alg="HS256"))
    await rejected(secret_auth(tmp_path, clock), token, "token_expired")


async def test_expiry_leeway_is_honoured(tmp_path: Path, clock: Clock) -> None:
    auth = secret_auth(tmp_path, clock, auth_leeway_seconds=30)
    within = bearer(sign(claims(exp=int(NOW) - 29), SECRET.encode(), alg="HS256"))
    at_limit = bearer(sign(claims(exp=int(NOW) - 30), SECRET.encode(), alg="HS256"))

    assert (await auth.authenticate(within)).subject == "user-1"
    await rejected(auth, at_limit, "token_expired")
    await rejected(secret_auth(tmp_path, clock, auth_leeway_seconds=0), within, "token_expired")


async def test_not_yet_valid_token(tmp_path: Path, clock: Clock) -> None:
    token = bearer(sign(claims(nbf=int(NOW) + 31), SECRET.encode(), alg="HS256"))
    await rejected(secret_auth(tmp_path, clock), token, "token_not_yet_valid")


async def test_not_before_leeway_is_honoured(tmp_path: Path, clock: Clock) -> None:
    token = bearer(sign(claims(nbf=int(NOW) + 30), SECRET.encode(), alg="HS256"))
    assert (await secret_auth(tmp_path, clock, auth_leeway_seconds=30).authenticate(token)).subject == "user-1"
    await rejected(secret_auth(tmp_path, clock, auth_leeway_seconds=29), token, "token_not_yet_valid")


async def test_token_issued_in_the_future_is_not_yet_valid(tmp_path: Path, clock: Clock) -> None:
    token = bearer(sign(claims(iat=int(NOW) + 600, nbf=None), SECRET.encode(), alg="HS256"))
    await rejected(secret_auth(tmp_path, clock), token, "token_not_yet_valid")


@pytest.mark.parametrize(
    "overrides",
    [{"exp": None}, {"exp": "2030-01-01"}, {"exp": True}, {"nbf": "now"}, {"iat": [1]}],
    ids=["no-exp", "string-exp", "bool-exp", "string-nbf", "list-iat"],
)
async def test_missing_or_non_numeric_dates_are_malformed(
    tmp_path: Path, clock: Clock, overrides: dict[str, Any]
) -> None:
    token = bearer(sign(claims(**overrides), SECRET.encode(), alg="HS256"))
    await rejected(secret_auth(tmp_path, clock), token, "malformed_claims")


async def test_issuer_is_checked_when_configured(tmp_path: Path, clock: Clock) -> None:
    auth = secret_auth(tmp_path, clock, auth_issuer="https://idp.example/realms/ragu")
    good = bearer(sign(claims(iss="https://idp.example/realms/ragu"), SECRET.encode(), alg="HS256"))
    wrong = bearer(sign(claims(iss="https://evil.example/realms/ragu"), SECRET.encode(), alg="HS256"))
    missing = bearer(sign(claims(), SECRET.encode(), alg="HS256"))

    assert (await auth.authenticate(good)).subject == "user-1"
    await rejected(auth, wrong, "invalid_issuer")
    await rejected(auth, missing, "invalid_issuer")


async def test_audience_is_checked_when_configured(tmp_path: Path, clock: Clock) -> None:
    auth = secret_auth(tmp_path, clock, auth_audience="ragu")

    for accepted in ("ragu", ["account", "ragu"]):
        token = bearer(sign(claims(aud=accepted), SECRET.encode(), alg="HS256"))
        assert (await auth.authenticate(token)).subject == "user-1"
    for refused in ("account", ["account"], "RAGU", None, 42):
        token = bearer(sign(claims(aud=refused), SECRET.encode(), alg="HS256"))
        await rejected(auth, token, "invalid_audience")


async def test_issuer_and_audience_are_not_required_when_unconfigured(tmp_path: Path, clock: Clock) -> None:
    token = bearer(sign(claims(iss="anyone", aud="anything"), SECRET.encode(), alg="HS256"))
    assert (await secret_auth(tmp_path, clock).authenticate(token)).subject == "user-1"


# --- claims to principal -------------------------------------------------------------------------------------------


async def authenticate_claims(tmp_path: Path, clock: Clock, token_claims: dict[str, Any], **settings: Any) -> Principal:
    auth = secret_auth(tmp_path, clock, **settings)
    return await auth.authenticate(bearer(sign(token_claims, SECRET.encode(), alg="HS256")))


async def test_missing_groups_claim_means_no_groups(tmp_path: Path, clock: Clock) -> None:
    principal = await authenticate_claims(tmp_path, clock, claims())
    assert principal.groups == frozenset()
    assert principal.roles == frozenset()
    assert principal.is_admin is False


async def test_null_groups_claim_means_no_groups(tmp_path: Path, clock: Clock) -> None:
    token_claims = {**claims(), "groups": None}
    assert (await authenticate_claims(tmp_path, clock, token_claims)).groups == frozenset()


async def test_groups_are_kept_exactly(tmp_path: Path, clock: Clock) -> None:
    principal = await authenticate_claims(tmp_path, clock, claims(groups=["Eng", "eng", " eng", "eng"]))
    assert principal.groups == frozenset({"Eng", "eng", " eng"})


@pytest.mark.parametrize("groups", ["eng", ["eng", 1], ["eng", None], {"eng": True}, 7, [["eng"]]], ids=repr)
async def test_groups_that_are_not_a_list_of_strings_are_malformed(tmp_path: Path, clock: Clock, groups: Any) -> None:
    token = bearer(sign(claims(groups=groups), SECRET.encode(), alg="HS256"))
    await rejected(secret_auth(tmp_path, clock), token, "malformed_claims")


async def test_roles_as_a_string_are_malformed(tmp_path: Path, clock: Clock) -> None:
    token = bearer(sign(claims(roles="admin"), SECRET.encode(), alg="HS256"))
    await rejected(secret_auth(tmp_path, clock), token, "malformed_claims")


async def test_nested_roles_claim(tmp_path: Path, clock: Clock) -> None:
    token_claims = claims(realm_access={"roles": ["admin", "offline_access"]}, roles=["ignored"])
    principal = await authenticate_claims(tmp_path, clock, token_claims, auth_roles_claim="realm_access.roles")
    assert principal.roles == frozenset({"admin", "offline_access"})
    assert principal.is_admin is True


async def test_missing_nested_claim_means_none(tmp_path: Path, clock: Clock) -> None:
    principal = await authenticate_claims(tmp_path, clock, claims(), auth_roles_claim="realm_access.roles")
    assert principal.roles == frozenset()


async def test_nested_path_through_a_non_object_is_malformed(tmp_path: Path, clock: Clock) -> None:
    auth = secret_auth(tmp_path, clock, auth_roles_claim="realm_access.roles")
    token = bearer(sign(claims(realm_access="admin"), SECRET.encode(), alg="HS256"))
    await rejected(auth, token, "malformed_claims")


async def test_literal_dotted_claim_name_wins(tmp_path: Path, clock: Clock) -> None:
    token_claims = claims(**{"https://ragu.example/groups": ["eng"], "https://ragu": {"example/groups": ["ops"]}})
    principal = await authenticate_claims(
        tmp_path, clock, token_claims, auth_groups_claim="https://ragu.example/groups"
    )
    assert principal.groups == frozenset({"eng"})


async def test_admin_role_makes_an_admin(tmp_path: Path, clock: Clock) -> None:
    principal = await authenticate_claims(tmp_path, clock, claims(roles=["ragu-admin"]), auth_admin_role="ragu-admin")
    assert principal.is_admin is True
    Authenticator.require_admin(principal)


async def test_admin_role_is_case_sensitive(tmp_path: Path, clock: Clock) -> None:
    principal = await authenticate_claims(tmp_path, clock, claims(roles=["Admin", "admin "]))
    assert principal.is_admin is False


async def test_require_admin_refuses_non_admins(tmp_path: Path, clock: Clock) -> None:
    principal = await authenticate_claims(tmp_path, clock, claims(roles=["reader"], groups=["admin"]))
    with pytest.raises(Forbidden) as caught:
        Authenticator.require_admin(principal)
    assert caught.value.code == "admin_required"


async def test_display_name_falls_back_to_preferred_username(tmp_path: Path, clock: Clock) -> None:
    assert (await authenticate_claims(tmp_path, clock, claims(name="Ada L."))).name == "Ada L."
    assert (await authenticate_claims(tmp_path, clock, claims(preferred_username="ada"))).name == "ada"
    assert (await authenticate_claims(tmp_path, clock, claims(name=5, preferred_username="ada"))).name == "ada"
    assert (await authenticate_claims(tmp_path, clock, claims())).name is None
    custom = await authenticate_claims(tmp_path, clock, claims(display="Ada", name="x"), auth_name_claim="display")
    assert custom.name == "Ada"


@pytest.mark.parametrize("subject", [None, "", 42, ["user-1"]], ids=repr)
async def test_subject_must_be_a_non_empty_string(tmp_path: Path, clock: Clock, subject: Any) -> None:
    token_claims = {**claims(), "sub": subject}
    await rejected(
        secret_auth(tmp_path, clock), bearer(sign(token_claims, SECRET.encode(), alg="HS256")), "malformed_claims"
    )


# --- configuration, development secret, minting --------------------------------------------------------------------


@pytest.mark.parametrize(
    "overrides",
    [
        {"auth_jwks_url": "https://idp.example/jwks", "auth_jwks_file": "/etc/jwks.json"},
        {"auth_jwks_file": "/etc/jwks.json", "auth_hs256_secret": SECRET},
    ],
    ids=["url-and-file", "jwks-and-secret"],
)
def test_conflicting_key_sources_are_refused(tmp_path: Path, overrides: dict[str, Any]) -> None:
    with pytest.raises(InvalidInput) as caught:
        Authenticator(make_settings(tmp_path, **overrides))
    assert caught.value.code == "conflicting_auth_settings"


def test_dev_secret_is_persisted_privately_and_reused(tmp_path: Path) -> None:
    settings = make_settings(tmp_path)
    path = tmp_path / "data" / "auth" / "dev-secret"

    first = dev_secret(settings)

    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert path.read_text() == first
    assert len(first) >= 43
    assert dev_secret(settings) == first
    assert [p.name for p in path.parent.iterdir()] == ["dev-secret"]


def test_configured_secret_takes_precedence_and_writes_nothing(tmp_path: Path) -> None:
    assert dev_secret(make_settings(tmp_path, auth_hs256_secret=SECRET)) == SECRET
    assert not (tmp_path / "data").exists()


def test_empty_dev_secret_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "data" / "auth" / "dev-secret"
    path.parent.mkdir(parents=True)
    path.write_text("\n")
    with pytest.raises(InvalidInput) as caught:
        dev_secret(make_settings(tmp_path))
    assert caught.value.code == "invalid_dev_secret"


async def test_minted_token_survives_a_restart(tmp_path: Path) -> None:
    settings = make_settings(tmp_path)
    token = mint_dev_token(settings, subject="ada", groups=["eng"])

    restarted = Authenticator(settings)

    assert (await restarted.authenticate(bearer(token))).groups == frozenset({"eng"})


async def test_minted_token_verifies_with_all_claims(tmp_path: Path) -> None:
    settings = make_settings(
        tmp_path,
        auth_issuer="https://ragu.local",
        auth_audience="ragu",
        auth_roles_claim="realm_access.roles",
        auth_name_claim="display_name",
    )
    token = mint_dev_token(settings, subject="ada", groups=["eng", "ops"], roles=["admin"], name="Ada", ttl_seconds=60)

    principal = await Authenticator(settings).authenticate(bearer(token))

    assert principal == Principal(
        subject="ada", name="Ada", groups=frozenset({"eng", "ops"}), roles=frozenset({"admin"}), is_admin=True
    )
    header_part, payload_part, signature = token.split(".")
    payload = json.loads(base64.urlsafe_b64decode(payload_part + "=" * (-len(payload_part) % 4)))
    assert payload["iss"] == "https://ragu.local"
    assert payload["aud"] == "ragu"
    assert payload["realm_access"] == {"roles": ["admin"]}
    assert payload["nbf"] == payload["iat"]
    assert payload["exp"] == payload["iat"] + 60
    secret = dev_secret(settings).encode()
    expected = hmac.new(secret, f"{header_part}.{payload_part}".encode(), hashlib.sha256).digest()
    assert b64url(expected) == signature


async def test_minted_token_expires(tmp_path: Path, clock: Clock) -> None:
    settings = make_settings(tmp_path, auth_hs256_secret=SECRET, auth_leeway_seconds=0)
    token = mint_dev_token(settings, subject="ada", ttl_seconds=60)
    header_payload = token.split(".")[1]
    issued_at = json.loads(base64.urlsafe_b64decode(header_payload + "=" * (-len(header_payload) % 4)))["iat"]

    clock.now = issued_at + 60
    await rejected(Authenticator(settings, clock=clock), bearer(token), "token_expired")


def test_minting_is_refused_with_a_jwks(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, auth_jwks_url="https://idp.example/jwks")
    with pytest.raises(InvalidInput) as caught:
        mint_dev_token(settings, subject="ada")
    assert caught.value.code == "jwks_configured"
    with pytest.raises(InvalidInput) as caught:
        dev_secret(settings)
    assert caught.value.code == "jwks_configured"
    assert not (tmp_path / "data").exists()


@pytest.mark.parametrize(
    "arguments",
    [{"subject": ""}, {"subject": "ada", "ttl_seconds": 0}, {"subject": "ada", "groups": "eng"}],
    ids=["empty-subject", "zero-ttl", "string-groups"],
)
def test_mint_refuses_bad_requests(tmp_path: Path, arguments: dict[str, Any]) -> None:
    with pytest.raises(InvalidInput) as caught:
        mint_dev_token(make_settings(tmp_path, auth_hs256_secret=SECRET), **arguments)
    assert caught.value.code == "invalid_token_request"


async def test_a_remembered_token_still_expires_on_time(tmp_path: Path, clock: Clock) -> None:
    """Verified tokens are remembered (the signature is checked once), but their times are checked every time."""
    auth = secret_auth(tmp_path, clock, auth_leeway_seconds=0)
    token = bearer(sign(claims(exp=int(NOW) + 60), SECRET.encode(), alg="HS256"))
    assert (await auth.authenticate(token)).subject == "user-1"
    clock.now += 59
    assert (await auth.authenticate(token)).subject == "user-1"
    clock.now += 1
    await rejected(auth, token, "token_expired")
    forged = token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB")
    await rejected(auth, forged, "invalid_signature")
