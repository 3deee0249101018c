"""HTTPS through the pinned connection: the request goes to the address the guard checked, and the certificate is
still verified against the URL's name (sent as SNI), not that address.

A real TLS server on 127.0.0.1 with a certificate for ``site.test`` from a certificate authority made here; the
test's resolver gives ``site.test`` that address (no real DNS knows the name, so a page arriving at all shows the
connection went to the checked address).
"""

from __future__ import annotations

import datetime
import ipaddress
import ssl
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from chonkit.source.items import SourceItem
from chonkit.source.web import AddressGuard, IPAddress, WebLister, WebSpec
from common.errors import Unavailable
from tests.support.web_site import LocalSite, serve_site


@dataclass
class Authority:
    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey
    folder: Path

    @property
    def trust(self) -> ssl.SSLContext:
        """A client context that trusts this authority only."""
        path = self.folder / "ca.pem"
        path.write_bytes(self.cert.public_bytes(serialization.Encoding.PEM))
        return ssl.create_default_context(cafile=str(path))

    def server(self, name: str) -> ssl.SSLContext:
        """A server context with a certificate for ``name``, signed by this authority."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        cert = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
            .sign(self.key, hashes.SHA256())
        )
        cert_path, key_path = self.folder / f"{name}.pem", self.folder / f"{name}.key"
        cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        key_path.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert_path, key_path)
        return context


@pytest.fixture
def authority(tmp_path: Path) -> Authority:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Ragu test authority")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    return Authority(cert=cert, key=key, folder=tmp_path)


@pytest.fixture
def site_test(authority: Authority) -> Iterator[LocalSite]:
    """An HTTPS site on 127.0.0.1 whose certificate is for ``site.test``."""
    with serve_site("127.0.0.1", tls=authority.server("site.test")) as local:
        local.html("/", "<p>over TLS</p>", title="Secure")
        yield local


async def site_test_dns(host: str, port: int) -> Sequence[IPAddress]:
    return [ipaddress.IPv4Address("127.0.0.1")] if host in ("site.test", "alias.test") else []


async def listed(url: str, authority: Authority) -> list[object]:
    guard = AddressGuard(allow_private=True, resolve=site_test_dns)
    lister = WebLister(WebSpec(url=url), allow_private=True, guard=guard, tls=authority.trust)
    return [item async for item in lister.items()]


async def test_https_connects_to_the_checked_address_and_verifies_the_url_s_name(
    site_test: LocalSite, authority: Authority
) -> None:
    [item] = await listed(site_test.url("/", host="site.test"), authority)

    assert isinstance(item, SourceItem)
    assert item.name == "Secure"
    assert {request.host for request in site_test.requests} == {f"site.test:{site_test.port}"}


async def test_https_refuses_a_certificate_for_another_name(site_test: LocalSite, authority: Authority) -> None:
    """``alias.test`` resolves to the same server, whose certificate is not for it: nothing is fetched."""
    with pytest.raises(Unavailable) as raised:
        await listed(site_test.url("/", host="alias.test"), authority)

    assert raised.value.code == "web_fetch_failed"
    assert "certificate" in raised.value.detail.lower()
    assert site_test.requests == []
