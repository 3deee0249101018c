"""The answer benchmark's judging, on hand-made answers: facts found as whole words, refusals read from the
answer's opening, citations from the gold document or not, and the shares a provider's answers add up to."""

from __future__ import annotations

import json
from typing import Any

import pytest

from bench import answer_bench as bench
from bench.answer_bench import Question, check_facts, is_refusal, marked_citations, mentions, score, states_facts, tally
from bench.report import met

GLOB = Question(
    id="mime-glob-weight",
    question="What is the default weight of a glob pattern, and what is the maximum?",
    facts=(("50",), ("100",)),
    gold=("shared-mime-info-spec.html",),
)
UNANSWERABLE = Question(
    id="no-pg-checkpoint-timeout", question="What is the default checkpoint_timeout?", facts=(), gold=()
)
SPEC, PG = "shared-mime-info-spec.html", "postgresql-15-runtime-config-resource.html"


@pytest.mark.parametrize(
    ("text", "variant", "found"),
    [
        ("The default is 100 connections.", "100", True),
        ("The default is one thousand files (1000).", "100", False),
        ("It defaults to 128MB.", "128", False),
        ("It defaults to 128MB.", "128mb", True),
        ("The default is **TLSv1.2**.", "tlsv1.2", True),
        ("Uses `json.tool` from the shell", "json.tool", True),
        ("a range of \u22121000 to 1000", "-1000", True),
        ("Three workers at most [3].", "3", False),
        ("The default is 3 [1].", "3", True),
        ("version 3.95 added it", "3.9", False),
    ],
)
def test_a_fact_counts_only_as_whole_words_outside_citation_marks(text: str, variant: str, found: bool) -> None:
    assert mentions(text, variant) is found


def test_every_fact_group_must_be_stated_and_any_variant_of_a_group_will_do() -> None:
    assert states_facts("The default weight is 50; the maximum is 100.", GLOB.facts)
    assert not states_facts("The default weight is 50.", GLOB.facts)
    facts = (("one minute", "1min"),)
    assert states_facts("autovacuum_naptime defaults to 1min.", facts)
    assert not states_facts("anything at all", ())  # an unanswerable question has no fact to state


@pytest.mark.parametrize(
    "answer",
    [
        "I don't know.",
        "The provided sources do not mention the default value of checkpoint_timeout.",
        "I found nothing in the documents you have access to that matches your question.",
        "No passage in the documents you have access to answers this question.",
        "None of your documents uses the words of your question; these are the closest passages I found:\n- x [1]",
        "The context doesn\u2019t say which port http.server uses.",
        "",
    ],
)
def test_refusals(answer: str) -> None:
    assert is_refusal(answer)


@pytest.mark.parametrize(
    "answer",
    [
        "The default weight is 50 and the maximum is 100 [1].",
        # a quoted passage may itself say "does not specify": only the answer's opening counts
        "Here is what I found in your documents:\n- This value does not specify a directory. [2]",
        "checkpoint_timeout defaults to 5min [1].",  # an invented answer is not a refusal
    ],
)
def test_answers_that_are_not_refusals(answer: str) -> None:
    assert not is_refusal(answer)


def test_citation_marks_are_read_in_order_each_once() -> None:
    assert marked_citations("Fifty [2], and at most 100 [1][2]. See [12].") == [2, 1, 12]


def test_a_right_answer_with_one_off_topic_citation() -> None:
    scored = score(GLOB, "The default weight is 50, the maximum 100 [1][2].", [SPEC, PG])
    assert scored.correct
    assert scored.gold_cited
    assert not scored.refused
    assert scored.off_topic == 1


def test_an_answer_from_the_wrong_document_is_neither_correct_nor_gold_cited() -> None:
    scored = score(GLOB, "Here is what I found in your documents:\n- ASN.1 sizes are limited [1].", [PG, PG])
    assert not scored.correct
    assert not scored.gold_cited
    assert scored.off_topic == 2


def test_an_unanswerable_question_counts_refusals_and_no_off_topic_citations() -> None:
    refused = score(UNANSWERABLE, "The sources do not say.", [PG])
    invented = score(UNANSWERABLE, "It defaults to 5min [1].", [PG])
    assert refused.refused
    assert not invented.refused
    assert refused.off_topic == invented.off_topic == 0


def test_the_tally_gives_shares_over_answerable_questions_and_refusals_over_unanswerable_ones() -> None:
    scores = [
        score(GLOB, "50 and 100 [1]", [SPEC]),
        score(GLOB, "50 and 100 [1][2]", [SPEC, PG, PG]),
        score(GLOB, "only 50 [1]", [PG]),
        score(GLOB, "I don't know.", []),
        score(UNANSWERABLE, "I don't know.", []),
        score(UNANSWERABLE, "5min [1]", [PG]),
    ]
    shares = tally(scores).shares()
    assert shares["correct"] == 0.5
    assert shares["gold_cited"] == 0.5
    assert shares["off_topic"] == 0.6  # 3 of the 5 citations on answerable questions
    assert shares["refusals"] == 0.5
    assert shares["refused_answerable"] == 0.25


def test_a_provider_with_no_unanswerable_question_has_no_refusal_share() -> None:
    assert tally([score(GLOB, "50, 100", [SPEC])]).shares()["refusals"] is None


def test_check_facts_names_questions_the_corpus_contradicts() -> None:
    texts = {SPEC: "The default weight value is 50, and the maximum is 100.", PG: "checkpoint_timeout is 5min."}
    wrong_gold = Question(id="wrong", question="?", facts=(("75",),), gold=(SPEC,))
    answered = Question(id="answered", question="?", facts=(), gold=(), absent=("checkpoint_timeout",))
    assert check_facts([GLOB, wrong_gold, answered], texts) == ["wrong", "answered"]


def test_summary_rows_hold_the_default_offline_provider_to_the_targets() -> None:
    providers: dict[str, dict[str, Any]] = {
        "extractive": {"correct": 0.6, "gold_cited": 1.0, "off_topic": 0.7, "refusals": 0.0},
        "local": {
            "correct": 0.85,
            "gold_cited": 0.95,
            "off_topic": 0.1,
            "refusals": 0.9,
            "raw": {"ttft_vs_raw_p50": 1.04, "ragu_ttft_ms_p50": 5200.0, "raw_ttft_ms_p50": 5000.0},
        },
        "naive": {"correct": 0.8, "gold_cited": 0.1, "off_topic": 0.5, "refusals": 0.1},
    }
    rows = {row["metric"]: row for row in bench.summary_rows(providers)}
    assert rows["extractive correct"].get("target") is None  # a model runs, so it is the one held to the targets
    assert met(rows["local correct"])
    assert met(rows["local off_topic"])
    assert met(rows["local ttft vs raw llama.cpp (same prompt, p50 of pairs)"])
    assert rows["local correct vs naive peer"]["value"] == pytest.approx(0.85 / 0.8, abs=1e-3)
    assert met(rows["local correct vs naive peer"])


def test_without_a_model_extractive_is_held_to_the_targets() -> None:
    rows = {row["metric"]: row for row in bench.summary_rows({"extractive": {"correct": 0.6, "off_topic": 0.7}})}
    assert met(rows["extractive correct"]) is False
    assert met(rows["extractive off_topic"]) is False


def test_the_question_set_is_complete_and_well_formed() -> None:
    """At least 40 answerable and 10 unanswerable questions, ids unique, each gold document in the corpus, and
    exactly 10 marked for ``--quick`` (answerable and unanswerable both)."""
    questions = bench.load_questions()
    answerable = [q for q in questions if q.answerable]
    assert len(answerable) >= 40
    assert len(questions) - len(answerable) >= 10
    assert len({q.id for q in questions}) == len(questions)
    pages = {name for package in bench.CORPUS for name in package.pages.values()}
    assert all(set(q.gold) <= pages and q.gold for q in answerable)
    assert all(q.absent for q in questions if not q.answerable)
    quick = bench.load_questions(quick=True)
    assert len(quick) == 10
    assert {q.answerable for q in quick} == {True, False}
    raw = json.loads(bench.QUESTIONS.read_text(encoding="utf-8"))
    assert all(q.get("source") for q in raw["answerable"])


def test_rescore_judges_stored_answers_again_even_those_stored_without_citations() -> None:
    saved = {
        "providers": {
            "naive": {
                "answers": [
                    {"id": GLOB.id, "answer": "50, at most 100 [1]", "cited": [SPEC]},
                    {"id": UNANSWERABLE.id, "answer": "I don't know."},  # empty lists are not stored
                ]
            }
        }
    }
    result = bench.rescore(saved, [GLOB, UNANSWERABLE])
    naive = result["providers"]["naive"]
    assert (naive["correct"], naive["gold_cited"], naive["refusals"]) == (1.0, 1.0, 1.0)
    assert [row["metric"] for row in result["summary"]][:2] == ["naive correct", "naive gold_cited"]


def test_the_generation_rate_counts_from_the_first_token() -> None:
    assert bench.generation_rate(101, total_ms=12_000, prompt_ms=2_000) == 10.0
    assert bench.generation_rate(1, total_ms=12_000, prompt_ms=2_000) is None  # one token has no rate
    assert bench.generation_rate(50, total_ms=12_000, prompt_ms=None) is None
