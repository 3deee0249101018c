"""Page chrome is left out of HTML text, the same for an upload and a web page; the content stays whole."""

from __future__ import annotations

from selectolax.lexbor import LexborHTMLParser

from chonkit.document.parsing import DocumentType, ParseConfig
from chonkit.document.parsing.parser import parse
from chonkit.source.web import visible_html

# The shape of a page from mdBook's current template: a keyboard-help popup its CSS hides, a sidebar, a theme
# menu, a search box and prev/next links around the <main> content.
MDBOOK = b"""<!DOCTYPE HTML><html><head><title>Functions</title></head><body>
<div id="mdbook-help-container"><div id="mdbook-help-popup">
  <h2 class="mdbook-help-title">Keyboard shortcuts</h2>
  <div><p>Press <kbd>S</kbd> or <kbd>/</kbd> to search in the book</p>
  <p>Press <kbd>Esc</kbd> to hide this help</p></div>
</div></div>
<div id="mdbook-body-container">
<input type="checkbox" id="mdbook-sidebar-toggle-anchor" class="hidden">
<nav id="mdbook-sidebar" class="sidebar" aria-label="Table of contents">
  <ol class="chapter"><li><a href="intro.html">1. Introduction</a></li><li><a href="fn.html">2. Functions</a></li></ol>
</nav>
<div class="page">
  <div id="mdbook-menu-bar" class="menu-bar sticky">
    <div class="left-buttons">
      <button id="mdbook-theme-toggle" type="button" aria-haspopup="true">Theme</button>
      <ul id="mdbook-theme-list" class="theme-popup" aria-label="Themes" role="menu">
        <li role="none"><button role="menuitem" class="theme">Light</button></li>
        <li role="none"><button role="menuitem" class="theme">Rust</button></li>
        <li role="none"><button role="menuitem" class="theme">Coal</button></li>
      </ul>
    </div>
    <h1 class="menu-title">The Book</h1>
  </div>
  <div id="mdbook-search-wrapper" class="hidden">
    <form id="mdbook-searchbar-outer"><input type="search" placeholder="Search this book ..."></form>
  </div>
  <div id="mdbook-content" class="content">
    <main>
      <h1 id="functions"><a class="header" href="#functions">Functions</a></h1>
      <p>Functions are declared with <code>fn</code>; see <a href="ch01.html">the first chapter</a>.</p>
      <pre><code class="language-rust">fn main() {
    if true {
        another_function();
    }
}</code></pre>
    </main>
    <nav class="nav-wrapper" aria-label="Page navigation">
      <a rel="prev" href="intro.html" title="Previous chapter">Previous</a>
    </nav>
  </div>
</div>
</div></body></html>"""

# The shape of a Sphinx page (Python's documentation): no <main>, but role=main; navigation bars and a sidebar
# marked role=navigation, a search box, permalinks, a footnote aside.
SPHINX = """<html><body>
<div class="related" role="navigation" aria-label="Related"><ul><li><a href="index.html">index</a></li>
  <li><a href="next.html">next</a> |</li></ul></div>
<div class="document"><div class="body" role="main">
<section id="module-abc">
<h1>abc — Abstract Base Classes<a class="headerlink" href="#module-abc" title="Link to this heading">¶</a></h1>
<p>This module provides the infrastructure for defining abstract base classes.
<a class="footnote-reference" href="#id2">1</a></p>
<aside class="footnote-list brackets"><aside class="footnote brackets" id="id2" role="note">
<span class="label">1</span><p>C++ programmers should note the difference.</p></aside></aside>
</section></div></div>
<div class="sphinxsidebar" role="navigation"><h3>Previous topic</h3><p><a href="x.html">contextlib</a></p>
  <div id="searchbox" role="search"><h3>Quick search</h3>
  <form><input type="text" name="q"><input type="submit" value="Go"></form></div>
</div>
<div class="footer">© Copyright the authors.</div>
</body></html>""".encode()

# No <main>: what markup says is hidden, a control or navigation goes, wherever it is.
PLAIN = b"""<html><body>
<p hidden>Hidden by attribute.</p>
<div aria-hidden="true">Hidden from assistive technology.</div>
<p style="display: none">Hidden by style.</p>
<dialog><p>Press ? to show this help.</p></dialog>
<div role="dialog"><p>A popup.</p></div>
<ul role="listbox"><li>Option one</li><li>Option two</li></ul>
<h1>Installing</h1>
<div class="toc"><ul><li><a href="#a">Getting the source</a></li><li><a href="#b">Building it</a></li></ul></div>
<p>Run <a href="https://example.org/downloads/tool-1.0.tar.gz">https://example.org/downloads/tool-1.0.tar.gz</a>
and <a href="https://example.org/mirror/tool-1.0.tar.gz">https://example.org/mirror/tool-1.0.tar.gz</a>.</p>
<div class="section"><p>The address is <a href="mailto:a@example.org">a@example.org</a>, archived at
<a href="https://lists.example.org/pipermail/tool-devel/">https://lists.example.org/pipermail/tool-devel/</a>.</p></div>
<table><tr><th>Module</th></tr>
<tr><td><a href="os.html">os</a></td></tr><tr><td><a href="io.html">io</a></td></tr></table>
<div class="example"><p><code><a href="#for">?for</a> x:
<a href="#dep">?depends</a>(<a href="#dep">?depends</a>(x))</code></p></div>
<div class="nav-panel"><p>Next: <a href="n.html">Building it</a>, Previous: <a href="p.html">Overview</a>,
Up: <a href="u.html">Top</a> [<a href="c.html">Contents</a>]</p></div>
<button>Copy</button>
</body></html>"""


def _text(data: bytes) -> str:
    return parse(data, DocumentType.HTML, ParseConfig()).text


def test_a_generated_book_page_is_its_main_content_only() -> None:
    text = _text(MDBOOK)
    assert text.startswith("Functions\n\nFunctions are declared with fn; see the first chapter.")
    for chrome in ("Keyboard shortcuts", "Press", "Light", "Coal", "Theme", "The Book", "Introduction", "Previous"):
        assert chrome not in text


def test_code_keeps_its_indentation() -> None:
    text = _text(MDBOOK)
    assert "fn main() {\n    if true {\n        another_function();\n    }\n}" in text


def test_a_sphinx_page_loses_its_bars_sidebar_search_and_permalinks_and_keeps_its_footnotes() -> None:
    doc = parse(SPHINX, DocumentType.HTML, ParseConfig())
    assert [b.text for b in doc.blocks if b.kind == "heading"] == ["abc — Abstract Base Classes"]
    for chrome in ("index", "next", "Previous topic", "contextlib", "Quick search", "Go", "¶", "Copyright"):
        assert chrome not in doc.text
    assert "C++ programmers should note the difference." in doc.text


def test_hidden_elements_widgets_and_link_lists_go_and_prose_tables_and_code_stay() -> None:
    text = _text(PLAIN)
    for gone in ("Hidden", "help", "popup", "Option", "Getting the source", "Next:", "Overview", "Copy"):
        assert gone not in text
    # Prose citing long links is prose; a table of links is a table; cross-referenced names in code are code.
    assert "Run https://example.org/downloads/tool-1.0.tar.gz and https://example.org/mirror/tool-1.0.tar.gz." in text
    assert "The address is a@example.org" in text
    assert "Module\nos\nio" in text
    assert "?for x: ?depends(?depends(x))" in text


def test_a_web_page_is_cleaned_as_an_upload_is() -> None:
    for page in (MDBOOK, SPHINX, PLAIN):
        stored = visible_html(LexborHTMLParser(page.decode()), "title")
        assert _text(stored) == _text(page)
