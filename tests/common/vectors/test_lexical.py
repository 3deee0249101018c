"""The shared analyser: tokens, stop words, stems and ids as bm25s makes them, and BM25's weights."""

from __future__ import annotations

import subprocess
import sys

import pytest

from common.vectors import lexical


def test_analyse_keeps_words_of_two_letters_or_more_lowercased_stemmed_without_stop_words() -> None:
    assert lexical.analyse("The Running dogs, a cat and I: studies!") == ["run", "dog", "cat", "studi"]


def test_unicode_words_are_tokens() -> None:
    assert lexical.analyse("Élan vital über café") == ["élan", "vital", "über", "café"]


def test_text_of_stop_words_and_punctuation_has_no_terms() -> None:
    assert lexical.analyse("the and, of -- a?!") == []
    assert lexical.query_terms("The and of.").ids == []
    assert lexical.document_terms("it is").length == 0


def test_term_ids_are_stable_across_processes_and_inside_the_term_space() -> None:
    here = lexical.term_id("protein")
    code = "from common.vectors.lexical import term_id; print(term_id('protein'))"
    there = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout  # noqa: S603
    assert int(there) == here
    assert 1 <= here < lexical.TERM_SPACE
    assert lexical.term_id("protein") != lexical.term_id("proteins") or lexical.analyse("proteins") == ["protein"]


def test_document_terms_count_each_term_and_the_length() -> None:
    terms = lexical.document_terms("cell cells membrane of the cell")
    cell, membrane = lexical.term_id("cell"), lexical.term_id("membran")
    assert dict(zip(terms.ids, terms.tfs, strict=True)) == {cell: 3, membrane: 1}
    assert terms.ids == sorted(terms.ids)
    assert terms.length == 4


def test_query_terms_weigh_a_repeated_word_twice() -> None:
    terms = lexical.query_terms("cell cell membrane")
    assert dict(zip(terms.ids, terms.tfs, strict=True)) == {lexical.term_id("cell"): 2, lexical.term_id("membran"): 1}


def test_bm25_weights_saturate_and_penalise_long_chunks() -> None:
    k1, b = lexical.K1, lexical.B
    [one] = lexical.bm25_weights([1], 10, 10.0)
    assert one == pytest.approx(1 / (1 + k1))
    [longer] = lexical.bm25_weights([1], 20, 10.0)
    assert longer == pytest.approx(1 / (1 + k1 * (1 - b + b * 2)))
    weights = lexical.bm25_weights([1, 2, 8], 10, 10.0)
    assert weights == sorted(weights)
    assert weights[-1] < 1.0


def test_a_chunk_with_too_many_distinct_terms_keeps_its_most_frequent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lexical, "MAX_TERMS", 2)
    terms = lexical.document_terms("alpha alpha beta beta beta gamma")
    assert dict(zip(terms.ids, terms.tfs, strict=True)) == {lexical.term_id("beta"): 3, lexical.term_id("alpha"): 2}
    assert terms.length == 6


def test_analysis_matches_bm25s_tokenizer() -> None:
    """The reference the issue measures against: these stems are what ``bm25s.tokenize(..., stopwords="en",
    stemmer=Stemmer.Stemmer("english"))`` 0.3.16 returns for the same text."""
    text = "Antibodies against the SARS-CoV-2 spike protein neutralise infection in 95% of mice; it's rare."
    bm25s_stems = ["antibodi", "against", "sar", "cov", "spike", "protein", "neutralis", "infect", "95", "mice", "rare"]
    assert lexical.analyse(text) == bm25s_stems
