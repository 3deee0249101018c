"""PDF page text where MuPDF's plain output misreads the page: drawn underscores."""

from __future__ import annotations

import pymupdf

from chonkit.document.parsing import DocumentType, ParseConfig
from chonkit.document.parsing.parser import parse

SIZE = 11.0


def _pdf(draw: list[tuple[str, float, float] | tuple[float, float, float]]) -> bytes:
    """A page drawn in order: ``(text, x, baseline)`` inserts text, ``(x0, x1, y)`` strokes a horizontal line."""
    document = pymupdf.open()  # type: ignore[no-untyped-call]  # pymupdf is untyped
    page = document.new_page()
    for item in draw:
        if isinstance(item[0], str):
            page.insert_text((item[1], item[2]), item[0], fontsize=SIZE, fontname="helv")
        else:
            x0, x1, y = float(item[0]), float(item[1]), float(item[2])
            page.draw_line((x0, y), (x1, y), width=0.4)
    data: bytes = document.tobytes()  # type: ignore[no-untyped-call]
    return data


def _text(data: bytes) -> str:
    return parse(data, DocumentType.PDF, ParseConfig()).text


def _word_width(text: str) -> float:
    return float(pymupdf.get_text_length(text, fontname="helv", fontsize=SIZE))


def test_an_underscore_drawn_as_a_rule_between_words_is_an_underscore() -> None:
    x = 72.0
    draw: list[tuple[str, float, float] | tuple[float, float, float]] = []
    for word in ("glp", "read", "cnfsat"):
        draw.append((word, x, 100.0))
        x += _word_width(word)
        if word != "cnfsat":
            draw.append((x + 0.3, x + 4.0, 100.2))  # TeX's \_ : a rule about a third of an em, on the baseline
            x += 4.3
    draw.append(("reads the file", x + 3.0, 100.0))

    assert "glp_read_cnfsat reads the file" in _text(_pdf(draw))


def test_an_underline_or_a_rule_away_from_the_baseline_is_no_underscore() -> None:
    draw: list[tuple[str, float, float] | tuple[float, float, float]] = [
        ("word", 72.0, 100.0),
        (72.0 + _word_width("word") + 0.3, 72.0 + _word_width("word") + 4.0, 90.0),  # above the line: not at its foot
        ("next", 72.0 + _word_width("word") + 4.3, 100.0),
        ("underlined", 72.0, 130.0),
        (72.0, 72.0 + _word_width("underlined"), 131.0),
        ("text", 72.0 + _word_width("underlined") + 3.0, 130.0),
    ]

    assert "_" not in _text(_pdf(draw))


def test_a_page_without_rules_reads_as_mupdf_reads_it() -> None:
    data = _pdf([("first line", 72.0, 100.0), ("second line", 72.0, 120.0), ("x y", 300.0, 120.0)])
    with pymupdf.open(stream=data, filetype="pdf") as document:  # type: ignore[no-untyped-call]
        plain = document[0].get_text()

    assert _text(data) == plain.strip()


def test_a_word_hyphenated_at_a_line_end_is_joined_but_a_compound_keeps_its_hyphen() -> None:
    data = _pdf(
        [
            ("the di-", 72.0, 100.0),
            ("agonal entries of a well-known well-", 72.0, 114.0),
            ("known CNF-", 72.0, 128.0),
            ("SAT pro-", 72.0, 142.0),
            ("gramming.", 72.0, 156.0),
        ]
    )

    assert _text(data).split("\n") == [
        "the diagonal",
        "entries of a well-known well-",
        "known CNF-",
        "SAT programming.",
    ]


def test_words_of_a_justified_line_stay_on_one_line_and_a_column_apart_stays_apart() -> None:
    x = 72.0
    draw: list[tuple[str, float, float] | tuple[float, float, float]] = []
    for word in ("All", "constraint", "and", "objective", "coefficients"):
        draw.append((word, x, 100.0))
        x += _word_width(word) + 0.9 * SIZE  # word spaces stretched to nearly an em
    draw += [("Section", 72.0, 130.0), ("far column", 72.0 + _word_width("Section") + 4 * SIZE, 130.0)]
    draw += [("2.1", 72.0, 160.0), ("Title", 72.0 + _word_width("2.1") + 1.1 * SIZE, 160.0)]

    lines = _text(_pdf(draw)).split("\n")

    assert lines[0] == "All constraint and objective coefficients"
    assert lines[1:] == ["Section", "far column", "2.1", "Title"]


def test_a_spacing_accent_before_a_letter_is_put_back_on_it() -> None:
    text = _text(_pdf([("by Niklas E\u00b4en and S\u00a8orensson, x \u00b4 y", 72.0, 100.0)]))

    assert text == "by Niklas E\u00e9n and S\u00f6rensson, x \u00b4 y"
