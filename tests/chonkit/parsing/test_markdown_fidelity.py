"""Markdown block text is what a reader sees: markup, tags and extension syntax go, their text stays."""

from __future__ import annotations

from chonkit.document.parsing import DocumentType, ParseConfig
from chonkit.document.parsing.parser import parse


def _blocks(source: str) -> list[tuple[str, str]]:
    document = parse(source.encode(), DocumentType.MARKDOWN, ParseConfig())
    return [(block.kind, block.text) for block in document.blocks]


def test_inline_markup_goes_and_link_text_stays() -> None:
    source = "_Tool_ is **the** `fast` one, [found here](https://example.org/x) ![logo](l.png) &amp; <b>more</b>.\n"

    assert _blocks(source) == [("paragraph", "Tool is the fast one, found here logo & more.")]


def test_list_items_and_table_cells_lose_their_markup_but_keep_markers() -> None:
    source = "- _one_ [link](u)\n  - **two**\n\n| a | _b_ |\n|---|---|\n| [x](y) | `z` |\n"

    assert _blocks(source) == [("list", "- one link\n  - two"), ("table", "a | b\nx | z")]


def test_an_html_block_keeps_its_text_without_tags() -> None:
    source = "<details>\n<summary>Show more</summary>\n\nHidden text.\n\n</details>\n"

    assert _blocks(source) == [("paragraph", "Show more"), ("paragraph", "Hidden text.")]


def test_an_admonition_is_its_title_and_a_markdown_body() -> None:
    source = (
        '!!! tip "Keep it"\n    Body *text*.\n\n    ```toml\n    [tool]\n    x = 1\n    ```\n\n'
        "!!! note\n    Plain.\n\nAfter.\n"
    )

    assert _blocks(source) == [
        ("paragraph", "Keep it"),
        ("paragraph", "Body text."),
        ("code", "[tool]\nx = 1"),
        ("paragraph", "Note"),
        ("paragraph", "Plain."),
        ("paragraph", "After."),
    ]


def test_a_heading_attribute_list_is_dropped() -> None:
    document = parse(
        b"# Install { #install }\n\n## Use {: .wide #use }\n\nText.\n", DocumentType.MARKDOWN, ParseConfig()
    )

    assert [block.heading_path for block in document.blocks] == [("Install",), ("Install", "Use"), ("Install", "Use")]


def test_a_myst_admonition_fence_is_markdown_and_other_directives_stay_code() -> None:
    source = (
        "```{note} Keep *this*\n:class: wide\nBody with a {doc}`guide <path/guide>` link.\n```\n\n"
        "```{toctree}\nintro\n```\n"
    )

    assert _blocks(source) == [
        ("paragraph", "Keep this"),
        ("paragraph", "Body with a guide link."),
        ("code", "intro"),
    ]
