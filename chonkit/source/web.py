"""Web sources: one page, a sitemap's pages, or a crawl of one host, as :class:`SourceItem`\\ s.

A URL an admin types is fetched by the server, so it must not become a way into the server's own network
(SSRF): every host is resolved and each of its addresses checked (:func:`is_public_address`: no private,
loopback, link-local, shared, multicast, reserved or unspecified address, IPv4 or IPv6, nor an IPv4 address
wrapped in IPv6) unless the operator allows private addresses. The check is made where the connection is made
(:class:`_PinnedTransport`): the request goes to the very address that was checked, with the original name in
``Host`` and in TLS SNI (the certificate is verified against that name), so a name that resolves to a public
address for the check and to ``127.0.0.1`` a moment later (DNS rebinding) cannot slip through. Redirects are
followed by hand, each hop checked the same way. Environment proxies are ignored (a proxy would make the
connection, not us).

What a site sends is bounded before it is undone: the body is read raw and inflated by us, one layer of gzip or
deflate at most, never past the source's ``max_bytes`` (robots.txt: :data:`MAX_ROBOTS_BYTES`), and the bytes on
the wire are bounded as well; a stacked encoding is refused (``web_encoding_unsupported``). Work that grows with
what a site sends (a sitemap's URLs, robots.txt's rules, a page's HTML) runs in a thread, never on the event loop
that answers questions, and is bounded by what the listing can use (:data:`MAX_SITEMAP_LOCATIONS`).

A 404 or 410 page is left out (gone: a sync removes it); other pages that cannot be taken are skipped, which a
sync keeps as they were, since the failure may pass.

Pages keep their visible text only: HTML loses scripts, styles, comments, attributes and the page's chrome,
found by the cleaner uploads go through too (:mod:`~chonkit.document.parsing.html_clean`). The same page fetched
twice is then the same bytes, so its content hash changes only when what a reader sees changes.

Errors: a source that cannot be listed at all raises (``InvalidInput`` ``web_address_forbidden`` for its own URL
refused, ``Unavailable`` ``web_fetch_failed`` when its start page or sitemap cannot be fetched), so a sync never
mistakes an unreachable site for an empty one; a page that cannot be taken becomes a :class:`SkippedItem`.
"""

from __future__ import annotations

import asyncio
import codecs
import ipaddress
import itertools
import re
import socket
import ssl
import zlib
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal
from urllib.parse import unquote
from urllib.robotparser import RobotFileParser

import httpx
import msgspec
from lxml import etree  # type: ignore[import-untyped]  # lxml ships no type information
from selectolax.lexbor import LexborHTMLParser

from chonkit.document.parsing import html_clean
from chonkit.document.parsing.textcodec import decode_text
from chonkit.source.items import SkippedItem, SourceItem
from common.errors import InvalidInput, Unavailable

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver = Callable[[str, int], Awaitable[Sequence[IPAddress]]]
"""Resolves a host name (or an address literal) and port to the addresses a connection could go to."""

USER_AGENT = "RaguBot/0.1 (Ragu web source; fetches pages an administrator registered)"
ROBOTS_AGENT = "RaguBot"
"""The product token robots.txt groups are matched against."""
MAX_DEPTH = 5
MAX_PAGES = 1000
MAX_PAGE_BYTES = 50 * 1024 * 1024
MAX_REDIRECTS = 5
"""RFC 9309 asks crawlers to follow at least five redirects for robots.txt; pages get the same bound."""
MAX_ROBOTS_BYTES = 512 * 1024
"""RFC 9309: a crawler must parse at least 500 KiB of robots.txt."""
MAX_SITEMAPS = 50
"""Sitemap files fetched for one source (an index and the sitemaps it lists)."""
MAX_CRAWL_DELAY_SECONDS = 5.0
MAX_SITEMAP_LOCATIONS = 50_000
"""``<loc>`` entries read over one listing, however many sitemap files hold them: the sitemap protocol's own limit
for one file. Each is a URL to parse, so a sitemap of millions cannot buy millions of parses."""
PAGE_SECONDS = 60.0
"""Longest a page may take in all, so a server that trickles bytes cannot hold a sync for ever."""
_TIMEOUT = httpx.Timeout(15.0, connect=5.0)

_HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
_DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
_PASS_THROUGH = {
    "application/pdf": "application/pdf",
    "text/plain": "text/plain",
    "text/markdown": "text/markdown",
    "text/x-markdown": "text/markdown",
    "text/csv": "text/csv",
    "application/json": "application/json",
    _DOCX: _DOCX,
    "image/png": "image/png",  # a scan linked from a page: chonkit reads it by OCR
    "image/jpeg": "image/jpeg",
    "image/tiff": "image/tiff",
}
_BY_EXTENSION = {
    ".pdf": "application/pdf",
    ".docx": _DOCX,
    ".md": "text/markdown",
    ".markdown": "text/markdown",
    ".txt": "text/plain",
    ".csv": "text/csv",
    ".json": "application/json",
    ".html": "text/html",
    ".htm": "text/html",
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".tif": "image/tiff",
    ".tiff": "image/tiff",
}
"""Servers often say ``application/octet-stream`` (or ``text/plain`` for Markdown); the URL's extension decides."""
_GZIP_MAGIC = b"\x1f\x8b"
_ACCEPT_ENCODING = "gzip, deflate"
"""The codings :class:`_Inflater` undoes; said explicitly, so installing brotli never makes httpx ask for more."""
_INFLATE_STEP = 1024 * 1024
"""Output inflated between two turns of the event loop (about a millisecond of zlib)."""
_CHARSET = re.compile(r"charset\s*=\s*([^;\s]+)", re.IGNORECASE)
_GONE = frozenset({404, 410})
"""A linked or listed page answering these is not there: it is left out, so a sync removes what it had."""
_NOT_TEXT = "script, style, noscript, template"
_NAME_BYTES = 255
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_IETF_PROTOCOL = ipaddress.IPv4Network("192.0.0.0/24")
"""Not global (RFC 6890); Python before 3.12 counts only parts of it as private."""


class WebSpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """What a web source fetches. Invalid values raise :class:`InvalidInput` with a ``web_*`` code when built."""

    url: str
    """The page (``page``), the sitemap or sitemap index (``sitemap``), or the start page (``crawl``)."""
    mode: Literal["page", "sitemap", "crawl"] = "page"
    depth: int = 1
    """Crawl only: links followed from the start page (0: the start page alone), at most :data:`MAX_DEPTH`."""
    max_pages: int = 100
    """Most pages one sync takes, at most :data:`MAX_PAGES`; the rest are left out of that sync."""
    max_bytes: int = 5 * 1024 * 1024
    """Largest page (or sitemap file) read; a bigger one is skipped, never truncated."""

    def __post_init__(self) -> None:
        parse_start_url(self.url)
        if not 0 <= self.depth <= MAX_DEPTH:
            raise InvalidInput(f"depth must be 0 to {MAX_DEPTH}, not {self.depth}.", code="web_depth_out_of_range")
        if not 1 <= self.max_pages <= MAX_PAGES:
            raise InvalidInput(
                f"max_pages must be 1 to {MAX_PAGES}, not {self.max_pages}.", code="web_max_pages_out_of_range"
            )
        if not 1024 <= self.max_bytes <= MAX_PAGE_BYTES:
            raise InvalidInput(
                f"max_bytes must be 1024 to {MAX_PAGE_BYTES}, not {self.max_bytes}.", code="web_max_bytes_out_of_range"
            )


class AddressRefused(InvalidInput):
    """A host resolves to an address web sources may not reach (or does not resolve at all)."""

    default_code = "web_address_forbidden"


def parse_start_url(url: str | httpx.URL) -> httpx.URL:
    """A source's URL as :func:`normalise_url` gives it; anything but plain ``http(s)://host/...`` is refused."""
    try:
        parsed = httpx.URL(url.strip()) if isinstance(url, str) else url
    except httpx.InvalidURL as exc:
        raise InvalidInput(f"{url!r} is not a URL: {exc}.", code="web_url_invalid") from exc
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise InvalidInput(f"{url!r} must be an http:// or https:// URL with a host.", code="web_url_invalid")
    if parsed.userinfo:
        raise InvalidInput("A web source URL may not carry a user name or password.", code="web_url_invalid")
    return normalise_url(parsed)


def normalise_url(url: httpx.URL) -> httpx.URL:
    """One spelling per page: lower-case scheme and host, no default port, no fragment, ``/`` for an empty path."""
    default_port = {"http": 80, "https": 443}.get(url.scheme)
    return httpx.URL(
        scheme=url.scheme,
        host=url.host,
        port=None if url.port == default_port else url.port,
        raw_path=(url.raw_path.split(b"?")[0] or b"/") + (b"?" + url.query if url.query else b""),
    )


def is_public_address(ip: IPAddress) -> bool:
    """Whether ``ip`` is a public unicast address; an IPv4 address inside IPv6 is judged as itself."""
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = ip.ipv4_mapped or ip.sixtofour
        if embedded is None and ip in _NAT64:
            embedded = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
        if embedded is not None:
            return is_public_address(embedded)
    return ip.is_global and not (
        ip in _IETF_PROTOCOL
        or ip.is_private
        or ip.is_loopback
        or ip.is_link_local
        or ip.is_multicast
        or ip.is_reserved
        or ip.is_unspecified
    )


async def resolve_host(host: str, port: int) -> list[IPAddress]:
    """The system resolver's addresses for ``host``, in its order of preference, without duplicates."""
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise AddressRefused(f"{host} does not resolve ({exc.strerror}).", code="web_host_unresolved") from exc
    addresses: list[IPAddress] = []
    for *_, sockaddr in infos:
        ip = ipaddress.ip_address(str(sockaddr[0]).split("%")[0])
        if ip not in addresses:
            addresses.append(ip)
    return addresses


class AddressGuard:
    """Decides which addresses a web source may connect to.

    Args:
        allow_private: let private, loopback and link-local addresses through (``RAGU_SOURCE_ALLOW_PRIVATE_URLS``);
            multicast and unspecified addresses are refused even then, no web server lives there.
        resolve: the resolver (tests give names of their own).
        is_public: the public-address rule (tests treat their local server's address as public to test redirects).
    """

    def __init__(
        self,
        *,
        allow_private: bool,
        resolve: Resolver = resolve_host,
        is_public: Callable[[IPAddress], bool] = is_public_address,
    ) -> None:
        self._allow_private = allow_private
        self._resolve = resolve
        self._is_public = is_public

    async def addresses(self, host: str, port: int) -> Sequence[IPAddress]:
        """The addresses to connect to for ``host``; all of them must be allowed, or none is used.

        Raises:
            AddressRefused: ``web_address_forbidden`` naming the refused address, or ``web_host_unresolved``.
        """
        addresses = await self._resolve(host, port)
        if not addresses:
            raise AddressRefused(f"{host} has no address.", code="web_host_unresolved")
        for ip in addresses:
            never = ip.is_multicast or ip.is_unspecified
            if never or not (self._allow_private or self._is_public(ip)):
                raise AddressRefused(
                    f"{host} resolves to {ip}, a {_address_kind(ip)} address; web sources fetch public addresses"
                    + ("." if never else " only (RAGU_SOURCE_ALLOW_PRIVATE_URLS allows private ones)."),
                    extra={"host": host, "address": str(ip)},
                )
        return addresses


def _address_kind(ip: IPAddress) -> str:
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return f"IPv4-mapped {_address_kind(ip.ipv4_mapped)}"
    kinds = ("loopback", "link-local", "multicast", "unspecified", "private", "reserved")
    return next((kind for kind in kinds if getattr(ip, f"is_{kind.replace('-', '_')}")), "non-public")


async def check_start_address(spec: WebSpec, *, allow_private: bool, guard: AddressGuard | None = None) -> None:
    """Refuse a source whose own URL points where web sources may not go, when it is registered (every fetch checks
    again). A name that does not resolve now is let through: DNS may be down for a moment, and the sync will say.

    Raises:
        AddressRefused: ``web_address_forbidden``.
    """
    url = parse_start_url(spec.url)
    try:
        await (guard or AddressGuard(allow_private=allow_private)).addresses(url.host, url.port or 0)
    except AddressRefused as exc:
        if exc.code == "web_address_forbidden":
            raise


class _PinnedTransport(httpx.AsyncBaseTransport):
    """Sends each request to an address the guard allowed at that moment, keeping the name in Host and SNI.

    One inner transport per host name, so a TLS connection made (and verified) for one name is never reused for
    another name that happens to share its address.
    """

    def __init__(self, guard: AddressGuard, tls: ssl.SSLContext) -> None:
        self._guard = guard
        self._tls = tls
        self._transports: dict[str, httpx.AsyncHTTPTransport] = {}

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        host = request.url.host
        port = request.url.port or (443 if request.url.scheme == "https" else 80)
        addresses = await self._guard.addresses(host, port)
        transport = self._transports.get(host)
        if transport is None:
            transport = self._transports[host] = httpx.AsyncHTTPTransport(verify=self._tls, trust_env=False)
        failure: httpx.ConnectError | None = None
        for ip in addresses:
            pinned = httpx.Request(
                request.method,
                request.url.copy_with(host=str(ip)),
                headers=request.headers,  # holds the original Host
                stream=request.stream,
                extensions={**request.extensions, "sni_hostname": host},
            )
            try:
                return await transport.handle_async_request(pinned)
            except httpx.ConnectError as exc:
                failure = exc
        assert failure is not None  # addresses() never returns an empty list
        raise failure

    async def aclose(self) -> None:
        for transport in self._transports.values():
            await transport.aclose()


@dataclass(frozen=True, slots=True)
class _Page:
    url: httpx.URL
    """Where the content came from, after redirects (normalised)."""
    media_type: str
    content: bytes
    charset: str | None = None
    """The ``Content-Type`` header's charset, which decides over the page's own ``<meta charset>`` (as in browsers)."""


@dataclass(slots=True)
class _Robots:
    rules: RobotFileParser | None
    """``None``: robots.txt says nothing (absent), so everything is allowed."""
    disallow_all: str | None = None
    """Why nothing may be fetched from the host (its robots.txt fails with a server error), if so."""
    delay: float = 0.0
    last_fetch: float = field(default=0.0)


class _Skip(Exception):
    """A page that cannot be taken; becomes a :class:`SkippedItem`."""

    def __init__(self, code: str, reason: str, *, status: int | None = None) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason
        self.status = status
        """The HTTP status that made the page unusable, if it was one."""


class WebLister:
    """Lists a web source's pages as they are now, politely (robots.txt, one request at a time) and within limits.

    Args:
        spec: what to fetch.
        allow_private: ``RAGU_SOURCE_ALLOW_PRIVATE_URLS``.
        guard: the address rule; by default the system resolver and :func:`is_public_address`.
        tls: whom HTTPS servers must be certified by; by default certifi's authorities, or ``SSL_CERT_FILE`` /
            ``SSL_CERT_DIR`` when set (an intranet's own authority).
    """

    def __init__(
        self,
        spec: WebSpec,
        *,
        allow_private: bool,
        guard: AddressGuard | None = None,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.spec = spec
        self._start = parse_start_url(spec.url)
        self._guard = guard or AddressGuard(allow_private=allow_private)
        self._tls = tls

    async def items(self) -> AsyncIterator[SourceItem | SkippedItem]:
        """The source's pages; see the module docstring for what raises and what is skipped."""
        async with httpx.AsyncClient(
            transport=_PinnedTransport(self._guard, self._tls or httpx.create_ssl_context()),
            headers={"User-Agent": USER_AGENT, "Accept-Encoding": _ACCEPT_ENCODING},
            timeout=_TIMEOUT,
            follow_redirects=False,
            trust_env=False,
        ) as client:
            fetcher = _Fetcher(client, self.spec)
            if self.spec.mode == "sitemap":
                listing = self._sitemap_pages(fetcher)
            elif self.spec.mode == "crawl":
                listing = self._crawl(fetcher)
            else:
                listing = self._single_page(fetcher)
            async for item in listing:
                yield item

    async def _single_page(self, fetcher: _Fetcher) -> AsyncIterator[SourceItem | SkippedItem]:
        try:
            page = await fetcher.page(self._start, start=True)
            yield await asyncio.to_thread(_to_item, page)
        except _Skip as skip:
            yield SkippedItem(key=str(self._start), code=skip.code, reason=skip.reason)

    async def _sitemap_pages(self, fetcher: _Fetcher) -> AsyncIterator[SourceItem | SkippedItem]:
        urls, skipped = await fetcher.sitemap_urls(self._start)
        for item in skipped:
            yield item
        budget = _Budget(self.spec.max_pages)
        seen: set[str] = set()
        for url in urls:
            if str(url) in seen:
                continue
            seen.add(str(url))
            if budget.spent:
                yield budget.stop(url)
                return
            try:
                page = await fetcher.page(url)
            except _Skip as skip:
                if (refused := budget.failed(url, skip)) is not None:
                    yield refused
                continue
            if str(page.url) in seen and page.url != url:
                continue  # redirected to a page listed (and taken) already
            seen.add(str(page.url))
            budget.took()
            yield await asyncio.to_thread(_to_item, page)

    async def _crawl(self, fetcher: _Fetcher) -> AsyncIterator[SourceItem | SkippedItem]:
        """Breadth first from the start page, within its host (as it is after redirects) and depth."""
        queue: deque[tuple[httpx.URL, int]] = deque([(self._start, 0)])
        seen = {str(self._start)}
        host: str | None = None
        budget = _Budget(self.spec.max_pages)
        while queue:
            url, depth = queue.popleft()
            if budget.spent:
                yield budget.stop(url)
                return
            try:
                page = await fetcher.page(url, start=host is None, host=host)
            except _Skip as skip:
                if (refused := budget.failed(url, skip)) is not None:
                    yield refused
                continue
            host = host or page.url.host
            if str(page.url) != str(url):
                if str(page.url) in seen:
                    continue
                seen.add(str(page.url))
            budget.took()
            item, links = await asyncio.to_thread(_to_item_and_links, page, depth < self.spec.depth)
            yield item
            for link in links:
                if link.host == host and str(link) not in seen:
                    seen.add(str(link))
                    queue.append((link, depth + 1))


class _Budget:
    """At most ``max_pages`` pages taken, and as many failed fetches again, so broken links cannot run a sync long."""

    def __init__(self, max_pages: int) -> None:
        self.max_pages = max_pages
        self.taken = 0
        self.failures = 0

    @property
    def spent(self) -> bool:
        return self.taken >= self.max_pages or self.failures >= self.max_pages

    def took(self) -> None:
        self.taken += 1

    def failed(self, url: httpx.URL, skip: _Skip) -> SkippedItem | None:
        """The item to report for a page that could not be taken; none for one that is gone (404, 410)."""
        self.failures += 1
        if skip.status in _GONE:
            return None
        return SkippedItem(key=str(url), code=skip.code, reason=skip.reason)

    def stop(self, url: httpx.URL) -> SkippedItem:
        if self.taken >= self.max_pages:
            reason = f"The source's limit of {self.max_pages} pages was reached"
        else:
            reason = f"{self.failures} pages could not be fetched, as many as the source's page limit"
        return SkippedItem(
            key=str(url), code="web_page_limit", reason=f"{reason}; this page and those after it were not fetched."
        )


class _Fetcher:
    """GETs with hand-followed redirects, robots.txt, the size bound and the per-page time bound."""

    def __init__(self, client: httpx.AsyncClient, spec: WebSpec) -> None:
        self._client = client
        self._spec = spec
        self._robots: dict[tuple[str, str, int | None], _Robots] = {}
        """robots.txt per origin (scheme, host, port), read once per listing."""

    async def page(self, url: httpx.URL, *, start: bool = False, host: str | None = None) -> _Page:
        """Fetch a page; ``host`` (crawl) refuses redirects off it. A failing start page raises instead of skip."""
        try:
            async with asyncio.timeout(PAGE_SECONDS):
                return await self._get(url, max_bytes=self._spec.max_bytes, host=host, robots=True)
        except TimeoutError:
            failure = _Skip("web_timeout", f"{url} took longer than {PAGE_SECONDS:.0f} s.")
        except AddressRefused as exc:
            if start:
                raise
            failure = _Skip(exc.code, exc.detail)
        except httpx.HTTPError as exc:
            failure = _Skip("web_fetch_failed", f"{url} could not be fetched: {_describe(exc)}.")
        except _Skip as skip:
            failure = skip
        if start and failure.code in ("web_fetch_failed", "web_timeout", "web_http_error"):
            raise Unavailable(f"The source's start page failed: {failure.reason}", code="web_fetch_failed")
        raise failure

    async def sitemap_urls(self, url: httpx.URL) -> tuple[list[httpx.URL], list[SkippedItem]]:
        """The page URLs of a sitemap or sitemap index (nested, gzipped or not), off-host ones skipped.

        Everything done per ``<loc>`` (parsing the XML, resolving and checking each URL) runs in a thread: 90,000
        URLs are 4.5 s of ``httpx.URL`` work, which on the event loop froze every question the server was
        answering. It is bounded too (:class:`_SitemapBounds`): no more URLs than the listing can use.
        """
        pending = deque([url])
        fetched: set[str] = set()
        bounds = _SitemapBounds(self._spec.max_pages)
        while pending and len(fetched) < MAX_SITEMAPS and not bounds.full:
            sitemap = pending.popleft()
            if str(sitemap) in fetched:
                continue
            fetched.add(str(sitemap))
            try:
                page = await self.page(sitemap, start=sitemap == url)
                children = await asyncio.to_thread(
                    _read_sitemap, page.content, page.url, sitemap.host, self._spec.max_bytes, bounds
                )
            except _Skip as skip:
                if sitemap == url:
                    raise Unavailable(f"The sitemap cannot be read: {skip.reason}", code=skip.code) from None
                bounds.skipped.append(SkippedItem(key=str(sitemap), code=skip.code, reason=skip.reason))
                continue
            pending.extend(children[: max(MAX_SITEMAPS - len(fetched) - len(pending), 0)])
        return bounds.pages, bounds.skipped

    async def _get(
        self, url: httpx.URL, *, max_bytes: int, host: str | None, robots: bool, truncate: bool = False
    ) -> _Page:
        for _ in range(MAX_REDIRECTS + 1):
            if host is not None and url.host != host:
                raise _Skip("web_off_host", f"{url} is not on {host}, the host this crawl stays on.")
            if robots:
                await self._obey_robots(url)
            async with self._client.stream("GET", url) as response:
                if response.is_redirect:
                    location = response.headers.get("location", "")
                    try:
                        url = parse_start_url(urljoin(url, location))
                    except InvalidInput as exc:
                        raise _Skip("web_redirect_invalid", f"{url} redirects to {location!r}: {exc.detail}") from None
                    continue
                if response.status_code >= 400:
                    raise _Skip(
                        "web_http_error", f"{url} answered HTTP {response.status_code}.", status=response.status_code
                    )
                media_type, charset = _media_type(response, url)
                content = await _read_bounded(response, url, max_bytes, truncate=truncate)
                return _Page(url=url, media_type=media_type, content=content, charset=charset)
        raise _Skip("web_too_many_redirects", f"{url} is more than {MAX_REDIRECTS} redirects away.")

    async def _obey_robots(self, url: httpx.URL) -> None:
        origin = (url.scheme, url.host, url.port)
        robots = self._robots.get(origin)
        if robots is None:
            robots = self._robots[origin] = await self._fetch_robots(url)
        if robots.disallow_all:
            raise _Skip("web_robots_disallowed", robots.disallow_all)
        if robots.rules is not None and not robots.rules.can_fetch(ROBOTS_AGENT, str(url)):
            raise _Skip("web_robots_disallowed", f"{url.host}'s robots.txt does not allow {url}.")
        if robots.delay:
            loop = asyncio.get_running_loop()
            if (wait := robots.last_fetch + robots.delay - loop.time()) > 0:
                await asyncio.sleep(wait)
            robots.last_fetch = loop.time()

    async def _fetch_robots(self, url: httpx.URL) -> _Robots:
        """RFC 9309: a 4xx, or too many redirects, allows everything; a 5xx disallows everything; only the first
        :data:`MAX_ROBOTS_BYTES` count. No answer at all (httpx's error) is the page's failure, and is not kept."""
        robots_url = url.copy_with(raw_path=b"/robots.txt")
        try:
            page = await self._get(robots_url, max_bytes=MAX_ROBOTS_BYTES, host=None, robots=False, truncate=True)
        except _Skip as skip:
            if skip.status is not None and skip.status >= 500:
                why = f"{url.host}'s robots.txt answered HTTP {skip.status}, which allows nothing (RFC 9309)."
                return _Robots(rules=None, disallow_all=why)
            return _Robots(rules=None)
        rules = await asyncio.to_thread(_parse_robots, page.content)  # 512 KiB of rules: 0.2 s of pure Python
        delay = rules.crawl_delay(ROBOTS_AGENT)
        return _Robots(rules=rules, delay=min(float(delay or 0), MAX_CRAWL_DELAY_SECONDS))


def _parse_robots(content: bytes) -> RobotFileParser:
    rules = RobotFileParser()
    rules.parse(decode_text(content).splitlines())
    return rules


async def _read_bounded(response: httpx.Response, url: httpx.URL, max_bytes: int, *, truncate: bool) -> bytes:
    """The body, its content-coding undone by us, refused (or with ``truncate``, cut) as soon as it passes
    ``max_bytes``.

    httpx would decode every layer of ``Content-Encoding`` whole before we saw a byte (``gzip, gzip``: 1,827 bytes
    on the wire, 1 GiB in memory), so the raw stream is read and :class:`_Inflater` undoes one coding with its
    output bounded: at most ``max_bytes + 1`` bytes ever exist, whatever the ratio. The bytes on the wire are
    bounded too (:func:`_wire_limit`): a stream that inflates to nothing must not keep us reading.
    """
    inflater = _Inflater.for_response(response, url)
    wire_limit = max_bytes if inflater is None else _wire_limit(max_bytes)
    declared = response.headers.get("content-length", "")
    if not truncate and declared.isdigit() and int(declared) > wire_limit:
        raise _Skip("web_page_too_large", f"{url} is {int(declared)} bytes; the source's limit is {max_bytes}.")
    body = bytearray()
    wire = 0
    async for chunk in response.aiter_raw():
        wire += len(chunk)
        if inflater is None:
            body += chunk
        else:
            await inflater.feed(chunk, body, max_bytes + 1)
        if len(body) > max_bytes or wire > wire_limit:
            if truncate:
                return bytes(body[:max_bytes])
            raise _Skip("web_page_too_large", f"{url} is larger than the source's limit of {max_bytes} bytes.")
        if inflater is not None and inflater.done:
            break  # what follows a complete stream is ignored, as httpx and browsers do
    return bytes(body)


def _wire_limit(max_bytes: int) -> int:
    """Compressed bytes read for a page of at most ``max_bytes``: deflate's worst case (stored blocks) adds 5 bytes
    per 16 KiB, so a 64th more, and 1 KiB for the gzip header, covers every honest body."""
    return max_bytes + max_bytes // 64 + 1024


class _Inflater:
    """Undoes one ``gzip`` or ``deflate`` content-coding, never making more output than it is allowed.

    ``zlib``'s ``max_length`` keeps the input that would inflate past the bound in ``unconsumed_tail``, so a bomb
    costs us the bound, not its size. Output is made a megabyte at a time with the event loop given a turn in
    between, so a 50 MB page does not hold it either. One coding only: a stacked one (``gzip, gzip``) or one we do
    not ask for (``br``, ``zstd``) is refused; no honest server sends either (we say ``Accept-Encoding: gzip,
    deflate``).
    """

    def __init__(self, coding: str) -> None:
        self._coding = coding
        self._zlib = zlib.decompressobj(16 + zlib.MAX_WBITS if coding == "gzip" else zlib.MAX_WBITS)
        self._started = False

    @classmethod
    def for_response(cls, response: httpx.Response, url: httpx.URL) -> _Inflater | None:
        """The inflater the response's ``Content-Encoding`` needs; ``None`` for none (or ``identity``).

        Raises:
            _Skip: ``web_encoding_unsupported`` for more than one coding, or one we did not ask for.
        """
        codings = [
            coding.strip().lower()
            for header in response.headers.get_list("content-encoding")
            for coding in header.split(",")
        ]
        codings = [coding for coding in codings if coding not in ("", "identity")]
        if not codings:
            return None
        if len(codings) > 1 or codings[0] not in ("gzip", "x-gzip", "deflate"):
            raise _Skip(
                "web_encoding_unsupported",
                f"{url} is sent as Content-Encoding {', '.join(codings)}; web sources take one layer of gzip or "
                "deflate (a stacked encoding is how a small response inflates to gigabytes).",
            )
        return cls("deflate" if codings[0] == "deflate" else "gzip")

    @property
    def done(self) -> bool:
        """The compressed stream has ended."""
        return bool(self._zlib.eof)

    async def feed(self, chunk: bytes, body: bytearray, limit: int) -> None:
        """Inflate ``chunk`` onto ``body`` until it ends or ``body`` holds ``limit`` bytes (the rest is dropped)."""
        data = chunk
        while len(body) < limit and not self._zlib.eof:
            room = min(_INFLATE_STEP, limit - len(body))  # never 0, which zlib reads as "no bound"
            out = self._inflate(data, room)
            body += out
            data = self._zlib.unconsumed_tail
            if not data and len(out) < room:
                return  # all of the chunk is in, and all it made is out (a full step may leave output pending)
            await asyncio.sleep(0)

    def _inflate(self, data: bytes, max_length: int) -> bytes:
        try:
            out = self._zlib.decompress(data, max_length)
        except zlib.error as exc:
            if self._coding != "deflate" or self._started:
                raise _Skip("web_fetch_failed", f"The response does not inflate as {self._coding}: {exc}.") from None
            # "deflate" should be zlib-wrapped (RFC 9110); some servers send the raw stream, as httpx allows
            self._zlib = zlib.decompressobj(-zlib.MAX_WBITS)
            self._started = True
            return self._inflate(data, max_length)
        self._started = True
        return out


def _media_type(response: httpx.Response, url: httpx.URL) -> tuple[str, str | None]:
    """The page's media type (the URL's extension decides when the server's is vague) and declared charset."""
    header = str(response.headers.get("content-type", ""))
    declared = header.split(";", maxsplit=1)[0].strip().lower()
    charset = _CHARSET.search(header)
    by_extension = next((t for ext, t in _BY_EXTENSION.items() if url.path.lower().endswith(ext)), None)
    if declared in ("", "application/octet-stream", "binary/octet-stream") or (
        declared == "text/plain" and by_extension == "text/markdown"
    ):
        declared = by_extension or declared
    return declared, charset[1].strip("\"'") if charset else None


def _decode_html(page: _Page) -> str:
    """The header's charset decides, as in a browser; without one, chonkit's reading (which honours a ``<meta
    charset>``) does, as for an uploaded HTML file."""
    if page.charset:
        try:
            return page.content.decode(codecs.lookup(page.charset).name, errors="replace")
        except LookupError:
            pass
    return decode_text(page.content)


def _describe(exc: httpx.HTTPError) -> str:
    return str(exc) or type(exc).__name__


def urljoin(base: httpx.URL, reference: str) -> httpx.URL:
    """``reference`` resolved against ``base``; :class:`InvalidInput` for one that is not a URL at all."""
    try:
        return base.join(reference.strip())
    except (httpx.InvalidURL, ValueError) as exc:
        raise InvalidInput(f"{reference!r} is not a URL.", code="web_url_invalid") from exc


class _SitemapBounds:
    """What a sitemap listing has found so far, and how much more it may look at.

    Pages: at most twice the source's page limit, and one more (the listing takes ``max_pages`` and may fail as
    many before its budget is spent; the one after says where it stopped). Off-host entries reported: at most the
    page limit. ``<loc>``\\ s read: at most :data:`MAX_SITEMAP_LOCATIONS` in all. Touched by one thread at a time.
    """

    def __init__(self, max_pages: int) -> None:
        self.wanted = 2 * max_pages + 1
        self.off_host_reports = max_pages
        self.locations_left = MAX_SITEMAP_LOCATIONS
        self.pages: list[httpx.URL] = []
        self.seen: set[str] = set()
        self.skipped: list[SkippedItem] = []

    @property
    def full(self) -> bool:
        """Nothing more to look for: enough pages, or every ``<loc>`` the listing may read was read."""
        return self.have_pages or self.locations_left <= 0

    @property
    def have_pages(self) -> bool:
        return len(self.pages) >= self.wanted


def _read_sitemap(data: bytes, base: httpx.URL, host: str, max_bytes: int, bounds: _SitemapBounds) -> list[httpx.URL]:
    """Add a sitemap's pages on ``host`` to ``bounds`` (off-host ones as skipped); returns the sitemaps an index
    lists. Runs in a thread: it is the part of a listing whose work grows with the sitemap."""
    is_index, locations = _sitemap_locations(data, max_bytes, bounds.locations_left)
    bounds.locations_left -= len(locations)
    children: list[httpx.URL] = []
    for location in locations:
        if not is_index and bounds.have_pages:
            break
        try:
            target = parse_start_url(urljoin(base, location))
        except InvalidInput:
            continue
        if target.host != host:
            if bounds.off_host_reports > 0:
                bounds.off_host_reports -= 1
                reason = f"The sitemap at {base} lists {target}, on another host; sitemaps list their own host."
                bounds.skipped.append(SkippedItem(key=str(target), code="web_off_host", reason=reason))
        elif is_index:
            children.append(target)
        elif str(target) not in bounds.seen:
            bounds.seen.add(str(target))
            bounds.pages.append(target)
    return children


def _sitemap_locations(data: bytes, max_bytes: int, limit: int = MAX_SITEMAP_LOCATIONS) -> tuple[bool, list[str]]:
    """Whether the file is a sitemap index, and its first ``limit`` ``<loc>``\\ s. Entities and DTDs are never
    loaded. Only elements are looked at: a comment, a processing instruction or an entity reference (which CMSs
    write into sitemaps) is no ``<loc>``, and has no element name to ask for."""
    if data.startswith(_GZIP_MAGIC):
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            data = inflater.decompress(data, max_bytes + 1)
        except zlib.error as exc:
            raise _Skip("web_sitemap_invalid", f"The sitemap does not inflate as gzip: {exc}.") from None
        if len(data) > max_bytes:
            raise _Skip("web_page_too_large", f"The sitemap inflates past the source's limit of {max_bytes} bytes.")
    parser = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False, huge_tree=False)
    try:
        root = etree.fromstring(data, parser)
    except etree.XMLSyntaxError as exc:
        raise _Skip("web_sitemap_invalid", f"The sitemap is not XML: {exc}.") from None
    local = etree.QName(root).localname
    if local not in ("urlset", "sitemapindex"):
        raise _Skip("web_sitemap_invalid", f"The sitemap's root is <{local}>, not <urlset> or <sitemapindex>.")
    locations = ((element.text or "").strip() for element in root.iter("{*}loc"))
    return local == "sitemapindex", list(itertools.islice((loc for loc in locations if loc), max(limit, 0)))


def _to_item(page: _Page) -> SourceItem | SkippedItem:
    return _to_item_and_links(page, follow=False)[0]


def _to_item_and_links(page: _Page, follow: bool) -> tuple[SourceItem | SkippedItem, list[httpx.URL]]:
    """The page as an item (HTML reduced to its visible part), and the links to follow from it."""
    key = str(page.url)
    if page.media_type not in _HTML_TYPES:
        if page.media_type in _PASS_THROUGH:
            media_type = _PASS_THROUGH[page.media_type]
            name = _display_name(unquote(page.url.path.rsplit("/", 1)[-1]), page.url)
            return SourceItem(key=key, name=name, content=page.content, media_type=media_type), []
        reason = f"{page.url} is {page.media_type or 'of no declared type'}, which chonkit does not parse."
        return SkippedItem(key=key, code="web_unsupported_type", reason=reason), []
    tree = LexborHTMLParser(_decode_html(page))
    directives = _robots_meta(tree)
    links = _links(tree, page.url) if follow and "nofollow" not in directives else []
    if "noindex" in directives:
        return SkippedItem(key=key, code="web_noindex", reason=f"{page.url} asks not to be indexed."), links
    title = _title(tree)
    content = visible_html(tree, title)
    return SourceItem(key=key, name=_display_name(title, page.url), content=content, media_type="text/html"), links


def visible_html(tree: LexborHTMLParser, title: str) -> bytes:
    """The page reduced to what a reader sees of its content: what the HTML parser's own cleaner
    (:mod:`~chonkit.document.parsing.html_clean`) keeps, without scripts, comments or attributes."""
    root, left_out = html_clean.readable(tree)
    if root is None:
        return b""
    left_out += tree.css(_NOT_TEXT)
    left_out += [node for node in root.traverse(include_text=True) if node.tag == "-comment"]
    html_clean.remove(left_out)
    for node in root.traverse():
        for name in list(node.attrs.keys()):
            del node.attrs[name]
    content = root.html if root.tag == "body" else f"<body>{root.html}</body>"
    head = f"<title>{_escape(title)}</title>" if title else ""
    return f'<!DOCTYPE html>\n<html><head><meta charset="utf-8">{head}</head>{content}</html>\n'.encode()


def _title(tree: LexborHTMLParser) -> str:
    for selector in ("head title", "title", "h1"):
        node = tree.css_first(selector)
        if node is not None and (text := " ".join(node.text(deep=True).split())):
            return text
    return ""


def _robots_meta(tree: LexborHTMLParser) -> set[str]:
    directives: set[str] = set()
    for node in tree.css("meta[name]"):
        if (node.attributes.get("name") or "").lower() in ("robots", ROBOTS_AGENT.lower()):
            directives.update(part.strip().lower() for part in (node.attributes.get("content") or "").split(","))
    if "none" in directives:
        directives.update({"noindex", "nofollow"})
    return directives


def _links(tree: LexborHTMLParser, page_url: httpx.URL) -> list[httpx.URL]:
    """The page's ``<a href>`` links as normalised http(s) URLs, in document order, resolved against ``<base>``."""
    base = page_url
    base_node = tree.css_first("base[href]")
    if base_node is not None:
        try:
            base = urljoin(page_url, base_node.attributes.get("href") or "")
        except InvalidInput:
            base = page_url
    links: list[httpx.URL] = []
    for node in tree.css("a[href]"):
        rel = (node.attributes.get("rel") or "").lower().split()
        if "nofollow" in rel:
            continue
        try:
            links.append(parse_start_url(urljoin(base, node.attributes.get("href") or "")))
        except InvalidInput:
            continue
    return links


def _display_name(title: str, url: httpx.URL) -> str:
    """A document name chonkit accepts (no slashes or control characters, at most 255 bytes); the URL if none."""
    name = " ".join(re.sub(r"[/\\\x00-\x1f\x7f]", " ", title).split())
    if not name or name in (".", "..") or name.startswith(".."):
        name = " ".join(re.sub(r"[/\\]", " ", f"{url.host}{url.path}").split()) or url.host
    while len(name.encode()) > _NAME_BYTES:
        name = name[:-1]
    return name


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
