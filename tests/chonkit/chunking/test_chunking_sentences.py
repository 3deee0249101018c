"""The sentence scanner: real boundaries found, abbreviations, decimals and URLs left whole."""

from __future__ import annotations

import pytest

from chonkit.document.chunking.sentences import sentence_spans, word_spans


def sentences(text: str) -> list[str]:
    starts, ends = sentence_spans(text, 0, len(text))
    return [text[start:end] for start, end in zip(starts, ends, strict=True)]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The cat sat. The dog ran.", ["The cat sat.", "The dog ran."]),
        ("Is it? Yes! Good.", ["Is it?", "Yes!", "Good."]),
        ("Use tools, e.g. this one. Next.", ["Use tools, e.g. this one.", "Next."]),
        ("Use tools, e.g. This one. Next.", ["Use tools, e.g. This one.", "Next."]),
        ("That is, i.e. the end. Done.", ["That is, i.e. the end.", "Done."]),
        ("Dr. Smith met Mr. Jones. They left.", ["Dr. Smith met Mr. Jones.", "They left."]),
        ("Mrs. Brown and Prof. White came. Fine.", ["Mrs. Brown and Prof. White came.", "Fine."]),
        ("Apples, pears, etc. Are fruit. Yes.", ["Apples, pears, etc. Are fruit.", "Yes."]),
        ("The U.S. Army grew. It did.", ["The U.S. Army grew.", "It did."]),
        ("He got a Ph.D. In Rome. Then.", ["He got a Ph.D. In Rome.", "Then."]),
        ("Pi is 3.14 or so. Next.", ["Pi is 3.14 or so.", "Next."]),
        ("It cost $1,000.50 total. Ok.", ["It cost $1,000.50 total.", "Ok."]),
        ("See https://x.y/z.html for it. Next.", ["See https://x.y/z.html for it.", "Next."]),
        ("Read https://x.y/z.html. Then go.", ["Read https://x.y/z.html.", "Then go."]),
        ("Mail a.b@c.d.org today. Ok.", ["Mail a.b@c.d.org today.", "Ok."]),
        ("Wait... what now. Go.", ["Wait... what now.", "Go."]),
        ("He paused... Then spoke.", ["He paused...", "Then spoke."]),
        ("He paused\u2026 Then spoke.", ["He paused\u2026", "Then spoke."]),
        ('He said "Stop." Then left.', ['He said "Stop."', "Then left."]),
        ("He said \u201cStop.\u201d Then left.", ["He said \u201cStop.\u201d", "Then left."]),
        ("It was fine (mostly.) Next one.", ["It was fine (mostly.)", "Next one."]),
        ("As Smith et al. Showed it. Ok.", ["As Smith et al. Showed it.", "Ok."]),
        ("See Fig. 3 and Eq. 2 here. Ok.", ["See Fig. 3 and Eq. 2 here.", "Ok."]),
        ("Item No. 5 is here. I said no. Then left.", ["Item No. 5 is here.", "I said no.", "Then left."]),
        ("J. R. R. Tolkien wrote it. Yes.", ["J. R. R. Tolkien wrote it.", "Yes."]),
        ("(Dr. Who) is on. Watch.", ["(Dr. Who) is on.", "Watch."]),
        ("Vitamin D. Not C.", ["Vitamin D. Not C."]),
        ("In 2020. Then 2021.", ["In 2020.", "Then 2021."]),
        ("First line\nsecond line. Next.", ["First line\nsecond line.", "Next."]),
        ("A heading\n\nA paragraph.", ["A heading", "A paragraph."]),
        ("Ends here.\n\nwork_mem (integer)", ["Ends here.", "work_mem (integer)"]),
        ("See e.g.\n \nlowercase block.", ["See e.g.", "lowercase block."]),
        ("Trailing spaces  \n \n  Next part", ["Trailing spaces", "Next part"]),
        ("  \n Padded text.  ", ["Padded text."]),
        ("No terminal punctuation", ["No terminal punctuation"]),
        (
            "\u4eca\u65e5\u306f\u6674\u308c\u3002\u672c\u5f53\uff1f\u300c\u306f\u3044\u3002\u300d\u660e\u65e5\u3002",
            [
                "\u4eca\u65e5\u306f\u6674\u308c\u3002",
                "\u672c\u5f53\uff1f",
                "\u300c\u306f\u3044\u3002\u300d",
                "\u660e\u65e5\u3002",
            ],
        ),
        ("\u6674\u308c\u3002 Then English. Ok.", ["\u6674\u308c\u3002", "Then English.", "Ok."]),
        ("", []),
        (" \n\t ", []),
    ],
)
def test_sentence_boundaries(text: str, expected: list[str]) -> None:
    assert sentences(text) == expected


def test_spans_are_offsets_into_the_whole_text_and_respect_the_window() -> None:
    text = "Skip me. The cat sat. The dog ran. Skip me too."
    start, end = text.index("The cat"), text.index(" Skip me too")
    starts, ends = sentence_spans(text, start, end)
    assert list(zip(starts, ends, strict=True)) == [(9, 21), (22, 34)]
    assert [text[a:b] for a, b in zip(starts, ends, strict=True)] == ["The cat sat.", "The dog ran."]


def test_words_are_whitespace_separated_runs() -> None:
    text = "  one two\n\nthree\tfour. "
    starts, ends = word_spans(text, 0, len(text))
    assert [text[a:b] for a, b in zip(starts, ends, strict=True)] == ["one", "two", "three", "four."]
    assert starts == [2, 6, 11, 17]
