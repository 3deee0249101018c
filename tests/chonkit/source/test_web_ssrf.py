"""Web sources never reach private, loopback or link-local addresses unless the operator allows them.

The refused addresses are refused before any connection, so 10.x and 169.254.169.254 need no network here;
where a real server listens (127.0.0.1, 127.0.0.2) the tests also prove it received no request. A "public" host
cannot run on this machine, so the redirect and rebinding tests simulate one: their guard's rule treats the
local server's own address (127.0.0.1) as public, and their names say so.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator, Sequence

import pytest

from chonkit.source.items import SkippedItem, SourceItem
from chonkit.source.web import AddressGuard, IPAddress, WebLister, WebSpec, check_start_address, is_public_address
from common.errors import InvalidInput
from tests.support.web_site import LocalSite, serve_site

SIMULATED_PUBLIC = ipaddress.IPv4Address("127.0.0.1")
UNSPECIFIED = str(ipaddress.IPv4Address(0))
"""0.0.0.0, which Linux connects to as loopback (spelt so, as it is an address refused here, not one bound)."""


def public_or_simulated(ip: IPAddress) -> bool:
    return ip == SIMULATED_PUBLIC or is_public_address(ip)


@pytest.fixture
def site() -> Iterator[LocalSite]:
    with serve_site("127.0.0.1") as local:
        yield local


@pytest.fixture
def inner_site() -> Iterator[LocalSite]:
    """What an attacker wants: a server on another loopback address (Linux routes all of 127/8 to lo)."""
    with serve_site("127.0.0.2") as local:
        local.html("/secret", "<p>instance credentials</p>")
        yield local


async def listed(url: str, *, allow_private: bool = False, guard: AddressGuard | None = None) -> list[object]:
    lister = WebLister(WebSpec(url=url, mode="crawl"), allow_private=allow_private, guard=guard)
    return [item async for item in lister.items()]


@pytest.mark.parametrize(
    ("url", "address"),
    [
        ("http://127.0.0.1:{port}/", "127.0.0.1"),
        ("http://10.0.0.7/", "10.0.0.7"),
        ("http://192.168.1.1/", "192.168.1.1"),
        ("http://169.254.169.254/latest/meta-data/", "169.254.169.254"),
        ("http://100.64.0.1/", "100.64.0.1"),
        ("http://0.0.0.0:{port}/", UNSPECIFIED),
        ("http://[::1]:{port}/", "::1"),
        ("http://[fe80::1]/", "fe80::1"),
        ("http://[fd00::1]/", "fd00::1"),
        ("http://[::ffff:127.0.0.1]:{port}/", "::ffff:7f00:1"),
        ("http://[::ffff:169.254.169.254]/", "::ffff:a9fe:a9fe"),
        ("http://2130706433:{port}/", "127.0.0.1"),  # 127.0.0.1 spelt as one number
        ("http://localhost:{port}/", "127.0.0.1"),  # a name, resolved by the system resolver
    ],
)
async def test_a_private_loopback_or_link_local_url_is_refused_with_a_clear_code(
    site: LocalSite, url: str, address: str
) -> None:
    site.html("/", "<p>internal</p>")
    with pytest.raises(InvalidInput) as raised:
        await listed(url.format(port=site.port))
    assert raised.value.code == "web_address_forbidden"
    assert raised.value.extra["address"] == address
    assert "RAGU_SOURCE_ALLOW_PRIVATE_URLS" in raised.value.detail or address == UNSPECIFIED
    assert site.requests == []


async def test_a_name_that_resolves_to_a_private_address_is_refused() -> None:
    async def intranet_dns(host: str, port: int) -> Sequence[IPAddress]:
        return [ipaddress.ip_address("93.184.215.14"), ipaddress.ip_address("10.1.2.3")]

    guard = AddressGuard(allow_private=False, resolve=intranet_dns)
    with pytest.raises(InvalidInput) as raised:
        await listed("https://wiki.intranet.test/", guard=guard)
    assert raised.value.code == "web_address_forbidden"
    assert "wiki.intranet.test resolves to 10.1.2.3, a private address" in raised.value.detail


@pytest.mark.parametrize(
    ("url", "refused"),
    [
        ("http://127.0.0.1/", True),
        ("http://169.254.169.254/latest/meta-data/", True),
        ("http://localhost:8080/", True),
        ("http://[::ffff:10.0.0.1]/", True),
        ("http://8.8.8.8/", False),
        ("http://no-such-host.invalid/", False),  # DNS may be down now: the sync will say
    ],
)
async def test_a_source_s_own_address_can_be_checked_when_it_is_registered(url: str, refused: bool) -> None:
    spec = WebSpec(url=url)
    if refused:
        with pytest.raises(InvalidInput) as raised:
            await check_start_address(spec, allow_private=False)
        assert raised.value.code == "web_address_forbidden"
    else:
        await check_start_address(spec, allow_private=False)
    await check_start_address(spec, allow_private=True)


async def test_a_name_that_does_not_resolve_is_refused_with_its_own_code() -> None:
    with pytest.raises(InvalidInput) as raised:
        await listed("http://no-such-host.invalid/")
    assert raised.value.code == "web_host_unresolved"


async def test_the_operator_may_allow_private_addresses(site: LocalSite) -> None:
    site.html("/", "<p>internal wiki</p>")
    [item] = await listed(site.url("/"), allow_private=True)
    assert isinstance(item, SourceItem)


async def test_multicast_is_refused_even_when_private_addresses_are_allowed() -> None:
    with pytest.raises(InvalidInput) as raised:
        await listed("http://224.0.0.251/", allow_private=True)
    assert raised.value.code == "web_address_forbidden"


async def test_a_simulated_public_host_redirecting_to_loopback_is_refused(
    site: LocalSite, inner_site: LocalSite
) -> None:
    site.redirect("/", inner_site.url("/secret"))
    guard = AddressGuard(allow_private=False, is_public=public_or_simulated)

    with pytest.raises(InvalidInput) as raised:
        await listed(site.url("/"), guard=guard)

    assert raised.value.code == "web_address_forbidden"
    assert raised.value.extra["address"] == "127.0.0.2"
    assert site.requested("/") == 1  # the first hop was allowed and fetched
    assert inner_site.requests == []


async def test_the_same_redirect_is_followed_when_private_addresses_are_allowed(
    site: LocalSite, inner_site: LocalSite
) -> None:
    """The control for the test above: the redirect does reach the inner server when nothing refuses it."""
    site.redirect("/", inner_site.url("/secret"))
    [item] = await listed(site.url("/"), allow_private=True)
    assert isinstance(item, SourceItem)
    assert b"instance credentials" in item.content


async def test_a_sitemap_page_redirecting_to_loopback_is_skipped_not_fetched(
    site: LocalSite, inner_site: LocalSite
) -> None:
    """Sitemap pages may redirect to other hosts (a crawl refuses those anyway); the target is checked."""
    urlset = f"<urlset><url><loc>{site.url('/go')}</loc></url><url><loc>{site.url('/ok')}</loc></url></urlset>"
    site.set("/sitemap.xml", urlset.encode(), "application/xml")
    site.html("/ok", "<p>fine</p>")
    site.redirect("/go", inner_site.url("/secret"))
    guard = AddressGuard(allow_private=False, is_public=public_or_simulated)

    lister = WebLister(WebSpec(url=site.url("/sitemap.xml"), mode="sitemap"), allow_private=False, guard=guard)
    items = [item async for item in lister.items()]

    assert [item.key for item in items if isinstance(item, SourceItem)] == [site.url("/ok")]
    assert [(item.key, item.code) for item in items if isinstance(item, SkippedItem)] == [
        (site.url("/go"), "web_address_forbidden")
    ]
    assert site.requested("/go") == 1
    assert inner_site.requests == []


async def test_a_simulated_rebinding_name_is_checked_and_pinned_on_every_request(
    site: LocalSite, inner_site: LocalSite
) -> None:
    """DNS rebinding: the name answers a (simulated) public address first, then loopback.

    ``rebind.test`` exists in no real DNS, so the first page arriving at all shows that the connection went to
    the address the guard checked, under the original name (``Host``); the next request re-resolves, and the
    loopback answer is refused there, before any connection.
    """
    answers = iter([[SIMULATED_PUBLIC], [SIMULATED_PUBLIC], [ipaddress.IPv4Address("127.0.0.2")]])

    async def rebinding_dns(host: str, port: int) -> Sequence[IPAddress]:
        assert host == "rebind.test"
        return next(answers)

    site.html("/", '<a href="/secret">next</a>')
    guard = AddressGuard(allow_private=False, resolve=rebinding_dns, is_public=public_or_simulated)

    items = await listed(f"http://rebind.test:{site.port}/", guard=guard)

    # robots.txt and / went to 127.0.0.1; /secret resolved to 127.0.0.2 and was refused
    assert [request.path for request in site.requests] == ["/robots.txt", "/"]
    assert {request.host for request in site.requests} == {f"rebind.test:{site.port}"}
    assert [item.key for item in items if isinstance(item, SourceItem)] == [f"http://rebind.test:{site.port}/"]
    assert [(item.key, item.code) for item in items if isinstance(item, SkippedItem)] == [
        (f"http://rebind.test:{site.port}/secret", "web_address_forbidden")
    ]
    assert inner_site.requests == []


@pytest.mark.parametrize(
    ("address", "public"),
    [
        ("8.8.8.8", True),
        ("2606:4700:4700::1111", True),
        ("::ffff:8.8.8.8", True),
        ("127.0.0.1", False),
        ("10.0.0.1", False),
        ("172.16.0.1", False),
        ("192.168.0.1", False),
        ("169.254.169.254", False),
        ("100.64.0.1", False),
        ("192.0.0.8", False),
        ("198.18.0.1", False),
        ("224.0.0.1", False),
        ("240.0.0.1", False),
        ("255.255.255.255", False),
        (UNSPECIFIED, False),
        ("::", False),
        ("::1", False),
        ("fe80::1", False),
        ("fc00::1", False),
        ("ff02::1", False),
        ("::ffff:10.0.0.1", False),
        ("2002:7f00:1::", False),  # 6to4 wrapping 127.0.0.1
        ("64:ff9b::a9fe:a9fe", False),  # NAT64 wrapping 169.254.169.254
        ("2001:db8::1", False),
    ],
)
def test_the_public_address_rule(address: str, public: bool) -> None:
    assert is_public_address(ipaddress.ip_address(address)) is public
