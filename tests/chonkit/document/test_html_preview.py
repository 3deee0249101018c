"""#29 item 13: an uploaded HTML page previews as its own sections, one per heading, without the page's chrome.

``pages/rustdoc_trait_Parser.html`` is a real page, unchanged: rustdoc's page for syn's ``Parser`` trait, as
Debian's cargo-doc installs it (/usr/share/doc/cargo/doc/syn/parse/trait.Parser.html; syn is MIT or Apache-2.0,
© David Tolnay). Around its content: a sidebar, a search box, a help button, a settings menu and copy buttons;
its title and every method signature are headings that cross-reference their types with links.
"""

from __future__ import annotations

from pathlib import Path

import httpx

from chonkit.document.parsing import DocumentType, ParseConfig
from chonkit.document.parsing.parser import parse
from tests.support.documents import pdf

PAGE = Path(__file__).with_name("pages") / "rustdoc_trait_Parser.html"

HEADINGS = [
    "Trait syn::parse::Parser",
    "Required Associated Types",
    "type Output",
    "Required Methods",
    "fn parse2(self, tokens: TokenStream) -> Result<Self::Output>",
    "Provided Methods",
    "fn parse(self, tokens: TokenStream) -> Result<Self::Output>",
    "fn parse_str(self, s: &str) -> Result<Self::Output>",
    "Hygiene",
    "Implementors",
    "impl<F, T> Parser for F where F: FnOnce(ParseStream<'_>) -> Result<T>,",
    "type Output = T",
]


async def test_an_uploaded_html_page_previews_its_headings_as_sections_without_chrome(
    chonkit: httpx.AsyncClient,
) -> None:
    upload = await chonkit.post("/documents", files=[("files", (PAGE.name, PAGE.read_bytes(), "text/html"))])
    assert upload.status_code == 201, upload.text
    document = upload.json()["results"][0]["document"]
    assert document["doc_type"] == "html"

    response = await chonkit.post(f"/documents/{document['id']}/preview/parse", json={})

    assert response.status_code == 200, response.text
    preview = response.json()
    sections = preview["sections"]
    assert [s["title"] for s in sections] == HEADINGS
    for section in sections:  # each section opens with its heading and holds what is under it
        assert (section["blocks"][0]["kind"], section["blocks"][0]["text"]) == ("heading", section["title"])
    assert sum(len(s["blocks"]) for s in sections) == preview["block_count"]
    text = [b["text"] for s in sections for b in s["blocks"]]
    assert "Parse a string of Rust code into the chosen syntax tree node." in text
    chrome = ("In syn::parse", "?", "Methods", "Change settings", "Copy item path", "logo")  # sidebar, buttons
    assert not [block for block in text if any(block == item or block.startswith(item + " ") for item in chrome)]


async def test_a_pdfs_configured_sections_preview_as_configured(chonkit: httpx.AsyncClient) -> None:
    data = pdf(["Vacation policy.", "Sick leave.", "Payroll."])
    upload = await chonkit.post("/documents", files=[("files", ("handbook.pdf", data, "application/pdf"))])
    document_id = upload.json()["results"][0]["document"]["id"]
    config = {"parse": {"sections": [{"start": 1, "end": 1}, {"start": 2, "end": 3}]}}

    preview = (await chonkit.post(f"/documents/{document_id}/preview/parse", json=config)).json()

    assert [(s["title"], s["page_start"], s["page_end"]) for s in preview["sections"]] == [(None, 1, 1), (None, 2, 3)]


def test_a_heading_with_words_of_its_own_is_not_navigation() -> None:
    """Its links cross-reference the parts of a name; a block of headings that are only links is still a menu."""
    page = b"""<html><body><main>
    <div><a href="src.html">source</a><h4>fn <a href="#m">parse</a>(tokens: <a href="t.html">TokenStream</a>)</h4></div>
    <p>Parses the tokens.</p>
    <div><h3><a href="a.html">Chapter one</a></h3><h3><a href="b.html">Chapter two</a></h3></div>
    </main></body></html>"""
    doc = parse(page, DocumentType.HTML, ParseConfig())
    assert [(b.kind, b.text) for b in doc.blocks] == [
        ("paragraph", "source"),
        ("heading", "fn parse(tokens: TokenStream)"),
        ("paragraph", "Parses the tokens."),
    ]
