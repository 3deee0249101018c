"""Markdown (CommonMark via markdown-it-py) and HTML (lexbor via selectolax) into blocks."""

from __future__ import annotations

import pytest

from chonkit.document.parsed import ParsedDocument
from chonkit.document.parsing import DocumentType, ParseConfig
from chonkit.document.parsing.html_parser import MAX_NESTING, cap_nesting
from chonkit.document.parsing.parser import parse
from common.errors import InvalidInput


def _outline(doc: ParsedDocument) -> list[tuple[str, str, tuple[str, ...]]]:
    return [(b.kind, b.text, b.heading_path) for b in doc.blocks]


def test_markdown_headings_nest_and_fenced_hashes_are_code(samples: dict[DocumentType, bytes]) -> None:
    doc = parse(samples[DocumentType.MARKDOWN], DocumentType.MARKDOWN, ParseConfig())

    assert _outline(doc) == [
        ("heading", "Guide", ("Guide",)),
        ("paragraph", "Intro paragraph.", ("Guide",)),
        ("heading", "Install", ("Guide", "Install")),
        ("code", "# this is a shell comment, not a heading\npip install ragu", ("Guide", "Install")),
        ("list", "- first\n- second", ("Guide", "Install")),
        ("heading", "Use", ("Guide", "Use")),
        ("table", "key | value\na | 1", ("Guide", "Use")),
    ]
    assert [b.level for b in doc.blocks if b.kind == "heading"] == [1, 2, 2]
    assert doc.media_type == "text/markdown"


def test_setext_headings_and_skipped_levels() -> None:
    source = b"Title\n=====\n\n### Deep\n\ntext\n\nNext\n----\n\nmore\n"
    doc = parse(source, DocumentType.MARKDOWN, ParseConfig())

    assert _outline(doc) == [
        ("heading", "Title", ("Title",)),
        ("heading", "Deep", ("Title", "Deep")),
        ("paragraph", "text", ("Title", "Deep")),
        ("heading", "Next", ("Title", "Next")),
        ("paragraph", "more", ("Title", "Next")),
    ]


def test_front_matter_is_metadata_not_a_heading() -> None:
    source = b"---\ntitle: Handbook\ntags: [a, b]\n---\n# Real title\n\nBody.\n"
    doc = parse(source, DocumentType.MARKDOWN, ParseConfig())

    assert _outline(doc) == [("heading", "Real title", ("Real title",)), ("paragraph", "Body.", ("Real title",))]


def test_markdown_quotes_lists_and_indented_code() -> None:
    source = b"> quoted\n> text\n\n1. one\n2. two\n   - nested\n\nafter\n\n    indented code\n"
    doc = parse(source, DocumentType.MARKDOWN, ParseConfig())

    assert [(b.kind, b.text) for b in doc.blocks] == [
        ("paragraph", "quoted\ntext"),
        ("list", "1. one\n2. two\n   - nested"),
        ("paragraph", "after"),
        ("code", "indented code"),
    ]


@pytest.mark.parametrize("depth", [19, 20, 21, 25, 200])
def test_quotes_nested_past_markdown_its_limit_keep_their_text(depth: int) -> None:
    """markdown-it silently drops whatever lies deeper than its nesting limit (20)."""
    source = f"Intro.\n\n{'>' * depth} deep text\n{'> ' * depth}and more\n\nAfter.\n".encode()

    doc = parse(source, DocumentType.MARKDOWN, ParseConfig())

    assert [(b.kind, b.text) for b in doc.blocks] == [
        ("paragraph", "Intro."),
        ("paragraph", "deep text\nand more"),
        ("paragraph", "After."),
    ]


@pytest.mark.parametrize(
    ("source", "leaves"),
    [
        pytest.param(">" * 100_000 + " leaf", 1, id="hundred-thousand-quotes"),
        pytest.param("> - " * 5_000 + "leaf", 1, id="quotes-and-lists"),
        pytest.param("".join(">" * depth + " leaf\n" for depth in range(2_000)), 2_000, id="ever-deeper-lines"),
    ],
)
def test_hostile_markdown_nesting_keeps_its_text_without_deep_recursion(source: str, leaves: int) -> None:
    doc = parse(source.encode(), DocumentType.MARKDOWN, ParseConfig())

    assert doc.text.count("leaf") == leaves


def test_markdown_with_crlf_and_an_unclosed_fence() -> None:
    doc = parse(b"# A\r\n\r\n```\r\n# still code\r\n", DocumentType.MARKDOWN, ParseConfig())

    assert _outline(doc) == [("heading", "A", ("A",)), ("code", "# still code", ("A",))]


def test_html_keeps_visible_text_with_heading_paths(samples: dict[DocumentType, bytes]) -> None:
    doc = parse(samples[DocumentType.HTML], DocumentType.HTML, ParseConfig())

    assert _outline(doc) == [
        ("heading", "Guide", ("Guide",)),
        ("paragraph", "Intro paragraph.", ("Guide",)),
        ("heading", "Install", ("Guide", "Install")),
        ("code", "pip install ragu", ("Guide", "Install")),
        ("list", "- first\n- second", ("Guide", "Install")),
        ("heading", "Use", ("Guide", "Use")),
        ("table", "key | value\na | 1", ("Guide", "Use")),
    ]
    assert "injected" not in doc.text
    assert "Page title" not in doc.text
    assert doc.media_type == "text/html"


def test_html_drops_invisible_content() -> None:
    html = b"""<body><p>shown</p>
    <noscript>enable js</noscript><template><p>template</p></template>
    <div hidden>hidden attr</div><span style="DISPLAY: none">inline none</span>
    <div style="color:red; visibility:hidden">invisible</div><!-- a comment -->
    <style>.x{}</style><p>also shown</p></body>"""
    doc = parse(html, DocumentType.HTML, ParseConfig())

    assert [b.text for b in doc.blocks] == ["shown", "also shown"]


def test_html_whitespace_line_breaks_and_implied_end_tags() -> None:
    html = b"<p>first   para\n  wraps<p>second<br>line two<div>block</div>tail"
    doc = parse(html, DocumentType.HTML, ParseConfig())

    assert [b.text for b in doc.blocks] == ["first para wraps", "second\nline two", "block", "tail"]


def test_html_nested_lists_and_tables() -> None:
    html = b"""<ul><li>one<ul><li>one.a</li><li>one.b</li></ul></li><li>two</li></ul>
    <table><tr><td>cell <b>bold</b></td><td><table><tr><td>inner</td></tr></table></td></tr>
    <tr><td></td><td></td></tr><tr><td>x</td><td>y</td></tr></table>"""
    doc = parse(html, DocumentType.HTML, ParseConfig())

    assert [(b.kind, b.text) for b in doc.blocks] == [
        ("list", "- one\n  - one.a\n  - one.b\n- two"),
        ("table", "cell bold | inner\nx | y"),
    ]


def test_html_heading_levels_reset_the_path() -> None:
    html = b"<h2>B</h2><h3>C</h3><p>x</p><h1>A</h1><h3>D</h3><p>y</p>"
    doc = parse(html, DocumentType.HTML, ParseConfig())

    assert [b.heading_path for b in doc.blocks if b.kind == "paragraph"] == [("B", "C"), ("A", "D")]


def test_a_hundred_thousand_nested_divs_parse_without_recursion() -> None:
    html = b"<div>" * 100_000 + b"deep text" + b"</div>" * 100_000 + b"<p>after</p>"
    doc = parse(html, DocumentType.HTML, ParseConfig())

    assert [b.text for b in doc.blocks] == ["deep text", "after"]


@pytest.mark.parametrize(
    "html",
    [
        pytest.param("<ul><li>" * 50_000 + "leaf", id="nested-lists"),
        pytest.param("<span>" * 30_000 + "<p>x" * 30_000, id="paragraphs-under-deep-inline"),
        pytest.param("<table><tr><td>" * 20_000 + "cell", id="nested-tables"),
    ],
)
def test_other_deep_nesting_shapes_parse(html: str) -> None:
    doc = parse(html.encode(), DocumentType.HTML, ParseConfig())

    assert doc.blocks


def test_nesting_cap_keeps_text_and_balanced_tags() -> None:
    html = "<div>" * (MAX_NESTING + 10) + "x" + "</div>" * (MAX_NESTING + 10) + "<div>y</div>"
    capped = cap_nesting(html)

    assert capped.count("<div>") == capped.count("</div>") == MAX_NESTING + 1
    assert "x" in capped
    assert capped.endswith("<div>y</div>")
    assert cap_nesting("<p>a<br>b<img src=x></p>") == "<p>a<br>b<img src=x></p>"


def test_html_without_visible_text_has_no_text() -> None:
    with pytest.raises(InvalidInput) as caught:
        parse(
            b"<html><head><title>t</title></head><body><script>x()</script></body></html>",
            DocumentType.HTML,
            ParseConfig(),
        )

    assert caught.value.code == "no_text"


def test_html_in_a_legacy_encoding() -> None:
    doc = parse("<p>Grüße aus Köln \u2013 5 €</p>".encode("cp1252"), DocumentType.HTML, ParseConfig())

    assert doc.blocks[0].text == "Grüße aus Köln \u2013 5 €"
