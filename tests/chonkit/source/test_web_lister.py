"""Web sources against a real HTTP server on 127.0.0.1: crawl bounds, robots.txt, sitemaps, limits, visible text.

Loopback is what the server listens on, so these listers allow private addresses (the operator's setting);
``test_web_ssrf.py`` proves what happens when they are not allowed.
"""

from __future__ import annotations

from collections.abc import Iterator

import msgspec
import pytest

from chonkit.document.parsing.config import ParseConfig
from chonkit.document.parsing.doctype import DocumentType
from chonkit.document.parsing.parser import parse
from chonkit.source.items import SkippedItem, SourceItem
from chonkit.source.web import USER_AGENT, WebLister, WebSpec
from common.errors import InvalidInput, Unavailable
from tests.support.documents import pdf
from tests.support.web_site import LocalSite, Response, serve_site


@pytest.fixture
def site() -> Iterator[LocalSite]:
    with serve_site() as local:
        yield local


async def listed(spec: WebSpec) -> list[SourceItem | SkippedItem]:
    return [item async for item in WebLister(spec, allow_private=True).items()]


def taken(items: list[SourceItem | SkippedItem]) -> dict[str, SourceItem]:
    return {item.key: item for item in items if isinstance(item, SourceItem)}


def skipped(items: list[SourceItem | SkippedItem]) -> dict[str, str]:
    return {item.key: item.code for item in items if isinstance(item, SkippedItem)}


def visible_text(item: SourceItem) -> str:
    assert item.media_type == "text/html"
    return parse(item.content, DocumentType.HTML, ParseConfig()).text


CHROME_PAGE = """
<header><a href="/">Home</a> <a href="/login">Log in</a></header>
<nav><ul><li><a href="/a">Menu A</a></li></ul></nav>
<div role="navigation">Breadcrumbs here</div>
<main><article><header><h1>Vacation policy</h1><p>By HR</p></header>
<p>Employees get <b>25 days</b> of paid leave.</p>
<div style="display: none">Hidden draft text</div>
<script>var tracking = "script text";</script><style>p { color: red }</style>
<!-- build 1234 -->
<form><input type="hidden" name="csrf" value="TOKEN-1"><p>Ask HR for carry-over.</p></form>
</article>
<aside>Related: parking rules</aside></main>
<footer>Copyright ACME</footer>
"""


async def test_a_page_keeps_only_its_visible_content_and_is_named_by_its_title(site: LocalSite) -> None:
    site.html("/policy", CHROME_PAGE, title="Vacation / Leave")

    [item] = await listed(WebSpec(url=site.url("/policy")))

    assert isinstance(item, SourceItem)
    assert item.key == site.url("/policy")
    assert item.name == "Vacation Leave"  # a document name never holds a slash
    text = visible_text(item)
    for kept in ("Vacation policy", "By HR", "25 days", "Ask HR for carry-over."):
        assert kept in text
    for dropped in ("Home", "Log in", "Menu A", "Breadcrumbs", "Hidden draft", "script text", "color",
                    "build 1234", "TOKEN-1", "parking", "Copyright"):  # fmt: skip
        assert dropped not in text
        assert dropped.encode() not in item.content


async def test_the_same_visible_content_hashes_alike_whatever_the_page_s_tokens(site: LocalSite) -> None:
    """A nonce, a CSRF token or a build comment changing on every request must not make a sync re-embed."""
    site.html("/policy", CHROME_PAGE, title="Vacation")
    [first] = await listed(WebSpec(url=site.url("/policy")))
    site.html("/policy", CHROME_PAGE.replace("TOKEN-1", "TOKEN-2").replace("1234", "1235"), title="Vacation")
    [second] = await listed(WebSpec(url=site.url("/policy")))
    site.html("/policy", CHROME_PAGE.replace("25 days", "26 days"), title="Vacation")
    [changed] = await listed(WebSpec(url=site.url("/policy")))

    assert isinstance(first, SourceItem)
    assert isinstance(second, SourceItem)
    assert isinstance(changed, SourceItem)
    assert first.content_hash == second.content_hash
    assert changed.content_hash != first.content_hash


async def test_requests_say_who_fetches(site: LocalSite) -> None:
    site.html("/", "<p>hi</p>")
    await listed(WebSpec(url=site.url("/")))
    assert {request.user_agent for request in site.requests} == {USER_AGENT}
    assert [request.path for request in site.requests] == ["/robots.txt", "/"]


def link_tree(site: LocalSite) -> None:
    """/ -> /a, /b (and /a again with a fragment, and the same server under another host name); /a -> /c -> /d."""
    other_host = site.url("/elsewhere", host="localhost")
    site.html("/", f'<a href="/a">A</a> <a href="b">B</a> <a href="/a#part">A again</a> <a href="{other_host}">x</a>')
    site.html("/a", '<p>page a</p><a href="/c">C</a> <a href="/">home</a>', title="A")
    site.html("/b", "<p>page b</p>", title="B")
    site.html("/c", '<p>page c</p><a href="/d">D</a>', title="C")
    site.html("/d", "<p>page d</p>", title="D")
    site.html("/elsewhere", "<p>other host</p>")


@pytest.mark.parametrize(
    ("depth", "expected"),
    [(0, ["/"]), (1, ["/", "/a", "/b"]), (2, ["/", "/a", "/b", "/c"]), (3, ["/", "/a", "/b", "/c", "/d"])],
)
async def test_a_crawl_follows_links_to_its_depth_on_its_host_only_once_each(
    site: LocalSite, depth: int, expected: list[str]
) -> None:
    link_tree(site)

    items = await listed(WebSpec(url=site.url("/"), mode="crawl", depth=depth))

    assert list(taken(items)) == [site.url(path) for path in expected]
    assert skipped(items) == {}
    assert site.requested("/elsewhere") == 0  # the same server, but as "localhost": another host
    assert all(site.requested(path) == 1 for path in expected)


async def test_a_crawl_honours_robots_txt(site: LocalSite) -> None:
    link_tree(site)
    site.set("/robots.txt", b"User-agent: *\nDisallow: /b\n\nUser-agent: RaguBot\nDisallow: /c\n", "text/plain")

    items = await listed(WebSpec(url=site.url("/"), mode="crawl", depth=3))

    # RaguBot's own group applies, not the "*" one: /b is allowed to it, /c is not (nor /d, only linked from /c)
    assert list(taken(items)) == [site.url("/"), site.url("/a"), site.url("/b")]
    assert skipped(items) == {site.url("/c"): "web_robots_disallowed"}
    assert site.requested("/c") == 0
    assert site.requested("/robots.txt") == 1


async def test_robots_txt_that_fails_with_a_server_error_allows_nothing(site: LocalSite) -> None:
    site.html("/", "<p>hi</p>")
    site.set("/robots.txt", b"oops", "text/plain", status=503)

    items = await listed(WebSpec(url=site.url("/")))

    assert skipped(items) == {site.url("/"): "web_robots_disallowed"}
    assert site.requested("/") == 0


async def test_meta_robots_noindex_and_nofollow_are_honoured(site: LocalSite) -> None:
    site.html("/", '<meta name="robots" content="noindex"><a href="/a">A</a><a href="/b" rel="nofollow">B</a>')
    site.html("/a", '<meta name="robots" content="nofollow"><p>page a</p><a href="/c">C</a>')
    site.html("/b", "<p>page b</p>")
    site.html("/c", "<p>page c</p>")

    items = await listed(WebSpec(url=site.url("/"), mode="crawl", depth=3))

    assert list(taken(items)) == [site.url("/a")]
    assert skipped(items) == {site.url("/"): "web_noindex"}
    assert site.requested("/b") == site.requested("/c") == 0


def sitemap(*locations: str, index: bool = False) -> bytes:
    tag, entry = ("sitemapindex", "sitemap") if index else ("urlset", "url")
    entries = "".join(f"<{entry}><loc>{location}</loc></{entry}>" for location in locations)
    return f'<?xml version="1.0"?><{tag} xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{entries}</{tag}>'.encode()


async def test_a_sitemap_index_leads_to_its_sitemaps_pages_gzipped_or_not(site: LocalSite) -> None:
    for path in ("/p1", "/p2", "/p3"):
        site.html(path, f"<p>page {path}</p>", title=f"Page {path[1:]}")
    site.set("/sitemap.xml", sitemap(site.url("/maps/one.xml"), site.url("/maps/two.xml.gz"), index=True), "text/xml")
    site.set("/maps/one.xml", sitemap(site.url("/p1"), site.url("/p2"), site.url("/p1#again")), "application/xml")
    site.gzip("/maps/two.xml.gz", sitemap(site.url("/p3"), site.url("/p9", host="localhost")))

    items = await listed(WebSpec(url=site.url("/sitemap.xml"), mode="sitemap"))

    assert list(taken(items)) == [site.url("/p1"), site.url("/p2"), site.url("/p3")]
    assert skipped(items) == {site.url("/p9", host="localhost"): "web_off_host"}
    assert taken(items)[site.url("/p2")].name == "Page p2"


async def test_a_sitemap_that_is_not_one_fails_the_listing(site: LocalSite) -> None:
    site.html("/sitemap.xml", "<p>not a sitemap</p>")
    with pytest.raises(Unavailable) as raised:
        await listed(WebSpec(url=site.url("/sitemap.xml"), mode="sitemap"))
    assert raised.value.code == "web_sitemap_invalid"


async def test_the_page_limit_stops_the_listing_and_says_so(site: LocalSite) -> None:
    link_tree(site)

    items = await listed(WebSpec(url=site.url("/"), mode="crawl", depth=3, max_pages=2))

    assert list(taken(items)) == [site.url("/"), site.url("/a")]
    assert skipped(items) == {site.url("/b"): "web_page_limit"}
    assert site.requested("/b") == site.requested("/c") == 0


@pytest.mark.parametrize("send_length", [True, False], ids=["declared", "streamed"])
async def test_a_page_over_the_size_limit_is_skipped_not_truncated(site: LocalSite, send_length: bool) -> None:
    site.html("/", '<a href="/big">big</a> <a href="/small">small</a>')
    site.pages["/big"] = Response(b"<p>" + b"x" * 50_000 + b"</p>", send_length=send_length)
    site.html("/small", "<p>small</p>")

    items = await listed(WebSpec(url=site.url("/"), mode="crawl", max_bytes=10_000))

    assert list(taken(items)) == [site.url("/"), site.url("/small")]
    assert skipped(items) == {site.url("/big"): "web_page_too_large"}


async def test_redirects_are_followed_and_the_page_is_keyed_where_it_landed(site: LocalSite) -> None:
    site.html("/", '<a href="/old">old</a> <a href="/new">new</a> <a href="/loop1">loop</a>')
    site.redirect("/old", "/new", status=301)
    site.html("/new", "<p>new</p>", title="New")
    site.redirect("/loop1", "/loop2")
    site.redirect("/loop2", "/loop1")

    items = await listed(WebSpec(url=site.url("/"), mode="crawl"))

    assert list(taken(items)) == [site.url("/"), site.url("/new")]  # /new once, though linked twice
    assert skipped(items) == {site.url("/loop1"): "web_too_many_redirects"}


async def test_pages_that_are_not_html_pass_through_with_their_media_type(site: LocalSite) -> None:
    document = pdf(["Quarterly report"])
    paths = ["/r.pdf", "/notes.md", "/a.txt", "/x.zip", "/My%20Notes.pdf", "/scan.tif", "/photo.gif", "/memo.docx"]
    site.html("/", " ".join(f'<a href="{path}">{path}</a>' for path in paths))
    site.set("/r.pdf", document, "application/octet-stream")
    site.set("/notes.md", b"# Notes\n\nsome notes", "text/plain")
    site.set("/a.txt", b"plain words", "text/plain; charset=utf-8")
    site.set("/My%20Notes.pdf", document, "application/pdf")
    site.set("/x.zip", b"PK\x03\x04", "application/zip")
    site.set("/scan.tif", b"II*\x00", "application/octet-stream")
    site.set("/photo.gif", b"GIF89a", "image/gif")
    site.set("/memo.docx", b"PK\x03\x04", "application/octet-stream")

    items = await listed(WebSpec(url=site.url("/"), mode="crawl"))

    pages = taken(items)
    assert {key: item.media_type for key, item in pages.items() if key != site.url("/")} == {
        site.url("/r.pdf"): "application/pdf",
        site.url("/notes.md"): "text/markdown",
        site.url("/a.txt"): "text/plain",
        site.url("/My%20Notes.pdf"): "application/pdf",
        site.url("/scan.tif"): "image/tiff",
        site.url("/memo.docx"): "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    }
    assert pages[site.url("/My%20Notes.pdf")].name == "My Notes.pdf"
    assert pages[site.url("/r.pdf")].content == document
    assert pages[site.url("/r.pdf")].name == "r.pdf"
    assert skipped(items) == {
        site.url("/x.zip"): "web_unsupported_type",
        site.url("/photo.gif"): "web_unsupported_type",
    }


async def test_a_start_page_that_fails_fails_the_listing_so_a_sync_removes_nothing(site: LocalSite) -> None:
    site.set("/", b"down", "text/plain", status=502)
    with pytest.raises(Unavailable) as raised:
        await listed(WebSpec(url=site.url("/"), mode="crawl"))
    assert raised.value.code == "web_fetch_failed"


async def test_a_linked_page_that_fails_is_skipped_with_its_status_and_one_that_is_gone_is_left_out(
    site: LocalSite,
) -> None:
    """Skipped pages are kept by a sync (the failure may pass); a 404 or 410 page is not there, so it is removed."""
    site.html(
        "/", '<a href="/down">down</a> <a href="/private">private</a> <a href="/gone">gone</a> <a href="/nope">x</a>'
    )
    site.set("/down", b"oops", "text/plain", status=500)
    site.set("/private", b"no", "text/plain", status=403)
    site.set("/gone", b"gone", "text/plain", status=410)

    items = await listed(WebSpec(url=site.url("/"), mode="crawl"))

    assert list(taken(items)) == [site.url("/")]
    assert skipped(items) == {site.url("/down"): "web_http_error", site.url("/private"): "web_http_error"}
    reasons = [item.reason for item in items if isinstance(item, SkippedItem)]
    assert ["500" in reasons[0], "403" in reasons[1]] == [True, True]
    assert site.requested("/gone") == site.requested("/nope") == 1  # fetched, found gone (410, 404), left out


async def test_broken_links_count_against_the_page_limit(site: LocalSite) -> None:
    site.html("/", " ".join(f'<a href="/missing{n}">{n}</a>' for n in range(10)) + ' <a href="/last">last</a>')
    site.html("/last", "<p>last</p>")

    items = await listed(WebSpec(url=site.url("/"), mode="crawl", max_pages=4))

    assert list(taken(items)) == [site.url("/")]
    assert skipped(items) == {site.url("/missing4"): "web_page_limit"}
    assert site.requested("/last") == 0


RUSSIAN = "Привет, мир"
"""Short text in a legacy encoding, which chonkit's guess alone reads wrongly (as cp1250): the header decides; without
one, the page's ``<meta charset>`` (which chonkit's reading of HTML files honours)."""


@pytest.mark.parametrize(
    ("content_type", "head", "encoded"),
    [
        ("text/html; charset=koi8-r", "", RUSSIAN.encode("koi8-r")),
        ("text/html", '<meta charset="windows-1251">', RUSSIAN.encode("cp1251")),
        ('text/html; charset="koi8-r"', '<meta charset="windows-1251">', RUSSIAN.encode("koi8-r")),  # header wins
    ],
)
async def test_a_page_is_decoded_as_its_server_or_its_meta_says(
    site: LocalSite, content_type: str, head: str, encoded: bytes
) -> None:
    site.set(
        "/",
        f"<html><head>{head}<title>Menu</title></head><body><p>".encode() + encoded + b"</p></body></html>",
        content_type,
    )

    [item] = await listed(WebSpec(url=site.url("/")))

    assert isinstance(item, SourceItem)
    assert RUSSIAN in visible_text(item)


@pytest.mark.parametrize(
    ("fields", "code"),
    [
        ({"url": "ftp://example.com/"}, "web_url_invalid"),
        ({"url": "http://user:pw@example.com/"}, "web_url_invalid"),
        ({"url": "not a url"}, "web_url_invalid"),
        ({"url": "https://example.com/", "depth": 6}, "web_depth_out_of_range"),
        ({"url": "https://example.com/", "depth": -1}, "web_depth_out_of_range"),
        ({"url": "https://example.com/", "max_pages": 0}, "web_max_pages_out_of_range"),
        ({"url": "https://example.com/", "max_pages": 1001}, "web_max_pages_out_of_range"),
        ({"url": "https://example.com/", "max_bytes": 10}, "web_max_bytes_out_of_range"),
    ],
)
def test_a_spec_out_of_bounds_is_refused_with_a_stable_code(fields: dict[str, object], code: str) -> None:
    with pytest.raises(InvalidInput) as raised:
        msgspec.convert(fields, WebSpec)
    assert raised.value.code == code


def test_a_spec_has_the_documented_defaults() -> None:
    spec = msgspec.convert({"url": "https://example.com/"}, WebSpec)
    assert (spec.mode, spec.depth, spec.max_pages, spec.max_bytes) == ("page", 1, 100, 5 * 1024 * 1024)
