"""The answer benchmark's pure parts: the split files read and checked, the fact check, facts found as whole words,
refusals read from the answer's opening, wrong-but-cited answers, the tallies per kind, the records and the
report's rows."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench import answer_bench as bench
from bench.answer_bench import (
    Question,
    by_kind,
    check_facts,
    is_refusal,
    marked_citations,
    mentions,
    score,
    states_facts,
    tally,
)
from bench.answer_corpus import KINDS, SPLITS_DIR, load_splits, quick_questions, spread
from bench.report import met

SPEC, PG = "shared-mime-info-spec.html", "postgresql-15-runtime-config-resource.html"
GLOB = Question(
    id="mime-glob-weight",
    question="What is the default weight of a glob pattern, and what is the maximum?",
    facts=(("50",), ("100",)),
    gold=(SPEC,),
    kind="html",
)
UNANSWERABLE = Question(
    id="no-pg-checkpoint-timeout",
    question="What is the default checkpoint_timeout?",
    facts=(),
    gold=(),
    absent=("checkpoint_timeout",),
    kind="html",
)


# ---------------------------------------------------------------------------------------------------------------
# Matching and judging


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
    assert states_facts("autovacuum_naptime defaults to 1min.", (("one minute", "1min"),))
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
    assert (scored.correct, scored.gold_cited, scored.refused, scored.off_topic) == (True, True, False, 1)
    assert not scored.wrong_but_cited  # answerable: never wrong-but-cited, whatever it says


def test_an_answer_from_the_wrong_document_is_neither_correct_nor_gold_cited() -> None:
    scored = score(GLOB, "Here is what I found in your documents:\n- ASN.1 sizes are limited [1].", [PG, PG])
    assert not scored.correct
    assert not scored.gold_cited
    assert scored.off_topic == 2


@pytest.mark.parametrize(
    ("answer", "cited", "wrong_but_cited"),
    [
        ("It defaults to 5min [1].", [PG], True),  # invented, and dressed up with a source
        ("It defaults to 5min.", [], False),  # invented, but nothing claims a source: not declined either
        ("The sources do not say.", [PG], False),  # declined, even if passages are shown
        ("None of your documents uses the words of your question; the closest passages:\n- x [1]", [PG], False),
    ],
)
def test_wrong_but_cited_is_an_unanswerable_question_answered_with_citations(
    answer: str, cited: list[str], wrong_but_cited: bool
) -> None:
    scored = score(UNANSWERABLE, answer, cited)
    assert scored.wrong_but_cited is wrong_but_cited
    assert scored.off_topic == 0


def test_the_tally_gives_shares_over_answerable_questions_and_declines_over_unanswerable_ones() -> None:
    scores = [
        score(GLOB, "50 and 100 [1]", [SPEC]),
        score(GLOB, "50 and 100 [1][2]", [SPEC, PG, PG]),
        score(GLOB, "only 50 [1]", [PG]),
        score(GLOB, "I don't know.", []),
        score(UNANSWERABLE, "I don't know.", []),
        score(UNANSWERABLE, "5min [1]", [PG]),
        score(UNANSWERABLE, "5min", []),
    ]
    shares = tally(scores).shares()
    assert shares["facts_right"] == 0.5
    assert shares["gold_cited"] == 0.5
    assert shares["off_topic"] == 0.6  # 3 of the 5 citations on answerable questions
    assert shares["citations_per_answer"] == 1.25
    assert shares["answerable_refused"] == 0.25
    assert shares["declined"] == pytest.approx(0.3333)
    assert shares["wrong_but_cited"] == 1
    assert shares["wrong_but_cited_share"] == pytest.approx(0.3333)


def test_a_provider_with_no_unanswerable_question_has_no_decline_share() -> None:
    shares = tally([score(GLOB, "50, 100", [SPEC])]).shares()
    assert shares["declined"] is None
    assert shares["wrong_but_cited_share"] is None


def test_tallies_per_kind_follow_the_questions_documents() -> None:
    pdf = Question(id="pdf-q", question="?", facts=(("7",),), gold=("a.pdf",), kind="pdf")
    table = Question(id="table-q", question="?", facts=(("8",),), gold=("b.csv",), kind="table")
    kinds = by_kind(
        [score(table, "8 [1]", ["b.csv"]), score(pdf, "7 [1]", ["a.pdf"]), score(pdf, "6", []), score(GLOB, "", [])]
    )
    assert list(kinds) == ["pdf", "html", "table"]  # the kinds' fixed order, not the answers'
    assert kinds["pdf"].shares()["facts_right"] == 0.5
    assert kinds["table"].shares()["facts_right"] == 1.0
    assert kinds["html"].shares()["answerable_refused"] == 1.0


def test_p95_is_the_nearest_rank() -> None:
    assert bench.p95([float(n) for n in range(1, 101)]) == 95.0
    assert bench.p95([3.0, 1.0]) == 3.0
    assert bench.p95([]) is None


# ---------------------------------------------------------------------------------------------------------------
# The split files


def _document(name: str, kind: str = "html", *, path: str | None = None) -> dict[str, Any]:
    return {
        "name": name,
        "kind": kind,
        "generator": "sphinx",
        "source": "debian",
        "package": "pkg",
        "version": "1.0",
        "path": path or f"usr/share/doc/pkg/{name}",
    }


def _answerable(qid: str, gold: str, facts: list[list[str]] | None = None) -> dict[str, Any]:
    return {"id": qid, "question": "?", "facts": facts or [["42"]], "gold": [gold], "source": "s"}


def _unanswerable(qid: str, near: str, absent: list[str]) -> dict[str, Any]:
    return {"id": qid, "question": "?", "near": near, "absent": absent, "why": "w"}


def _write(root: Path, split: str, name: str, content: dict[str, Any] | str) -> None:
    folder = root / split
    folder.mkdir(parents=True, exist_ok=True)
    text = content if isinstance(content, str) else json.dumps(content)
    (folder / name).write_text(text, encoding="utf-8")


def test_split_files_give_each_question_its_split_and_its_documents_kind(tmp_path: Path) -> None:
    _write(
        tmp_path,
        "dev",
        "a.json",
        {
            "documents": [_document("a.html"), _document("b.pdf", "pdf")],
            "answerable": [_answerable("a1", "a.html"), _answerable("b1", "b.pdf")],
            "unanswerable": [_unanswerable("u1", "b.pdf", ["zebra"])],
        },
    )
    _write(
        tmp_path,
        "test",
        "t.json",
        {"documents": [_document("t.csv", "table")], "answerable": [_answerable("t1", "t.csv")]},
    )
    corpus = load_splits(tmp_path)
    assert corpus.problems == ()
    assert corpus.rejected == {}
    assert [(q.id, q.split, q.kind, q.answerable) for q in corpus.questions] == [
        ("a1", "dev", "html", True),
        ("b1", "dev", "pdf", True),
        ("u1", "dev", "pdf", False),
        ("t1", "test", "table", True),
    ]
    assert [d.name for d in corpus.split("test").documents] == ["t.csv"]


def test_what_a_run_cannot_use_is_set_aside_with_the_reason_not_raised(tmp_path: Path) -> None:
    _write(
        tmp_path,
        "dev",
        "a.json",
        {
            "documents": [_document("a.html"), _document("shared.html", path="usr/share/doc/pkg/same.html")],
            "answerable": [
                _answerable("dup", "a.html"),
                _answerable("no-gold", "missing.html"),
                _answerable("empty-group", "a.html", [["42"], []]),
            ],
            "unanswerable": [_unanswerable("no-absent", "a.html", []), {"id": "broken", "question": "?"}],
        },
    )
    _write(tmp_path, "dev", "b.json", {"documents": [], "answerable": [_answerable("dup", "a.html")]})
    _write(tmp_path, "dev", "c.json", "{ not json")
    _write(
        tmp_path,
        "test",
        "t.json",
        {
            # the same name in both splits, and dev's file under another name: neither may be a test document
            "documents": [_document("a.html"), _document("copy.html", path="usr/share/doc/pkg/same.html")],
            "answerable": [_answerable("on-dev-doc", "a.html"), _answerable("on-copy", "copy.html")],
        },
    )
    corpus = load_splits(tmp_path)
    assert corpus.questions == ()
    assert set(corpus.rejected) == {"dup", "no-gold", "empty-group", "no-absent", "broken", "on-dev-doc", "on-copy"}
    assert "twice" in corpus.rejected["dup"]
    assert "another split" in corpus.rejected["on-dev-doc"]
    assert "same file as shared.html" in corpus.rejected["on-copy"]
    assert any("c.json left out" in p for p in corpus.problems)
    assert any("a.html is in two splits" in p for p in corpus.problems)
    assert [d.name for d in corpus.documents] == ["a.html", "shared.html"]


def test_check_facts_names_the_questions_the_corpus_contradicts_and_why() -> None:
    texts = {SPEC: "The default weight value is 50, and the maximum is 100.", PG: "checkpoint_timeout is 5min."}
    wrong_gold = Question(id="wrong", question="?", facts=(("75", "seventy-five"), ("50",)), gold=(SPEC,))
    unread = Question(id="unread", question="?", facts=(("1",),), gold=("gone.pdf",))
    wrong = check_facts([GLOB, wrong_gold, UNANSWERABLE, unread], texts)
    assert list(wrong) == ["wrong", "no-pg-checkpoint-timeout", "unread"]
    assert wrong["wrong"] == f"{SPEC} does not state 75 | seventy-five"
    assert wrong["no-pg-checkpoint-timeout"] == f"absent word(s) found: 'checkpoint_timeout' in {PG}"
    assert "could not be fetched" in wrong["unread"]


def test_a_question_the_fact_check_rejects_is_left_out_and_reported_not_a_crash(tmp_path: Path) -> None:
    """Regression: a single wrong question used to stop the whole run (``RuntimeError`` before anything ran)."""
    _write(
        tmp_path,
        "dev",
        "a.json",
        {
            "documents": [_document("a.html")],
            "answerable": [_answerable("ok", "a.html"), _answerable("bad", "a.html", [["7"]])],
        },
    )
    corpus = load_splits(tmp_path)
    kept = corpus.without(check_facts(corpus.questions, {"a.html": "The answer is 42."}))
    assert [q.id for q in kept.questions] == ["ok"]
    assert kept.rejected == {"bad": "a.html does not state 7"}


def test_a_quick_run_takes_a_few_questions_of_every_split() -> None:
    questions = [
        Question(id=f"{split}-{n}", question="?", facts=(("1",),) if n < 10 else (), gold=("x",), split=split)
        for split in ("dev", "test")
        for n in range(13)
    ]
    chosen = quick_questions(questions, answerable=4, unanswerable=2)
    assert [q.id for q in chosen] == [
        *("dev-0", "dev-3", "dev-6", "dev-9", "dev-10", "dev-12"),
        *("test-0", "test-3", "test-6", "test-9", "test-10", "test-12"),
    ]
    assert spread(3, 5) == [0, 1, 2]
    assert spread(3, 0) == []


def test_the_split_files_load_without_problems_and_keep_dev_and_test_apart() -> None:
    corpus = load_splits(SPLITS_DIR)
    assert corpus.problems == ()
    for split in ("dev", "test"):
        assert corpus.split(split).documents, split
        assert corpus.split(split).questions, split
    dev = {d.name for d in corpus.split("dev").documents}
    assert all(set(q.gold) <= dev for q in corpus.split("dev").questions)
    assert all(q.kind in KINDS for q in corpus.questions)


# ---------------------------------------------------------------------------------------------------------------
# Records and the report


def _passage(n: int, document: str) -> dict[str, Any]:
    return {
        "citation": n,
        "collection": "Answer_bench_dev",
        "vector_provider": "pgvector",
        "document_id": f"id-{document}",
        "document_name": document,
        "page_start": None,
        "page_end": None,
        "text": f"passage {n}",
        "score": 0.5,
    }


def test_a_record_keeps_every_passage_the_response_exposed_in_citation_order() -> None:
    body: dict[str, Any] = {
        "answer": "50 and 100 [2].",
        "citations": [_passage(2, SPEC)],
        "also_retrieved": [_passage(3, PG), _passage(1, PG)],
    }
    passages = bench.passages_of(body)
    assert [(p["citation"], p["cited"]) for p in passages] == [(1, False), (2, True), (3, False)]
    asked = bench.Asked(
        id=GLOB.id, answer=body["answer"], cited=[SPEC], citation_numbers=[2], passages=passages, total_ms=12.0
    )
    record = bench.record("extractive", "dev", GLOB, asked, score(GLOB, asked.answer, asked.cited))
    assert {k: record[k] for k in ("split", "provider", "id", "question", "seconds")} == {
        "split": "dev",
        "provider": "extractive",
        "id": GLOB.id,
        "question": GLOB.question,
        "seconds": 0.012,
    }
    assert record["citations"] == [{"citation": 2, "document_name": SPEC}]
    assert record["passages"][1]["text"] == "passage 2"
    assert record["judged"]["facts_right"]
    again = bench.asked_from(json.loads(json.dumps(record)))
    assert (again.answer, again.cited, again.citation_numbers, again.total_ms) == (asked.answer, [SPEC], [2], 12.0)


def test_rescore_judges_the_records_again() -> None:
    asked = [
        bench.Asked(id=GLOB.id, answer="50, at most 100 [1]", cited=[SPEC], citation_numbers=[1]),
        bench.Asked(id=UNANSWERABLE.id, answer="5min [1]", cited=[PG], citation_numbers=[1]),
    ]
    _, records = bench.summarise("naive", "dev", [GLOB, UNANSWERABLE], asked)
    result = bench.rescore({"records": records}, [GLOB, UNANSWERABLE])
    naive = result["results"]["dev"]["naive"]
    assert (naive["facts_right"], naive["gold_cited"], naive["declined"], naive["wrong_but_cited"]) == (
        1.0,
        1.0,
        0.0,
        1,
    )
    assert naive["kinds"]["html"]["facts_right"] == 1.0


def _provider(facts_right: float, right: int, wrong_but_cited: int = 0, **kinds: float) -> dict[str, Any]:
    return {
        "facts_right": facts_right,
        "gold_cited": 0.95,
        "declined": 0.9,
        "answerable_refused": 0.02,
        "wrong_but_cited": wrong_but_cited,
        "wrong_but_cited_share": wrong_but_cited / 10,
        "counts": {"correct": right},
        "kinds": {kind: {"facts_right": v} for kind, v in kinds.items()},
    }


def test_the_bars_are_held_on_the_test_split_only() -> None:
    results = {
        split: {
            "extractive": _provider(0.8, 80, pdf=0.7, table=0.6),
            "local": _provider(0.6, 60, wrong_but_cited=2),
            "naive": _provider(0.5, 50, wrong_but_cited=0),
        }
        for split in ("dev", "test")
    }
    rows = {row["metric"]: row for row in bench.summary_rows(results)}
    assert all(row.get("target") is None for name, row in rows.items() if name.startswith("dev "))
    assert met(rows["test extractive facts_right"])
    assert met(rows["test extractive answerable_refused"])
    assert rows["test local facts_right"].get("target") is None  # the figures' bars are extractive's
    assert met(rows["test extractive weakest kind's facts_right (table)"]) is False
    assert met(rows["test local wrong-but-cited (unanswerable answered with citations)"]) is False
    assert met(rows["test naive wrong-but-cited (unanswerable answered with citations)"])
    assert rows["test local facts right vs naive peer (questions more)"]["value"] == 10
    assert met(rows["test local facts right vs naive peer (questions more)"])


def test_a_tie_with_the_naive_peer_does_not_meet_the_bar() -> None:
    rows = bench.summary_rows({"test": {"local": _provider(0.5, 50), "naive": _provider(0.5, 50)}})
    tie = next(r for r in rows if r["metric"] == "test local facts right vs naive peer (questions more)")
    assert met(tie) is False


def test_the_generation_rate_counts_from_the_first_token() -> None:
    assert bench.generation_rate(101, total_ms=12_000, prompt_ms=2_000) == 10.0
    assert bench.generation_rate(1, total_ms=12_000, prompt_ms=2_000) is None  # one token has no rate
    assert bench.generation_rate(50, total_ms=12_000, prompt_ms=None) is None
