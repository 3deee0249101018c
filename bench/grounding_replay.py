"""Grounding replayed offline: a model's saved raw answers over the passages they were given, kept or dropped.

Run from the repository root::

    python -m bench.grounding_replay RECORDS.jsonl [--threshold 0.5] [--relation 0.5] [--grid] [--show] [--embed]

Each line of ``RECORDS.jsonl`` is one question of the answer bench's **dev** split (never the test split: the
thresholds are chosen here): ``id``, ``question``, ``facts`` (empty for an unanswerable question), ``passages``
(what Ragu's retrieval gave, each with its ``citation`` and ``text``; none when the relevance floor declined),
``raw`` (the model's answer to Ragu's prompt over them, as the llama.cpp server gave it) and ``instructions`` (the
system prompt) or the ``messages`` sent: with the passages' collection instructions, screened as the pipeline does.

Each raw answer goes through :class:`~kappi.chat.grounding.Grounder` and, when every sentence was dropped or
declined, extractive's quote takes its place (:func:`~kappi.chat.grounding.checked_quote`; over a decline only if
:func:`~kappi.chat.grounding.answers_over_a_decline`), as ``kappi.chat.answering`` does; ``--embed`` checks the quote
with the local embedder, as served (without it, on the words alone). The result is scored with the answer bench's
own judges (``states_facts``, ``is_refusal``):

- *facts*: answerable questions whose answer states every fact;
- *declined*: unanswerable questions the answer declines;
- *refused*: answerable questions the answer declines;
- *wrong-but-cited*: unanswerable questions answered, not declined, with a citation.

``--grid`` scores every pair of thresholds; the chosen pair is the one with the fewest wrong-but-cited answers that
keeps the most facts, then refuses the fewest.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.answer_bench import CITATION_MARK, is_refusal, states_facts
from common.embedders.registry import default_registry
from kappi.chat import grounding
from kappi.llm import extractive
from kappi.llm.base import Passage
from kappi.llm.extractive import Embed
from kappi.llm.registry import local_embed

GRID = (0.0, 0.2, 0.25, 0.34, 0.4, 0.5, 0.6, 0.67, 0.75)


@dataclass(frozen=True)
class Record:
    id: str
    question: str
    facts: list[list[str]]
    passages: list[Passage]
    raw: str
    instructions: str = ""

    @property
    def answerable(self) -> bool:
        return bool(self.facts)


def load(path: Path) -> list[Record]:
    records = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        item = json.loads(line)
        passages = [_passage(p) for p in item.get("passages") or []]
        records.append(
            Record(
                item["id"], item["question"], item["facts"], passages, item.get("raw", ""), item.get("instructions", "")
            )
        )
    return records


def _passage(p: dict[str, Any]) -> Passage:
    return Passage(
        collection=p.get("collection", ""),
        instruction=p.get("instruction"),
        document_id=str(p.get("document_id", "")),
        document_name=p.get("document_name"),
        page_start=p.get("page_start"),
        page_end=p.get("page_end"),
        text=p["text"],
        score=float(p.get("score") or 0.0),
        citation=int(p["citation"]),
    )


@dataclass(frozen=True)
class Outcome:
    answer: str
    cited: list[int]
    quoted: bool = False
    """The extractive quote stands in for the model's answer (every sentence dropped, or only a decline)."""


def quote(record: Record, embed: Embed | None) -> tuple[str, list[int]] | None:
    """Extractive's checked quote of the record's passages, as the pipeline works it out beside the model."""
    if embed is None:
        pieces = extractive.extract_answer(record.question, record.passages)
    else:
        pieces = asyncio.run(extractive.checked_answer(record.question, record.passages, embed))
    return grounding.checked_quote(record.question, record.passages, pieces)


def grounded(record: Record, threshold: float, relation: float, quoted: tuple[str, list[int]] | None) -> Outcome:
    """The answer the pipeline would give for this raw answer, ``quoted``: its passages' :func:`quote`."""
    if not record.passages:
        return Outcome(grounding.DECLINE, [])
    grounder = grounding.Grounder(
        record.passages, record.question, instructions=record.instructions, threshold=threshold, relation=relation
    )
    text = grounder.feed(record.raw) + grounder.finish()
    cited = list(grounder.cited)
    declined = grounder.only_declined
    if quoted is not None and (
        grounder.rested_on_nothing
        or (declined and grounding.answers_over_a_decline(record.question, record.passages, *quoted))
    ):
        return Outcome(*quoted, quoted=True)
    return Outcome(text, cited)


def raw(record: Record) -> Outcome:
    """The model's answer as it came (no grounding): its citations are the markers it wrote."""
    if not record.passages:
        return Outcome(grounding.DECLINE, [])
    return Outcome(record.raw, [int(n) for n in CITATION_MARK.findall(record.raw)])


@dataclass
class Score:
    answerable: int = 0
    facts: int = 0
    refused: int = 0
    unanswerable: int = 0
    declined: int = 0
    wrong_but_cited: int = 0
    quoted: int = 0
    model_facts: int = 0
    """Answerable questions whose facts the model's own kept sentences state (no quote standing in)."""

    def add(self, record: Record, outcome: Outcome) -> str:
        """Adds one answer; returns its verdict."""
        refused = is_refusal(outcome.answer)
        self.quoted += outcome.quoted
        if record.answerable:
            self.answerable += 1
            stated = states_facts(outcome.answer, record.facts)
            self.facts += stated
            self.model_facts += stated and not outcome.quoted
            self.refused += refused
            return "facts" if stated else "refused" if refused else "missed"
        self.unanswerable += 1
        self.declined += refused
        wrong = not refused and bool(outcome.cited)
        self.wrong_but_cited += wrong
        return "declined" if refused else "wrong-but-cited" if wrong else "uncited"

    def line(self) -> str:
        return (
            f"facts {self.facts}/{self.answerable}  refused {self.refused}/{self.answerable}  "
            f"declined {self.declined}/{self.unanswerable}  wrong-but-cited {self.wrong_but_cited}  "
            f"(model's own facts {self.model_facts}, quoted {self.quoted})"
        )


def scored(records: Iterable[Record], answer: Any, *, show: bool = False) -> Score:
    total = Score()
    for record in records:
        outcome = answer(record)
        verdict = total.add(record, outcome)
        if show and verdict not in ("facts", "declined"):
            print(f"--- {verdict} {record.id}: {record.question}\n  raw: {record.raw!r}\n  out: {outcome.answer!r}")
    return total


def grid(
    records: Sequence[Record], quotes: dict[str, tuple[str, list[int]] | None]
) -> list[tuple[float, float, Score]]:
    results = []
    for threshold in GRID:
        for relation in GRID:
            total = scored(records, lambda r, t=threshold, q=relation: grounded(r, t, q, quotes[r.id]))
            results.append((threshold, relation, total))
            print(f"threshold {threshold:.2f} relation {relation:.2f}  {total.line()}", flush=True)
    return results


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("records", type=Path, nargs="+")
    parser.add_argument("--threshold", type=float, default=grounding.SUPPORT_THRESHOLD)
    parser.add_argument("--relation", type=float, default=grounding.RELATION_THRESHOLD)
    parser.add_argument("--grid", action="store_true", help="score every pair of thresholds in GRID")
    parser.add_argument("--show", action="store_true", help="print every answer that missed or was wrong")
    parser.add_argument("--embed", action="store_true", help="check quotes with the local embedder, as served")
    args = parser.parse_args(argv)
    records = [r for path in args.records for r in load(path)]
    embed = local_embed(default_registry()) if args.embed else None
    quotes = {r.id: quote(r, embed) for r in records}
    print(f"raw answers:      {scored(records, raw).line()}")
    total = scored(records, lambda r: grounded(r, args.threshold, args.relation, quotes[r.id]), show=args.show)
    print(f"grounded answers: {total.line()}  (threshold {args.threshold}, relation {args.relation})")
    if args.grid:
        results = grid(records, quotes)
        best = max(results, key=lambda x: (-x[2].wrong_but_cited, x[2].facts, -x[2].refused, x[2].declined))
        print(f"chosen: threshold {best[0]} relation {best[1]}  {best[2].line()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
