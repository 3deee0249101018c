"""Passages sized for a small model (:func:`kappi.llm.windows.sized`): under the budget nothing changes; over it,
each passage keeps its headings and the sentences the question's terms weigh most, with their neighbours, and its
citation number."""

from __future__ import annotations

from kappi.llm.base import Passage
from kappi.llm.windows import CHARS_PER_TOKEN, GAP, sized


def _passage(text: str, citation: int = 1) -> Passage:
    return Passage(
        collection="Handbook",
        instruction=None,
        document_id=f"doc-{citation}",
        document_name=f"doc-{citation}.md",
        page_start=None,
        page_end=None,
        text=text,
        score=0.8,
        citation=citation,
    )


FILLER = " ".join(f"The cafeteria on floor {n} opens at {n % 12 + 1} o'clock and serves soup." for n in range(40))
ANSWER = "Visitors must wear a red badge at all times."


def test_passages_that_fit_the_budget_are_left_whole() -> None:
    passages = [_passage("# Parking\n\nVisitors park in the north lot.")]
    assert sized(passages, "Where do visitors park?", 100) == passages


def test_a_long_passage_keeps_its_heading_and_the_sentence_that_answers_with_its_neighbours() -> None:
    text = f"# Security\n\n{FILLER} Guests sign in at the desk. {ANSWER} Badges go back to reception. {FILLER}"
    (shown,) = sized([_passage(text)], "What badge do visitors wear?", 60)

    assert shown.citation == 1
    assert shown.text.startswith("# Security")
    assert f"Guests sign in at the desk. {ANSWER} Badges go back to reception." in shown.text
    assert shown.text.endswith(GAP.strip())  # the rest is left out, and the model sees that it is
    assert len(shown.text) <= 60 * CHARS_PER_TOKEN + len("# Security") + 2 * len(GAP)


def test_every_passage_keeps_its_best_sentence_and_the_budget_goes_to_the_best_of_all() -> None:
    first = f"{FILLER} {ANSWER} {FILLER}"
    second = f"{FILLER} Visitors park in the north lot. {FILLER}"
    unrelated = f"{FILLER} {FILLER}"
    shown = sized([_passage(first, 1), _passage(second, 2), _passage(unrelated, 3)], "What badge do visitors wear?", 40)

    assert [p.citation for p in shown] == [1, 2, 3]
    assert ANSWER in shown[0].text
    assert "Visitors park in the north lot." in shown[1].text
    assert shown[2].text  # a passage none of the question's words stand in keeps its first sentence
    assert sum(len(p.text) for p in shown) < len(first) / 2


def test_table_rows_and_code_lines_are_kept_whole() -> None:
    rows = "\n".join(f"| release {n} | name{n} | 200{n} |" for n in range(60))
    text = f"Releases\n\n{rows}\n| release 77 | Birch | 2031 |\n{rows}"
    (shown,) = sized([_passage(text)], "Which release is named Birch?", 30)
    assert "| release 77 | Birch | 2031 |" in shown.text.splitlines()
