"""Plain text in any common encoding, CSV and JSON."""

from __future__ import annotations

import pytest

from chonkit.document.parsing import DocumentType, ParseConfig
from chonkit.document.parsing.parser import parse
from common.errors import InvalidInput

FRENCH = "Café “crème” à 5 € \u2013 naïve déjà-vu.\n\nDeuxième paragraphe, œuvre."


def _texts(data: bytes, doc_type: DocumentType = DocumentType.TEXT, config: ParseConfig | None = None) -> list[str]:
    return [b.text for b in parse(data, doc_type, config or ParseConfig()).blocks]


@pytest.mark.parametrize(
    "encoding",
    ["utf-8", "utf-8-sig", "utf-16", "utf-16-le-bom", "utf-16-be-bom", "utf-16-le", "utf-16-be", "utf-32", "cp1252"],
)
def test_text_is_decoded_from_common_encodings(encoding: str) -> None:
    if encoding.endswith("-bom"):
        codec = encoding.removesuffix("-bom")
        data = ("\ufeff" + FRENCH).encode(codec)
    else:
        data = FRENCH.encode(encoding)

    assert _texts(data) == ["Café “crème” à 5 € \u2013 naïve déjà-vu.", "Deuxième paragraphe, œuvre."]


@pytest.mark.parametrize("codec", ["utf-16-le", "utf-16-be"])
def test_ascii_utf16_without_a_bom_keeps_its_paragraphs(codec: str) -> None:
    """Without a BOM such a file is also valid UTF-8 (with a NUL after every character), so it must be told apart."""
    data = "First paragraph.\r\n\r\nSecond paragraph.".encode(codec)

    assert _texts(data) == ["First paragraph.", "Second paragraph."]


def test_latin1_text_is_decoded() -> None:
    assert _texts("Grüße aus Köln, schöne Straße.".encode("latin-1")) == ["Grüße aus Köln, schöne Straße."]


def test_the_code_page_is_guessed_where_the_non_ascii_text_is() -> None:
    data = b"plain ascii line\n" * 20_000 + "\nSchöne Grüße, “Köln”.".encode("cp1252")

    assert _texts(data)[-1] == "Schöne Grüße, “Köln”."


def test_invalid_utf8_is_replaced_not_raised() -> None:
    data = "Ünïcödé text that is mostly fine ".encode() * 3 + b"\xff\xfe\xc3 broken"

    (text,) = _texts(data)
    assert text.startswith("Ünïcödé text")
    assert "\ufffd" in text


def test_paragraphs_split_on_blank_lines_of_any_kind() -> None:
    data = b"one\nstill one\n\ntwo\r\n \t \r\n\r\nthree\r\r\n\n\n"

    assert _texts(data) == ["one\nstill one", "two", "three"]


def test_whitespace_only_text_has_no_text() -> None:
    with pytest.raises(InvalidInput) as caught:
        parse(b" \n\t\n  ", DocumentType.TEXT, ParseConfig())

    assert caught.value.code == "no_text"
    assert "no text" in caught.value.detail


def test_nul_characters_never_reach_the_blocks() -> None:
    assert _texts("a\x00b".encode("utf-16")) == ["ab"]


def test_empty_file_is_rejected_by_parse_too() -> None:
    with pytest.raises(InvalidInput) as caught:
        parse(b"", DocumentType.TEXT, ParseConfig())

    assert caught.value.code == "empty_file"


def test_line_filters_remove_lines_anywhere_in_a_paragraph() -> None:
    data = b"Confidential - do not share\nReal content\n\nAnother line\nConfidential - do not share"
    config = ParseConfig(line_filters=["^Confidential", r"^\s*$"])

    assert _texts(data, config=config) == ["Real content", "Another line"]


@pytest.mark.parametrize(
    ("data", "rows"),
    [
        (b"name,city\nAda,London\n", "name | city\nAda | London"),
        (b"name;city\nAda;London\nGrace;New York\n", "name | city\nAda | London\nGrace | New York"),
        (b"a\tb\n1\t2\n", "a | b\n1 | 2"),
        (b'title,notes\n"Hello, world","line one\nline two"\n', "title | notes\nHello, world | line one line two"),
        (b"a,b\n\n,\n1,2\n", "a | b\n1 | 2"),
    ],
)
def test_csv_rows_become_lines_of_one_table_block(data: bytes, rows: str) -> None:
    doc = parse(data, DocumentType.CSV, ParseConfig())

    assert [(b.kind, b.text) for b in doc.blocks] == [("table", rows)]
    assert doc.media_type == "text/csv"


def test_a_long_csv_sniffs_its_delimiter_from_the_start() -> None:
    data = b"id;label\n" + b"".join(b"%d;item %d\n" % (i, i) for i in range(5000))
    (table,) = _texts(data, DocumentType.CSV)

    assert table.splitlines()[4999] == "4998 | item 4998"


def test_json_is_pretty_printed() -> None:
    doc = parse(b'{"name":"Ada","tags":["math"],"nested":{"x":null}}', DocumentType.JSON, ParseConfig())

    assert [(b.kind, b.text) for b in doc.blocks] == [
        ("code", '{\n  "name": "Ada",\n  "tags": [\n    "math"\n  ],\n  "nested": {\n    "x": null\n  }\n}')
    ]
    assert doc.media_type == "application/json"


def test_json_records_are_a_table_like_a_csvs() -> None:
    """Regression (#27): an array of records was pretty-printed code, a key per line, that no answer quoted."""
    data = b'{"currencies": [{"code": "EUR", "digits": 2, "name": "Euro"}, {"code": "JPY", "digits": 0, "old": true}]}'
    doc = parse(data, DocumentType.JSON, ParseConfig())

    assert [(b.kind, b.text) for b in doc.blocks] == [
        ("heading", "currencies"),
        ("table", "code | digits | name | old\nEUR | 2 | Euro | \nJPY | 0 |  | true"),
    ]
    bare = parse(b'[{"id": 1, "note": null}, {"id": 2, "note": "second"}]', DocumentType.JSON, ParseConfig())
    assert [(b.kind, b.text) for b in bare.blocks] == [("table", "id | note\n1 | \n2 | second")]
    nested = b'[{"id": 1, "tags": ["a"]}, {"id": 2, "tags": []}]'  # not flat: stays JSON
    assert [b.kind for b in parse(nested, DocumentType.JSON, ParseConfig()).blocks] == ["code"]


def test_json_keeps_non_ascii_text() -> None:
    assert _texts('{"ville": "Köln €"}'.encode(), DocumentType.JSON) == ['{\n  "ville": "Köln €"\n}']


@pytest.mark.parametrize("data", [b'{"a": 1', b"{'single': 'quotes'}", b"[1, 2,]", b"[" * 100_000 + b"]" * 100_000])
def test_invalid_json_is_corrupt(data: bytes) -> None:
    with pytest.raises(InvalidInput) as caught:
        parse(data, DocumentType.JSON, ParseConfig())

    assert caught.value.code == "document_corrupt"
