"""HTML definition-list terms as headings: a manual's setting or function names its description's blocks."""

from __future__ import annotations

from chonkit.document.parsed import ParsedDocument
from chonkit.document.parsing import DocumentType, ParseConfig
from chonkit.document.parsing.parser import parse

# The shape of PostgreSQL's manual (Debian's postgresql-doc-15): a table of contents of links, then settings.
SETTINGS = b"""<html><body>
<h2>20.4. Resource Consumption</h2>
<div class="toc"><dl class="toc">
  <dt><span class="sect2"><a href="#MEMORY">20.4.1. Memory</a></span></dt>
  <dt><span class="sect2"><a href="#DISK">20.4.2. Disk</a></span></dt>
</dl></div>
<h3 id="MEMORY">20.4.1. Memory</h3>
<div class="variablelist"><dl class="variablelist">
  <dt id="GUC-SHARED-BUFFERS"><span class="term"><code class="varname">shared_buffers</code>
      (<code class="type">integer</code>) <a id="id-1" class="indexterm"></a></span></dt>
  <dd><p>Sets the amount of memory.</p><p>The default is 128MB.</p></dd>
  <dt id="GUC-TEMP-BUFFERS"><span class="term"><code class="varname">temp_buffers</code>
      (<code class="type">integer</code>)</span></dt>
  <dd><p>Sets the maximum amount of memory for temporary buffers.</p><p>The default is eight megabytes (8MB).</p></dd>
</dl></div>
<p>These settings take effect at server start.</p>
<h3 id="DISK">20.4.2. Disk</h3>
<p>Disk settings.</p>
</body></html>"""

# The shape of Python's library reference (Sphinx): signatures with a permalink, methods nested in a class.
SPHINX = """<html><body><section>
<h1>json — JSON encoder and decoder<a class="headerlink" href="#module-json">¶</a></h1>
<dl class="py class"><dt class="sig sig-object py" id="json.JSONDecoder">
  <em class="property">class </em><span class="sig-prename">json.</span><span class="sig-name">JSONDecoder</span>
  <a class="headerlink" href="#json.JSONDecoder">¶</a></dt>
<dd><p>Simple JSON decoder.</p>
  <dl class="py method"><dt class="sig sig-object py" id="json.JSONDecoder.decode">
    <span class="sig-name">decode</span>(<em>s</em>)<a class="headerlink" href="#json.JSONDecoder.decode">¶</a></dt>
  <dd><p>Return the Python representation of s.</p></dd></dl>
  <p>Back in the class.</p>
</dd></dl>
<p>Back in the module.</p>
</section></body></html>""".encode()


def _outline(doc: ParsedDocument) -> list[tuple[str, str, tuple[str, ...]]]:
    return [(b.kind, b.text, b.heading_path) for b in doc.blocks]


def test_terms_head_their_definitions_one_level_below_the_section() -> None:
    doc = parse(SETTINGS, DocumentType.HTML, ParseConfig())
    consumption, memory = "20.4. Resource Consumption", "20.4.1. Memory"
    assert _outline(doc) == [
        ("heading", consumption, (consumption,)),
        # The table of contents is all links: navigation, left out (html_clean).
        ("heading", memory, (consumption, memory)),
        ("heading", "shared_buffers (integer)", (consumption, memory, "shared_buffers (integer)")),
        ("paragraph", "Sets the amount of memory.", (consumption, memory, "shared_buffers (integer)")),
        ("paragraph", "The default is 128MB.", (consumption, memory, "shared_buffers (integer)")),
        ("heading", "temp_buffers (integer)", (consumption, memory, "temp_buffers (integer)")),
        (
            "paragraph",
            "Sets the maximum amount of memory for temporary buffers.",
            (consumption, memory, "temp_buffers (integer)"),
        ),
        ("paragraph", "The default is eight megabytes (8MB).", (consumption, memory, "temp_buffers (integer)")),
        # After the list the text is the section's again, not its last term's.
        ("paragraph", "These settings take effect at server start.", (consumption, memory)),
        ("heading", "20.4.2. Disk", (consumption, "20.4.2. Disk")),
        ("paragraph", "Disk settings.", (consumption, "20.4.2. Disk")),
    ]
    assert [b.level for b in doc.blocks if b.kind == "heading"] == [2, 3, 4, 4, 3]


def test_signatures_are_headings_and_nested_lists_nest_below_their_term() -> None:
    doc = parse(SPHINX, DocumentType.HTML, ParseConfig())
    module = "json — JSON encoder and decoder"  # the permalinks' ¶ are left out
    decoder = "class json.JSONDecoder"
    decode = "decode(s)"
    assert _outline(doc) == [
        ("heading", module, (module,)),
        # A permalink inside a signature does not make it a table of contents' entry.
        ("heading", decoder, (module, decoder)),
        ("paragraph", "Simple JSON decoder.", (module, decoder)),
        ("heading", decode, (module, decoder, decode)),
        ("paragraph", "Return the Python representation of s.", (module, decoder, decode)),
        ("paragraph", "Back in the class.", (module, decoder)),
        ("paragraph", "Back in the module.", (module,)),
    ]
    assert [b.level for b in doc.blocks if b.kind == "heading"] == [1, 2, 3]


def test_a_page_that_is_only_a_table_of_contents_keeps_its_entries_as_text() -> None:
    toc = SETTINGS[: SETTINGS.index(b'<h3 id="MEMORY">')].replace(b"<h2>20.4. Resource Consumption</h2>", b"")
    doc = parse(toc, DocumentType.HTML, ParseConfig())
    # A term made of links only is a table of contents' entry: no heading.
    assert _outline(doc) == [("paragraph", "20.4.1. Memory", ()), ("paragraph", "20.4.2. Disk", ())]


def test_a_term_outside_any_list_and_terms_inside_a_table_stay_text() -> None:
    html = b"<h1>T</h1><dt>stray term</dt><p>after</p><table><tr><td><dl><dt>cell term</dt></dl></td></tr></table>"
    doc = parse(html, DocumentType.HTML, ParseConfig())
    assert _outline(doc) == [
        ("heading", "T", ("T",)),
        ("paragraph", "stray term", ("T",)),
        ("paragraph", "after", ("T",)),
        ("table", "cell term", ("T",)),
    ]
