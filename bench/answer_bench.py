"""Answer quality through the product: known facts asked of real manuals, per LLM provider, against a naive peer.

Run from the repository root::

    nice python -m bench.answer_bench [--quick] [--providers extractive local naive] [--out result.json]

**Corpus**: public documents as Debian ships them, fetched as any machine would (``apt-get download
<package>=<version>`` and ``dpkg-deb -x`` into ``bench/results/answer_bench/corpus/``; when that version has left
the mirror the current one is taken and the result says which): eleven HTML pages, three packages, one
collection each (:data:`CORPUS`). Pages of the same manual are one another's distractors (four PostgreSQL
configuration and type pages, gzip beside zlib). The questions (``bench/answers/questions.json``) were written
by reading them: each answerable one names the fact(s) a correct answer states and its gold document; each
unanswerable one is plausible here but answered by no document of the corpus (several by a page of the same
manual that the corpus leaves out). Before anything runs every fact is checked to occur in its gold document's
parsed text.

**The run**: a real ``ragu serve`` on an embedded PostgreSQL (``tests.hardening.live_stack.served``); the pages
uploaded through chonkit's HTTP API, three collections created and embedded (the job followed to its end), one
agent per provider over all three (top :data:`TOP_K` each, the default prompt, :data:`TEMPERATURE` unless
``--temperature`` says otherwise, the naive peer's too, answers bounded
at :data:`ANSWER_MAX_TOKENS`). Each question is asked through kappi's stateless query API (what is scored);
extractive's all, and :data:`STREAMED_QUESTIONS` of a model's (spread over the list), also through the streamed
chat API first (a new chat per question: time to the first ``token`` event). ``ragu serve`` gets
``RAGU_LLM_TIMEOUT_SECONDS`` of :data:`LLM_TIMEOUT` (a shared machine is slow, and timeouts are not what is
measured); ``--env`` adds settings (``RAGU_LOCAL_LLM_THREADS=1`` is what the figures so far used: on cores busy
with other work, two llama.cpp threads collapsed to under 1 token/s).

**Providers**: ``extractive`` (the offline default without a model); ``local``, the embedded llama.cpp model
``ragu serve`` runs (Qwen2.5-Coder-0.5B-Instruct by default, SmolLM2-135M in a quick run: :data:`QUICK_MODEL`);
and the naive peer, a plain RAG stack on the same model and server: the top :data:`NAIVE_TOP_K` chunks of
chonkit's dense search over the three collections, stuffed into a plain prompt that asks for ``[n]`` citations
(:data:`NAIVE_PROMPT`), sent straight to the llama.cpp server: no relevance floor, no citation check. The
server's address is read from ``ragu serve``'s log (or given with ``--llama-url``). After each streamed model
answer, the prompt Ragu sent (rebuilt with kappi's own ``grounded_question`` from the passages the stream's
``sources`` event listed; both prompt token counts are in the result) goes straight to the server too, read to
its first token with no cached prefix (:func:`run_provider` says why), so Ragu's time to first token is compared
with the raw server's on the same prompt in the same run. Ragu's generation rate is its output tokens over the
time after the raw server's first token (:func:`generation_rate`); the naive peer's is its stream's own.

**Scores** (:func:`score`): *correct*: every fact of the question appears in the answer (whole words,
case-insensitive); *gold cited*: a citation of the answer comes from a gold document; *off-topic*: the share
of the answers' citations, over answerable questions, from other documents; *refusal*: on an unanswerable
question, the answer's opening paragraph says it does not know (:data:`REFUSAL`), or the answer is empty. Ragu's
citations are its answer's ``citations``; the naive peer's are the ``[n]`` its text names. Targets (issue
#17), for the default offline provider (the local model when it runs, else ``extractive``): correct >= 80 %,
gold cited >= 90 %, off-topic <= 15 %, refusals >= 80 %; the local model's correctness >= the naive peer's;
Ragu's time to first token <= 1.1x the raw server's.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import unicodedata
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import httpx

from bench.report import SummaryRow

BENCH_DIR = Path(__file__).resolve().parent
QUESTIONS = BENCH_DIR / "answers" / "questions.json"
CACHE_DIR = BENCH_DIR / "results" / "answer_bench"
SECRET = "answer-bench-only-hs256-secret-0123456789abcdef"  # noqa: S105 -- signs loopback tokens only

TOP_K = 3
"""Passages per collection for Ragu's agents: three collections, so up to nine passages reach the LLM."""
NAIVE_TOP_K = 5
"""The naive peer's passages: the top five of all collections, as a LangChain-style "stuff" chain takes."""
STREAMED_QUESTIONS = {"quick": 4, "full": 12}
"""Questions asked through the stream (and of the raw server) per model provider; extractive streams all."""
LLM_TIMEOUT = 300.0
ANSWER_MAX_TOKENS = 256
TEMPERATURE = 0.0
"""Ragu's agents' and the naive peer's sampling temperature: new agents' default (``AgentCreate``)."""
RAW_MAX_TOKENS = 8
"""The raw comparison needs only the first token; a few more, read to the end, bring the server's usage."""
"""Every model answer's bound (Ragu's agents and the naive peer alike): a short fact needs far fewer, and a small
model that rambles would otherwise cost minutes per question on two shared cores."""
LOCAL_READY_SECONDS = 180.0
"""How long the embedded model may take to load before the local provider is reported as not running."""
QUICK_MODEL = "smollm2-135m-instruct-q4_1"
"""The small model a quick run serves (fast, invents facts: for checking the bench, not for its figures)."""

TARGETS = {"correct": 0.80, "gold_cited": 0.90, "off_topic": 0.15, "refusals": 0.80, "ttft_vs_raw": 1.1}

NAIVE_PROMPT = (
    "Use the following pieces of context to answer the question at the end. Cite the context you use with its "
    "number in square brackets, like [1]. If you don't know the answer, just say that you don't know, don't try "
    "to make up an answer.\n\n{context}"
)
"""LangChain's "stuff" QA prompt with a request for ``[n]`` citations: the naive peer's whole prompt."""


@dataclass(frozen=True)
class Package:
    """A Debian package and the pages of it the corpus uses: path inside the package -> the name uploaded."""

    name: str
    version: str
    folder: str
    pages: dict[str, str]
    collection: str
    instruction: str


CORPUS: tuple[Package, ...] = (
    Package(
        name="postgresql-doc-15",
        version="15.20-0+deb12u1",
        folder="usr/share/doc/postgresql-doc-15/html",
        pages={
            "runtime-config-connection.html": "postgresql-15-runtime-config-connection.html",
            "runtime-config-resource.html": "postgresql-15-runtime-config-resource.html",
            "runtime-config-autovacuum.html": "postgresql-15-runtime-config-autovacuum.html",
            "datatype-numeric.html": "postgresql-15-datatype-numeric.html",
            "auth-pg-hba-conf.html": "postgresql-15-auth-pg-hba-conf.html",
        },
        collection="Postgresql_15_manual",
        instruction="The PostgreSQL 15 manual: server configuration, client authentication, numeric types.",
    ),
    Package(
        name="python3.11-doc",
        version="3.11.2-6+deb12u9",
        folder="usr/share/doc/python3.11/html/library",
        pages={
            "json.html": "python-3.11-library-json.html",
            "functools.html": "python-3.11-library-functools.html",
            "gzip.html": "python-3.11-library-gzip.html",
            "zlib.html": "python-3.11-library-zlib.html",
            "secrets.html": "python-3.11-library-secrets.html",
        },
        collection="Python_311_library",
        instruction="The Python 3.11 standard library reference.",
    ),
    Package(
        name="shared-mime-info",
        version="2.2-1",
        folder="usr/share/doc/shared-mime-info/shared-mime-info-spec.html",
        pages={"x34.html": "shared-mime-info-spec.html"},
        collection="Shared_mime_info_spec",
        instruction="The freedesktop.org Shared MIME-info Database specification.",
    ),
)


# ---------------------------------------------------------------------------------------------------------------
# Questions and scoring (pure functions: tests/bench/test_answer_bench.py)


@dataclass(frozen=True)
class Question:
    id: str
    question: str
    facts: tuple[tuple[str, ...], ...]
    """Every group must appear in a correct answer; any variant of a group will do. Empty: unanswerable."""
    gold: tuple[str, ...]
    quick: bool = False
    absent: tuple[str, ...] = ()
    """Words of an unanswerable question that no document of the corpus contains (checked before a run)."""

    @property
    def answerable(self) -> bool:
        return bool(self.facts)


def load_questions(path: Path = QUESTIONS, *, quick: bool = False) -> list[Question]:
    """The answerable questions, then the unanswerable ones; only those marked ``quick`` in a quick run."""
    raw = json.loads(path.read_text(encoding="utf-8"))
    questions = [
        Question(
            id=q["id"],
            question=q["question"],
            facts=tuple(tuple(group) for group in q["facts"]),
            gold=tuple(q["gold"]),
            quick=q.get("quick", False),
        )
        for q in raw["answerable"]
    ] + [
        Question(
            id=q["id"],
            question=q["question"],
            facts=(),
            gold=(),
            quick=q.get("quick", False),
            absent=tuple(q["absent"]),
        )
        for q in raw["unanswerable"]
    ]
    return [q for q in questions if q.quick] if quick else questions


_QUOTES = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\u2212": "-", "\u2013": "-"})
_MARKUP = re.compile(r"[`]|\*\*|__(?!\w)|(?<!\w)__")


def normalise(text: str) -> str:
    """Lowercased, NFKC, straight quotes, no Markdown emphasis or code ticks, whitespace collapsed."""
    text = unicodedata.normalize("NFKC", text).translate(_QUOTES)
    return " ".join(_MARKUP.sub("", text).lower().split())


def mentions(text: str, variant: str) -> bool:
    """Whether ``variant`` occurs in ``text`` as whole words: "100" is not found in "1000" nor "128" in "128mb",
    and citation marks do not count ("3" is not in "[3]")."""
    pattern = re.escape(normalise(variant))
    prose = CITATION_MARK.sub(" ", normalise(text))
    return re.search(rf"(?<![\w]){pattern}(?![\w])", prose) is not None


def states_facts(text: str, facts: Sequence[Sequence[str]]) -> bool:
    """Every fact group has a variant in ``text`` (an unanswerable question's empty facts are never stated)."""
    return bool(facts) and all(any(mentions(text, v) for v in group) for group in facts)


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


CITATION_MARK = re.compile(r"\[(\d{1,3})\]")


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


def failed(question: Question) -> Scored:
    """A question whose answer never came (an HTTP error, a timeout): wrong, uncited, and no refusal either."""
    return Scored(question.id, question.answerable, False, False, (), 0, False)


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
    )


@dataclass
class Tally:
    """A provider's answers added up: shares over answerable questions, refusals over unanswerable ones."""

    answerable: int = 0
    correct: int = 0
    gold_cited: int = 0
    citations: int = 0
    off_topic: int = 0
    unanswerable: int = 0
    refusals: int = 0
    refused_answerable: int = 0

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
            self.refusals += scored.refused

    def shares(self) -> dict[str, float | None]:
        return {
            "correct": _share(self.correct, self.answerable),
            "gold_cited": _share(self.gold_cited, self.answerable),
            "off_topic": _share(self.off_topic, self.citations),
            "refusals": _share(self.refusals, self.unanswerable),
            "refused_answerable": _share(self.refused_answerable, self.answerable),
            "citations_per_answer": _share(self.citations, self.answerable),
        }


def tally(scores: Iterable[Scored]) -> Tally:
    total = Tally()
    for scored in scores:
        total.add(scored)
    return total


def _share(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


def check_facts(questions: Sequence[Question], texts: dict[str, str]) -> list[str]:
    """Questions that are wrong about the corpus (``texts``: each document's text by its name): an answerable one
    whose gold documents do not state its facts, an unanswerable one whose ``absent`` words a document contains."""
    wrong = []
    for q in questions:
        if q.answerable and not any(states_facts(texts.get(name, ""), q.facts) for name in q.gold):
            wrong.append(q.id)
        if any(mentions(text, word) for word in q.absent for text in texts.values()):
            wrong.append(q.id)
    return wrong


def p50(values: Sequence[float]) -> float | None:
    return round(statistics.median(values), 1) if values else None


# ---------------------------------------------------------------------------------------------------------------
# The corpus: Debian packages, downloaded and unpacked once into the cache


@dataclass(frozen=True)
class Page:
    name: str
    """The file name uploaded to chonkit, which citations give back as ``document_name``."""
    data: bytes
    package: str
    version: str
    path: str
    """Where the page is inside the package."""
    collection: str


def fetch_corpus(cache: Path = CACHE_DIR / "corpus") -> list[Page]:
    """Every page of :data:`CORPUS`, downloading and unpacking each package the cache does not hold yet."""
    pages = []
    for package in CORPUS:
        root, version = _unpacked(package, cache)
        for inside, name in package.pages.items():
            path = f"{package.folder}/{inside}"
            pages.append(Page(name, (root / path).read_bytes(), package.name, version, path, package.collection))
    return pages


def _unpacked(package: Package, cache: Path) -> tuple[Path, str]:
    """The folder the package is unpacked in and its version (the pinned one, or the mirror's current one)."""
    for found in sorted(cache.glob(f"{package.name}_*")):
        if (found / "VERSION").is_file():
            return found, (found / "VERSION").read_text(encoding="utf-8").strip()
    if shutil.which("apt-get") is None or shutil.which("dpkg-deb") is None:
        raise RuntimeError(f"the corpus needs apt-get and dpkg-deb (Debian) to fetch {package.name}")
    with tempfile.TemporaryDirectory(prefix="answer-bench-deb-") as scratch:
        Path(scratch).chmod(0o777)  # so apt's unprivileged _apt user may write there
        pinned = subprocess.run(
            ["apt-get", "download", f"{package.name}={package.version}"],
            cwd=scratch,
            capture_output=True,
            text=True,
            check=False,
        )
        if pinned.returncode != 0:
            print(
                f"answer_bench: {package.name}={package.version} unavailable, taking the current version "
                f"({pinned.stderr.strip()[-200:]})",
                file=sys.stderr,
            )
            latest = subprocess.run(
                ["apt-get", "download", package.name], cwd=scratch, capture_output=True, text=True, check=False
            )
            if latest.returncode != 0:
                raise RuntimeError(f"apt-get download {package.name} failed (run apt-get update?): {latest.stderr}")
        deb = next(Path(scratch).glob("*.deb"))
        version = subprocess.run(
            ["dpkg-deb", "-f", str(deb), "Version"], capture_output=True, text=True, check=True
        ).stdout.strip()
        target = cache / f"{package.name}_{version}"
        target.mkdir(parents=True, exist_ok=True)
        subprocess.run(["dpkg-deb", "-x", str(deb), str(target)], check=True)
    (target / "VERSION").write_text(version + "\n", encoding="utf-8")
    return target, version


def page_texts(pages: Sequence[Page]) -> dict[str, str]:
    """Each page's text as chonkit's parser gives it (what is chunked), for :func:`check_facts`."""
    from chonkit.document.parsing.config import ParseConfig
    from chonkit.document.parsing.doctype import DocumentType
    from chonkit.document.parsing.parser import parse

    return {p.name: parse(p.data, DocumentType.HTML, ParseConfig()).text for p in pages}


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
    retrieved: list[str] = field(default_factory=list)
    total_ms: float | None = None
    ttft_ms: float | None = None
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
    """A new chat, the question through ``/messages/stream``; times from the request to the first token."""
    chat = (await user.post("/kappi/chats", json={"agent_id": agent_id})).raise_for_status().json()
    started = time.perf_counter()
    first: float | None = None
    text, sources, done = [], [], {}
    async with user.stream("POST", f"/kappi/chats/{chat['id']}/messages/stream", json={"content": question}) as r:
        r.raise_for_status()
        async for event, data in sse_events(r):
            body = json.loads(data)
            if event == "token":
                first = first or time.perf_counter()
                text.append(body["text"])
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


def ragu_messages(agent: dict[str, Any], sources: Sequence[dict[str, Any]], question: str) -> list[dict[str, str]]:
    """The messages kappi sends its model for a first question, rebuilt with kappi's own prompt functions from
    the passages the stream's ``sources`` event listed (as ``kappi.chat.answering`` composes them: the agent's
    instructions as system, then sources, question and rules in the user's turn): the raw server's half of the
    time-to-first-token ratio. The result's prompt token counts, side by side, show the two prompts agree."""
    from kappi.llm.base import Passage
    from kappi.llm.prompt import grounded_question

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
    """Collection name -> id."""
    ingest_seconds: float
    env: dict[str, str]
    log: Path
    """``ragu serve``'s log, which names the embedded llama.cpp server's address."""
    data_dir: Path
    """``ragu serve``'s data folder, where the embedded server's API key is kept for the administrator."""


@asynccontextmanager
async def stack(pages: Sequence[Page], env: dict[str, str]) -> AsyncIterator[Stack]:
    """``ragu serve`` on its own embedded PostgreSQL, the pages uploaded and embedded through chonkit's API."""
    from common.auth import mint_dev_token
    from ragu_client import ChonkitClient
    from tests.hardening.live_stack import served

    async with served("ragu-answer-bench-", SECRET, **env) as running:
        settings, base = running.settings, running.server.base_url
        admin_token = mint_dev_token(settings, subject="bench-admin", roles=[settings.auth_admin_role])
        user_token = mint_dev_token(settings, subject="bench-user")
        timeout = httpx.Timeout(LLM_TIMEOUT, connect=10)
        async with (
            httpx.AsyncClient(
                base_url=base, headers={"Authorization": f"Bearer {admin_token}"}, timeout=timeout
            ) as admin,
            httpx.AsyncClient(
                base_url=base, headers={"Authorization": f"Bearer {user_token}"}, timeout=timeout
            ) as user,
            ChonkitClient(f"{base}/chonkit", admin_token, timeout=LLM_TIMEOUT) as chonkit,
        ):
            started = time.perf_counter()
            collections = await _ingest(chonkit, pages)
            ingest_seconds = round(time.perf_counter() - started, 1)
            yield Stack(admin, user, collections, ingest_seconds, running.env, running.server.log, settings.data_path)


async def _ingest(chonkit: Any, pages: Sequence[Page]) -> dict[str, str]:
    uploaded = await chonkit.upload([(p.name, p.data) for p in pages])
    ids = {r.document.name: str(r.document.id) for r in uploaded.results if r.document is not None}
    missing = sorted({p.name for p in pages} - set(ids))
    if missing:
        raise RuntimeError(f"chonkit refused {missing}: {uploaded.results}")
    collections: dict[str, str] = {}
    for package in CORPUS:
        collection = await chonkit.create_collection(package.collection)
        collections[package.collection] = str(collection.id)
        created = await chonkit.add_documents(collection.id, [ids[name] for name in package.pages.values()])
        job = await chonkit.wait_for_job(created.job.id)
        if job.status != "done":
            raise RuntimeError(f"embedding {package.collection} ended {job.status}: {job.items}")
    return collections


async def make_agent(
    admin: httpx.AsyncClient, name: str, llm: dict[str, str], *, temperature: float = TEMPERATURE
) -> dict[str, Any]:
    """An agent over the three collections (top :data:`TOP_K` each, the collection's instruction line)."""
    body = {"name": name, "max_tokens": ANSWER_MAX_TOKENS, "temperature": temperature, **llm}
    created = await admin.post("/kappi/admin/agents", json=body)
    if created.status_code != 201:
        raise RuntimeError(f"kappi refused the {name} agent: {created.status_code} {created.text}")
    agent: dict[str, Any] = created.json()
    add = [
        {"vector_provider": "pgvector", "name": p.collection, "top_k": TOP_K, "instruction": p.instruction}
        for p in CORPUS
    ]
    report = (await admin.put(f"/kappi/admin/agents/{agent['id']}/collections", json={"add": add})).json()
    if not all(r["ok"] for r in report["results"]):
        raise RuntimeError(f"assigning collections to {name}: {report}")
    fresh: dict[str, Any] = (await admin.get(f"/kappi/admin/agents/{agent['id']}")).raise_for_status().json()
    return fresh


_QUERY_FIELDS = {"answer", "citations", "usage", "timings"}


async def ask_query(user: httpx.AsyncClient, agent_id: str, question: Question) -> Asked:
    """The stateless query API: the scored answer, its citations, usage, and anything else kappi adds."""
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
        total_ms=elapsed,
        output_tokens=usage.get("output_tokens"),
        prompt_tokens=usage.get("input_tokens"),
        extra={k: _brief(v) for k, v in body.items() if k not in _QUERY_FIELDS}
        | {"passages": _passages(body["citations"] + body.get("also_retrieved", []))},
    )


def _passages(given: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """What the answer was given, in citation order and in full: kept so that grounding and the extractive can
    be replayed on the same passages offline (``grounding`` counts the model's dropped sentences, a reason each)."""
    return sorted(given, key=lambda c: int(c["citation"]))


def _brief(value: Any) -> Any:
    """Passage lists (``also_retrieved``) as their documents' names; anything else as it came."""
    if isinstance(value, list) and all(isinstance(v, dict) and "document_id" in v for v in value):
        return [v.get("document_name") or v["document_id"] for v in value]
    return value


def timed_indices(count: int, wanted: int) -> list[int]:
    """``wanted`` question positions spread evenly over ``count`` (answerable and unanswerable alike)."""
    if wanted >= count:
        return list(range(count))
    return sorted({round(i * (count - 1) / max(wanted - 1, 1)) for i in range(wanted)})


async def run_provider(
    s: Stack, agent: dict[str, Any], questions: Sequence[Question], *, streamed: int, llama: Llama | None
) -> list[Asked]:
    """Every question through the query API; ``streamed`` of them through the stream first, and then (with
    ``llama``) Ragu's prompt straight to the server, up to its first token.

    llama.cpp keeps each slot's last prompt and reuses the prefix a new one shares with it: Ragu's streamed request
    may reuse the preamble (instructions, context header) of the question before, and it leaves its own prompt
    in the slot. The raw request therefore asks for no reuse at all (``cache_prompt: false``): it never gains from
    Ragu's request, and the ratio leans, if anything, in Ragu's favour by the preamble's share of the prompt."""
    timed = set(timed_indices(len(questions), streamed))
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
                asked.ttft_ms = stream.ttft_ms
                asked.extra["stream_done"] = stream.done
                asked.extra["sources"] = stream.sources
                if llama is not None and stream.called_model:
                    messages = ragu_messages(agent, stream.sources, question.question)
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


async def run_naive(s: Stack, questions: Sequence[Question], llama: Llama, config: dict[str, Any]) -> list[Asked]:
    """The naive peer: the top :data:`NAIVE_TOP_K` chunks of chonkit's dense search over the three collections
    (no floor), a plain stuff prompt, the model's text as is; its citations are the ``[n]`` it names."""
    from ragu_client import ChonkitClient

    token = s.admin.headers["Authorization"].removeprefix("Bearer ")
    results = []
    async with (
        httpx.AsyncClient(timeout=LLM_TIMEOUT) as raw,
        ChonkitClient(f"{str(s.admin.base_url).rstrip('/')}/chonkit", token, timeout=LLM_TIMEOUT) as chonkit,
    ):
        for index, question in enumerate(questions):
            hits = []
            for collection_id in s.collections.values():
                found = await chonkit.search(collection_id, question.question, limit=NAIVE_TOP_K)
                hits.extend(found.hits)
            hits.sort(key=lambda h: -h.score)
            top = [{"text": h.content, "document": h.document_name or h.document_id} for h in hits[:NAIVE_TOP_K]]
            try:
                answer = await llama_stream(
                    raw,
                    llama,
                    naive_messages(question.question, top),
                    temperature=config["temperature"],
                    max_tokens=config["max_tokens"],
                )
            except httpx.HTTPError as exc:
                results.append(Asked(question.id, "", [], error=f"{type(exc).__name__}: {exc}"))
                continue
            numbers = [n for n in marked_citations(answer.text) if 1 <= n <= len(top)]
            asked = Asked(
                id=question.id,
                answer=answer.text,
                cited=[top[n - 1]["document"] for n in numbers],
                citation_numbers=numbers,
                retrieved=[t["document"] for t in top],
                total_ms=answer.total_ms,
                ttft_ms=answer.ttft_ms,
                tokens_per_s=answer.tokens_per_s,
                output_tokens=answer.output_tokens,
                prompt_tokens=answer.prompt_tokens,
            )
            results.append(asked)
            _progress("naive", index, len(questions), asked)
    return results


def _progress(provider: str, index: int, count: int, asked: Asked) -> None:
    ttft = "" if asked.ttft_ms is None else f" ttft {asked.ttft_ms:.0f} ms"
    print(f"answer_bench: {provider} {index + 1}/{count} {asked.id}{ttft}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------------------------
# Summaries


def summarise(provider: str, questions: Sequence[Question], asked: Sequence[Asked]) -> dict[str, Any]:
    """A provider's scores, latencies and every answer (for reading what went wrong)."""
    by_id = {q.id: q for q in questions}
    answered = [a for a in asked if a.error is None]
    scores = {a.id: score(by_id[a.id], a.answer, a.cited) if a.error is None else failed(by_id[a.id]) for a in asked}
    total = tally(scores.values())
    paired = [a for a in answered if a.ttft_ms is not None and a.raw_ttft_ms]
    return {
        "provider": provider,
        **total.shares(),
        "counts": asdict(total),
        "errors": len(asked) - len(answered),
        "ttft_ms_p50": p50([a.ttft_ms for a in answered if a.ttft_ms is not None]),
        "tokens_per_s_p50": p50([a.tokens_per_s for a in answered if a.tokens_per_s is not None]),
        "total_ms_p50": p50([a.total_ms for a in answered if a.total_ms is not None]),
        "prompt_tokens_p50": p50([a.prompt_tokens for a in answered if a.prompt_tokens is not None]),
        "streamed": sum(a.ttft_ms is not None for a in answered),
        "raw": {
            "pairs": len(paired),
            "ragu_ttft_ms_p50": p50([a.ttft_ms for a in paired if a.ttft_ms is not None]),
            "raw_ttft_ms_p50": p50([a.raw_ttft_ms for a in paired if a.raw_ttft_ms is not None]),
            "ttft_vs_raw_p50": _ratio_p50([(a.ttft_ms or 0, a.raw_ttft_ms or 0) for a in paired]),
            "raw_prompt_tokens_p50": p50([a.raw_prompt_tokens for a in paired if a.raw_prompt_tokens is not None]),
        },
        "answers": [_record(a, scores.get(a.id)) for a in asked],
    }


def _ratio_p50(pairs: Sequence[tuple[float, float]]) -> float | None:
    ratios = [ours / peer for ours, peer in pairs if peer > 0]
    return round(statistics.median(ratios), 3) if ratios else None


def _record(asked: Asked, scored: Scored | None) -> dict[str, Any]:
    record = {k: v for k, v in asdict(asked).items() if v not in (None, [], {})}
    if scored is not None:
        record |= {"correct": scored.correct, "gold_cited": scored.gold_cited, "refused": scored.refused}
    return record


def summary_rows(providers: dict[str, dict[str, Any]]) -> list[SummaryRow]:
    """The report's lines: the default offline provider held to the targets, the others beside it, the local
    model against the naive peer, and Ragu's time to first token against the raw server's."""
    default = "local" if "local" in providers else "extractive"
    rows: list[SummaryRow] = []
    for name, result in providers.items():
        held = name == default
        for metric, better in (("correct", True), ("gold_cited", True), ("off_topic", False), ("refusals", True)):
            if result.get(metric) is not None:
                target = TARGETS[metric] if held else None
                rows.append(
                    SummaryRow(metric=f"{name} {metric}", value=result[metric], target=target, higher_is_better=better)
                )
        for metric in ("ttft_ms_p50", "tokens_per_s_p50"):
            if result.get(metric) is not None:
                rows.append(SummaryRow(metric=f"{name} {metric}", value=result[metric], target=None))
        raw = result.get("raw") or {}
        if raw.get("ttft_vs_raw_p50") is not None:
            rows.append(
                SummaryRow(
                    metric=f"{name} ttft vs raw llama.cpp (same prompt, p50 of pairs)",
                    ours=raw["ragu_ttft_ms_p50"],
                    peer=raw["raw_ttft_ms_p50"],
                    value=raw["ttft_vs_raw_p50"],
                    target=TARGETS["ttft_vs_raw"],
                    higher_is_better=False,
                )
            )
    local, naive = providers.get("local"), providers.get("naive")
    if local and naive and local.get("correct") is not None and naive.get("correct"):
        rows.append(
            SummaryRow(
                metric="local correct vs naive peer",
                ours=local["correct"],
                peer=naive["correct"],
                value=round(local["correct"] / naive["correct"], 3),
                target=1.0,
            )
        )
    return rows


def table(providers: dict[str, dict[str, Any]]) -> str:
    """A plain-text table, one line per provider."""
    columns = (
        "correct",
        "gold_cited",
        "off_topic",
        "refusals",
        "refused_answerable",
        "ttft_ms_p50",
        "tokens_per_s_p50",
        "total_ms_p50",
    )
    lines = ["provider    " + "".join(f"{c:>20}" for c in columns)]
    for name, result in providers.items():
        cells = "".join(f"{_cell(result.get(c)):>20}" for c in columns)
        lines.append(f"{name:<12}{cells}")
    for name, result in providers.items():
        raw = result.get("raw") or {}
        if raw.get("pairs"):
            lines.append(
                f"{name}: ttft {raw['ragu_ttft_ms_p50']} ms vs raw llama.cpp {raw['raw_ttft_ms_p50']} ms "
                f"(p50 of {raw['pairs']} pairs' ratios: {raw['ttft_vs_raw_p50']}x)"
            )
    return "\n".join(lines)


def _cell(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and value <= 1:
        return f"{value:.0%}"
    return f"{value}"


# ---------------------------------------------------------------------------------------------------------------
# Entry points


@dataclass(frozen=True)
class Options:
    quick: bool = False
    providers: tuple[str, ...] = ("extractive", "local", "naive")
    llama_url: str | None = None
    local_model: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    temperature: float = TEMPERATURE


def run(quick: bool) -> dict[str, Any]:
    """The benchmark runner's entry point (``python -m bench``)."""
    return asyncio.run(measure(Options(quick=quick)))


def serve_env(options: Options) -> dict[str, str]:
    """``ragu serve``'s environment: no model when no provider needs one, the small one in a quick run, else the
    recommended one (``auto``); ``--env`` overrides."""
    wants_model = bool({"local", "naive"} & set(options.providers)) and not options.llama_url
    model = "none" if not wants_model else QUICK_MODEL if options.quick else "auto"
    return {"RAGU_LOCAL_LLM_MODEL": model, "RAGU_LLM_TIMEOUT_SECONDS": str(LLM_TIMEOUT), **options.env}


async def measure(options: Options) -> dict[str, Any]:
    questions = load_questions(quick=options.quick)
    pages = await asyncio.to_thread(fetch_corpus)
    wrong = check_facts(questions, await asyncio.to_thread(page_texts, pages))
    if wrong:
        raise RuntimeError(f"questions whose facts their gold documents do not state: {wrong}")
    size = "quick" if options.quick else "full"
    load_before = os.getloadavg()
    results: dict[str, dict[str, Any]] = {}
    notes: list[str] = []
    async with stack(pages, serve_env(options)) as s:
        llama = await _llama(s, options)
        for provider in options.providers:
            try:
                outcome = await _one_provider(s, provider, questions, llama, size, temperature=options.temperature)
            except (httpx.HTTPError, RuntimeError, KeyError) as exc:  # the other providers' figures still count
                outcome = f"{provider} failed: {type(exc).__name__}: {exc}"
            if isinstance(outcome, str):
                notes.append(outcome)
                print(f"answer_bench: {outcome}", file=sys.stderr)
            else:
                results[provider] = outcome
        ingest_seconds = s.ingest_seconds
    print(table(results))
    return {
        "size": size,
        "corpus": [
            {
                "name": p.name,
                "package": p.package,
                "version": p.version,
                "path": p.path,
                "collection": p.collection,
                "bytes": len(p.data),
            }
            for p in pages
        ],
        "questions": {
            "answerable": sum(q.answerable for q in questions),
            "unanswerable": sum(not q.answerable for q in questions),
        },
        "settings": {
            "top_k_per_collection": TOP_K,
            "naive_top_k": NAIVE_TOP_K,
            "streamed": STREAMED_QUESTIONS[size],
            "temperature": options.temperature,
        },
        "ingest_seconds": ingest_seconds,
        "llama": None if llama is None else {"base_url": llama.base_url, "model": llama.model},  # not its key
        "serve_env": serve_env(options),
        "load_average": {"before": [round(x, 1) for x in load_before], "after": [round(x, 1) for x in os.getloadavg()]},
        "notes": notes,
        "targets": TARGETS,
        "providers": results,
        "summary": summary_rows(results),
    }


async def _one_provider(
    s: Stack, provider: str, questions: Sequence[Question], llama: Llama | None, size: str, *, temperature: float
) -> dict[str, Any] | str:
    """The provider's summary, or why it did not run."""
    if provider == "extractive":
        agent = await make_agent(s.admin, "Extractive", {"llm_provider": "extractive", "llm_model": "extractive"})
        asked = await run_provider(s, agent, questions, streamed=len(questions), llama=None)
        return summarise(provider, questions, asked)
    if provider == "local":
        agent_or_reason = await _local_agent(s, temperature)
        if isinstance(agent_or_reason, str):
            return agent_or_reason
        asked = await run_provider(s, agent_or_reason, questions, streamed=STREAMED_QUESTIONS[size], llama=llama)
        return summarise(provider, questions, asked)
    if provider == "naive":
        if llama is None:
            return "naive peer skipped: no llama.cpp server (no local model running, no --llama-url)"
        config = {"temperature": temperature, "max_tokens": ANSWER_MAX_TOKENS}  # as Ragu's agents
        return summarise(provider, questions, await run_naive(s, questions, llama, config))
    return f"unknown provider {provider!r}"


async def _local_agent(s: Stack, temperature: float) -> dict[str, Any] | str:
    """An agent on the embedded model, or why there is none (no model installed, or it did not start)."""
    catalog = await _local_ready(s)
    if isinstance(catalog, str):
        return catalog
    model = next(p["models"][0] for p in catalog["providers"] if p["provider"] == "local")
    return await make_agent(s.admin, "Local", {"llm_provider": "local", "llm_model": model}, temperature=temperature)


async def _local_ready(s: Stack) -> dict[str, Any] | str:
    """kappi's LLM catalog once the embedded model is ready, or why it is not."""
    deadline = time.monotonic() + LOCAL_READY_SECONDS
    while True:
        catalog: dict[str, Any] = (await s.admin.get("/kappi/admin/llms")).raise_for_status().json()
        local = next((p for p in catalog["providers"] if p["provider"] == "local"), None)
        if local is None:
            return "local provider skipped: ragu serve runs no embedded model (none installed, or refused)"
        if local["status"] == "ready":
            return catalog
        if local["status"] != "starting" or time.monotonic() > deadline:
            return f"local provider skipped: the embedded model is {local['status']}"
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
    key_file = s.data_dir / LOCAL_KEY_FILE
    key = key_file.read_text(encoding="utf-8").strip() if key_file.is_file() else None
    return Llama(found[-1][1], found[-1][0], key) if found else None


def rescore(result: dict[str, Any], questions: Sequence[Question]) -> dict[str, Any]:
    """A saved result judged again with today's scoring (its stored answers, nothing asked again)."""
    names = {f.name for f in fields(Asked)}
    providers = {
        name: summarise(
            name,
            questions,
            [Asked(**{"answer": "", "cited": [], **{k: v for k, v in a.items() if k in names}}) for a in p["answers"]],
        )
        for name, p in result["providers"].items()
    }
    return {**result, "providers": providers, "summary": summary_rows(providers)}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="the 10 questions marked quick")
    parser.add_argument("--providers", nargs="+", default=list(Options.providers), help="extractive local naive")
    parser.add_argument("--llama-url", help="a llama.cpp server for the naive peer and the raw comparison")
    parser.add_argument("--local-model", help="the model name to send that server")
    parser.add_argument("--env", nargs="*", default=[], metavar="KEY=VALUE", help="extra environment for ragu serve")
    parser.add_argument("--temperature", type=float, default=TEMPERATURE, help="the agents' and the naive peer's")
    parser.add_argument("--out", type=Path, help="write the JSON result here instead of stdout")
    parser.add_argument("--rescore", type=Path, metavar="RESULT", help="judge a saved result again, asking nothing")
    args = parser.parse_args(argv)
    if args.rescore:
        result = rescore(json.loads(args.rescore.read_text(encoding="utf-8")), load_questions())
        print(table(result["providers"]))
        (args.out or args.rescore).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
        return 0
    options = Options(
        quick=args.quick,
        providers=tuple(args.providers),
        llama_url=args.llama_url,
        local_model=args.local_model,
        env=dict(item.split("=", 1) for item in args.env),
        temperature=args.temperature,
    )
    text = json.dumps(asyncio.run(measure(options)), indent=2)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
