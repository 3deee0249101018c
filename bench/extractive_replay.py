"""The offline answerer replayed on the passages a bench run recorded: seconds per run, no server, no model.

Run from the repository root::

    python -m bench.extractive_replay RESULT.json [--questions FILE.json ...] [--show wrong|all]

``RESULT.json`` is an answer-bench result: its ``records`` (one per question and provider, each with the passages
the answer saw) or, from older runs, its extractive provider's ``answers`` (passages under ``extra``). The
questions come from the dev split's files by default (``bench/answers/splits/dev/*.json``; the held-out test split
is never read here), or from ``--questions``. Each recorded question is answered again with today's
:func:`kappi.llm.extractive.extract_answer` and judged with the answer bench's own :func:`bench.answer_bench.score`;
the citations are the documents of the passages its ``[n]`` marks name. This is how the answerer's thresholds are
chosen: change one, replay, read what it does to the whole split.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.answer_bench import CITATION_MARK, QUESTIONS, Question, Scored, score
from common.embedders.registry import default_registry
from kappi.llm import extractive
from kappi.llm.base import Passage
from kappi.llm.extractive import Embed
from kappi.llm.registry import local_embed

DEV = Path(__file__).resolve().parent / "answers" / "splits" / "dev"


@dataclass(frozen=True)
class Asked:
    """A recorded question: what it asked, and the passages the answerer was given."""

    id: str
    question: str
    passages: tuple[Passage, ...]


def load_questions(paths: Iterable[Path]) -> tuple[dict[str, Question], dict[str, str]]:
    """Every question of these files by id, and each question's document kind (its gold or near document's)."""
    questions: dict[str, Question] = {}
    kinds: dict[str, str] = {}
    for path in paths:
        raw = json.loads(path.read_text(encoding="utf-8"))
        kind_of = {d["name"]: d.get("kind", "?") for d in raw.get("documents", [])}
        for q in raw.get("answerable", []):
            facts = tuple(tuple(group) for group in q["facts"])
            questions[q["id"]] = Question(q["id"], q["question"], facts, tuple(q["gold"]))
            kinds[q["id"]] = kind_of.get(q["gold"][0], "html") if q["gold"] else "?"
        for q in raw.get("unanswerable", []):
            questions[q["id"]] = Question(q["id"], q["question"], (), (), absent=tuple(q.get("absent", ())))
            kinds[q["id"]] = kind_of.get(q.get("near", ""), "html")
    return questions, kinds


def _passage(raw: dict[str, Any]) -> Passage:
    return Passage(
        collection=raw.get("collection") or "",
        instruction=raw.get("instruction"),
        document_id=raw.get("document_id") or raw.get("document_name") or "",
        document_name=raw.get("document_name"),
        page_start=raw.get("page_start"),
        page_end=raw.get("page_end"),
        text=raw["text"],
        score=float(raw.get("score") or 0.0),
        citation=int(raw["citation"]),
    )


def recorded(result: dict[str, Any], questions: dict[str, Question]) -> list[Asked]:
    """The extractive provider's recorded questions with their passages (records, else the older answers)."""
    rows: list[dict[str, Any]] = [r for r in result.get("records", []) if r.get("provider") == "extractive"]
    if not rows:
        answers = result.get("providers", {}).get("extractive", {}).get("answers", [])
        rows = [{"id": a["id"], "passages": a.get("extra", {}).get("passages", [])} for a in answers]
    asked = []
    for row in rows:
        question = questions.get(row["id"])
        if question is not None:
            passages = tuple(sorted((_passage(p) for p in row.get("passages") or []), key=lambda p: p.citation))
            asked.append(Asked(row["id"], row.get("question") or question.question, passages))
    return asked


def cited_documents(answer: str, passages: Sequence[Passage]) -> list[str]:
    """The document of each passage the answer's ``[n]`` marks name."""
    by_number = {p.citation: p.document_name or p.document_id for p in passages}
    numbers = dict.fromkeys(int(n) for n in CITATION_MARK.findall(answer))
    return [by_number[n] for n in numbers if n in by_number]


@dataclass(frozen=True)
class Replayed:
    asked: Asked
    answer: str
    scored: Scored
    ms: float


def replay(asked: Sequence[Asked], questions: dict[str, Question], embed: Embed | None = None) -> list[Replayed]:
    """Each question answered again, cold (no passage's analysis cached from the question before); with ``embed``,
    as the provider answers with an embedder (:func:`kappi.llm.extractive.checked_answer`)."""
    out = []
    for one in asked:
        extractive.analysed.cache_clear()
        started = time.perf_counter()
        if embed is None:
            pieces = extractive.extract_answer(one.question, one.passages)
        else:
            pieces = asyncio.run(extractive.checked_answer(one.question, one.passages, embed))
        answer = "".join(pieces)
        ms = (time.perf_counter() - started) * 1000
        out.append(Replayed(one, answer, score(questions[one.id], answer, cited_documents(answer, one.passages)), ms))
    return out


def figures(replayed: Sequence[Replayed]) -> dict[str, Any]:
    """The issue's bars: facts right, gold cited and answerable refused over answerable questions; declined and
    wrong-but-cited over unanswerable ones."""
    answerable = [r.scored for r in replayed if r.scored.answerable]
    unanswerable = [r.scored for r in replayed if not r.scored.answerable]

    def share(part: int, whole: int) -> float | None:
        return round(part / whole, 3) if whole else None

    return {
        "answerable": len(answerable),
        "facts_right": share(sum(s.correct for s in answerable), len(answerable)),
        "gold_cited": share(sum(s.gold_cited for s in answerable), len(answerable)),
        "answerable_refused": share(sum(s.refused for s in answerable), len(answerable)),
        "unanswerable": len(unanswerable),
        "declined": share(sum(s.refused for s in unanswerable), len(unanswerable)),
        "wrong_but_cited": sum(not s.refused and bool(s.cited_documents) for s in unanswerable),
        "ms_p50": round(statistics.median(r.ms for r in replayed), 2) if replayed else None,
    }


def sweep(setting: str, asked: Sequence[Asked], questions: dict[str, Question], embed: Embed | None) -> None:
    """One line of figures per value of a module constant of :mod:`kappi.llm.extractive` (restored after)."""
    name, values = setting.split("=", 1)
    kept = getattr(extractive, name)
    try:
        for value in values.split(","):
            setattr(extractive, name, type(kept)(value))
            print(json.dumps({f"{name}={value}": figures(replay(asked, questions, embed))}))
    finally:
        setattr(extractive, name, kept)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("result", type=Path, nargs="+", help="answer-bench results with recorded passages")
    parser.add_argument("--questions", type=Path, nargs="*", help="question files (default: the dev split's)")
    parser.add_argument("--show", choices=("none", "wrong", "all"), default="none")
    parser.add_argument("--sweep", metavar="NAME=V1,V2", help="the figures at each value of an extractive constant")
    parser.add_argument("--embed", action="store_true", help="check quotes with the local embedder, as served")
    args = parser.parse_args(argv)
    paths = args.questions or sorted(DEV.glob("*.json")) or [QUESTIONS]
    questions, kinds = load_questions(paths)
    asked = [a for path in args.result for a in recorded(json.loads(path.read_text(encoding="utf-8")), questions)]
    embed = local_embed(default_registry()) if args.embed else None
    if args.sweep:
        sweep(args.sweep, asked, questions, embed)
        return 0
    replayed = replay(asked, questions, embed)
    print(json.dumps({"all": figures(replayed)}))
    for kind in sorted(Counter(kinds[r.asked.id] for r in replayed)):
        print(json.dumps({kind: figures([r for r in replayed if kinds[r.asked.id] == kind])}))
    for r in replayed:
        wrong = (not r.scored.correct) if r.scored.answerable else not r.scored.refused
        if args.show == "all" or (args.show == "wrong" and wrong):
            mark = "ok " if not wrong else "BAD"
            print(f"{mark} {r.asked.id} [{kinds[r.asked.id]}] {r.asked.question}\n    {r.answer[:400]!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
