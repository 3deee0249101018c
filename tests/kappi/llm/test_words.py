"""The word lists the offline answerer and grounding share."""

from __future__ import annotations

from kappi.llm.words import DIGITS_OF, states_value


def test_one_is_no_quantity_but_other_number_words_are() -> None:
    """Regression (#27): "one" counted as a stated quantity, so "any one of them" ranked as answering "how many";
    grounding already read it as a pronoun, and both now read one list."""
    assert not states_value("Any one of the options may be given.")
    assert states_value("Up to two options may be given.")
    assert states_value("It takes half the memory.")
    assert states_value("It listens on port 8080.")
    assert "one" not in DIGITS_OF
    assert DIGITS_OF["twelve"] == "12"
