"""Answering a prepared question: retrieval, then the agent's LLM — one pipeline, collected or streamed.

:meth:`Answerer.query` collects it (the stateless API, nothing saved); :meth:`Answerer.events` streams it as
SSE events and saves the answer on its own transaction whatever happens (a streaming response outlives the
request, so it may hold no request-scoped connection); :meth:`Answerer.answer` is the stream, collected.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import re
import time
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from typing import Any
from uuid import UUID

import msgspec

from common.db import Database
from common.errors import AppError, NotFound
from common.telemetry import LlmCall
from kappi.agent.models import Agent, AgentVersion
from kappi.chat.followups import condensed_question
from kappi.chat.grounding import (
    DECLINE,
    Grounder,
    answers_over_a_decline,
    checked_quote,
    joined_neighbours,
    relevant,
    split_citations,
)
from kappi.chat.models import Answer, Chat, Citation, DropReason, Grounding, Message, QueryAnswer, Timings
from kappi.chat.repository import ChatRepository
from kappi.llm.base import ChatMessage, LlmEvent, LlmRequest, Passage, Token, Usage
from kappi.llm.extractive import about_something_else
from kappi.llm.prompt import CONTEXT_PLACEHOLDER, grounded_question
from kappi.llm.registry import EXTRACTIVE, LlmFallback, LlmRegistry
from kappi.llm.windows import sized
from kappi.retrieval.models import FoundPassage
from kappi.retrieval.service import Retrieval, RetrievedChunk, Retriever, rerank_choice

log = logging.getLogger(__name__)

UNSUPPORTED_FALLBACK = LlmFallback(
    provider=EXTRACTIVE,
    reason="answer_unsupported",
    detail="the model's answer rested on none of the passages",
)
"""Why an answer is a quote of the passages when the model's every sentence was dropped."""
DECLINED_FALLBACK = LlmFallback(
    provider=EXTRACTIVE,
    reason="answer_declined",
    detail="the model said it does not know, but a passage answers",
)
"""Why an answer is a quote of the passages when all the model said was that it does not know."""


QUOTE_LEAD = "From the sources:"
"""Heads the quote that follows a model's answer (:func:`with_the_quote`)."""


class Prepared(msgspec.Struct, frozen=True, kw_only=True):
    """Everything an answer needs, gathered inside a short transaction. Without a ``chat`` (the
    stateless query API) nothing is saved."""

    agent: Agent
    config: AgentVersion
    text: str
    history: list[ChatMessage]
    groups: frozenset[str]
    chat: Chat | None = None
    question: Message | None = None
    answer_id: UUID | None = None
    """The ``pending`` answer stored with the question, completed when the answer ends."""


class Event(msgspec.Struct, frozen=True, kw_only=True):
    """One stream event: ``sources``, ``token``, ``done`` or ``error``; its data holds our Structs as they
    are (the SSE encoder takes them)."""

    event: str
    data: dict[str, Any]


class Grounded(msgspec.Struct, frozen=True, kw_only=True):
    """The pipeline's last step: the citation numbers the answer cites (the other passages it was given are
    "also retrieved"), whether it declined from the retrieval scores, and why each sentence grounding dropped
    was (never the sentences: they may repeat the agent's confidential instructions, #26)."""

    cited: list[int]
    declined: bool = False
    dropped: tuple[DropReason, ...] = ()
    llm_fallback: LlmFallback | None = None
    """Set when another provider answered than the agent's (its local model is not running, or its answer rested
    on no passage and a quote stands in): says which, why."""


class Preliminary(msgspec.Struct, frozen=True, kw_only=True):
    """The extractive quote of the passages a model answers from: its checked text and the citation numbers it
    carries. Streamed, it is shown while the model reads (the ``preliminary`` event); the answer then ends with it,
    after the model's sentences (:func:`with_the_quote`), or is it when none of them stands."""

    text: str
    cited: list[int]


Step = Retrieval | Preliminary | Token | Usage | Grounded
"""What the pipeline yields: the retrieval first, then (streamed, for a model) a preliminary quote, the answer's
checked tokens, its usage, its grounding."""


class Answerer:
    def __init__(self, db: Database, retriever: Retriever, llms: LlmRegistry) -> None:
        self.db = db
        self.retriever = retriever
        self.llms = llms

    async def pipeline(self, prepared: Prepared, *, preliminary: bool = False) -> AsyncGenerator[Step, None]:
        """The one answer pipeline both forms consume. ``aclosing``: a client that goes away stops the
        upstream LLM call now, not at garbage collection.

        While a model (not ``extractive``) reads its prompt, the extractive quote of the same passages is worked out
        alongside (:meth:`_preliminary`); ``preliminary``: it is yielded as soon as it is ready, before the model's
        first sentence, so a reader has words in well under a second. The answer ends with it, after the model's
        checked sentences, unless they already say it (:func:`with_the_quote`). A model with a passage budget
        (:meth:`LlmRegistry.passage_budget`) reads each passage's best sentence windows
        (:func:`~kappi.llm.windows.sized`); grounding and the citations keep the whole passages.

        Only passages above the relevance floor reach the model, and none when the question names what none of
        them holds (:func:`~kappi.llm.extractive.about_something_else`); with none, the answer declines without
        calling it. The model's text then streams through a :class:`Grounder`, and the pipeline ends with
        the :class:`Grounded` verdict: which passages the answer cites."""
        searched = condensed_question(prepared.text, prepared.history)
        found = await self.retriever.retrieve(
            prepared.agent.collections, prepared.groups, searched, rerank=rerank_choice(prepared.config)
        )
        kept = joined_neighbours(relevant(found.chunks, found.embedding_models, question=searched))
        # the question names what no passage holds: no model is asked to answer from them
        elsewhere = bool(kept) and await asyncio.to_thread(about_something_else, searched, _passages(kept))
        retrieval = msgspec.structs.replace(found, chunks=[] if elsewhere else kept)
        yield retrieval
        if not retrieval.chunks and prepared.agent.collections:
            yield Token(text=DECLINE)
            yield Usage(input_tokens=0, output_tokens=0)
            yield Grounded(cited=[], declined=True)
            return
        provider, fallback = self.llms.resolve(prepared.config.llm_provider)
        passages = _passages(retrieval.chunks)
        budget = self.llms.passage_budget(provider.name) if provider.reads_system_prompt else None
        read = passages if budget is None else await asyncio.to_thread(sized, passages, searched, budget)
        request = _llm_request(prepared, read, with_system=provider.reads_system_prompt)
        # Attribution needs passages to attribute to: an agent with no collections is a plain assistant.
        attribute = provider.reads_system_prompt and bool(passages)
        instructions = _instructions(prepared.config, request) if provider.reads_system_prompt else ""
        grounder = Grounder(passages, prepared.text, attribute=attribute, instructions=instructions)
        usage = Usage()
        shown: list[str] = []
        quoting = provider.name != EXTRACTIVE and bool(passages)
        quote = asyncio.ensure_future(self._preliminary(prepared.text, passages)) if quoting else None
        try:
            with LlmCall(provider.name, prepared.config.llm_model) as call:
                stream = _first_then(quote if preliminary else None, provider.stream(request))
                async with contextlib.aclosing(stream):
                    async for item in stream:
                        if isinstance(item, Preliminary):
                            yield item
                            continue
                        if isinstance(item, Usage):
                            call.usage(item.input_tokens, item.output_tokens)
                            usage = item
                            continue
                        call.token()
                        if text := grounder.feed(item.text):
                            shown.append(text)
                            yield Token(text=text)
            rest, cited, fallback = await _ending(
                prepared.text, passages, grounder, shown="".join(shown), quote=quote, fallback=fallback
            )
        finally:
            if quote is not None and not quote.done():
                quote.cancel()
        if rest:
            yield Token(text=rest)
        yield usage
        yield Grounded(cited=cited, dropped=tuple(grounder.dropped), llm_fallback=fallback)

    async def _preliminary(self, question: str, passages: list[Passage]) -> Preliminary | None:
        """``extractive``'s answer over the passages the model is given (the same, whole), checked
        (:func:`~kappi.chat.grounding.checked_quote`); ``None`` when it finds nothing that answers, or fails (the
        model still answers)."""
        request = LlmRequest(
            model=EXTRACTIVE, system="", messages=[ChatMessage(role="user", content=question)], passages=passages
        )
        try:
            pieces = [item.text async for item in self.llms.get(EXTRACTIVE).stream(request) if isinstance(item, Token)]
        except Exception:  # the quote is a courtesy: the model's answer does not wait on it
            log.warning("the preliminary quote failed; the model answers alone", exc_info=True)
            return None
        quoted = await asyncio.to_thread(checked_quote, question, passages, pieces)
        return None if quoted is None else Preliminary(text=quoted[0], cited=quoted[1])

    async def query(self, prepared: Prepared) -> QueryAnswer:
        """A stateless answer (nothing stored); errors are raised as they are."""
        run = _Run()
        async with contextlib.aclosing(self.pipeline(prepared)) as steps:
            async for step in steps:
                run.take(step)
        return QueryAnswer(
            answer="".join(run.parts),
            citations=run.cited,
            also_retrieved=run.also_retrieved,
            usage=run.usage,
            timings=run.timings(answered=True),
            llm_fallback=run.llm_fallback,
            grounding=run.grounding,
        )

    async def events(
        self, prepared: Prepared, *, reraise: bool = False, preliminary: bool = True
    ) -> AsyncIterator[Event]:
        """``sources``, then (``preliminary``, when a model answers and a passage does) one ``preliminary`` quote,
        then ``token``s, then ``done`` — or an ``error`` event (``reraise``: the error itself). The answer is saved
        whatever happens, with its status, so the history shows failed answers too; a preliminary quote is not
        part of it."""
        run = _Run()
        status, error_code = "complete", None
        try:
            async with contextlib.aclosing(self.pipeline(prepared, preliminary=preliminary)) as steps:
                async for step in steps:
                    run.take(step)
                    if (event := _event(step, run)) is not None:
                        yield event
        except AppError as exc:
            status, error_code = "error", exc.code
            if reraise:
                raise
            yield Event(event="error", data={"code": exc.code, "detail": exc.detail})
        except (asyncio.CancelledError, GeneratorExit):
            status, error_code = "cancelled", "client_disconnected"
            raise
        finally:
            timings = run.timings(answered=bool(run.parts) or status == "complete")
            saved, unsaved = await self._saved(prepared, run, status=status, timings=timings, error_code=error_code)
        if unsaved is not None and status == "complete":
            # The stream still ends with an event that has a code, never with a reset connection.
            if reraise:
                raise unsaved
            yield Event(event="error", data={"code": unsaved.code, "detail": unsaved.detail})
            return
        if status == "complete":
            yield Event(
                event="done",
                data={
                    "message_id": None if saved is None else str(saved.id),
                    "usage": run.usage,
                    "timings": timings,
                    "sources_used": len(run.cited),
                    "citations": run.cited,
                    "also_retrieved": run.also_retrieved,
                    "grounding": run.grounding,
                    "llm_fallback": run.llm_fallback,
                },
            )

    async def answer(self, prepared: Prepared) -> Answer:
        """The non-streaming chat answer: the stream, collected and saved; errors are raised as they are."""
        async for _ in self.events(prepared, reraise=True, preliminary=False):
            pass
        if prepared.question is None or prepared.answer_id is None:
            raise ValueError("answer() needs a chat; use query() for stateless questions")
        async with self.db.transaction() as conn:
            answer = await ChatRepository(conn).message(prepared.answer_id)
        if answer is None:  # the chat was deleted while it was being answered
            raise NotFound("No such chat any more.", code="chat_not_found")
        return Answer(question=prepared.question, answer=answer)

    async def save_unstarted(self, prepared: Prepared) -> None:
        """Save the answer to a question whose stream never began (its client left first) as ``cancelled``:
        :meth:`events` saves every answer it starts, and no question is left in the history without one."""
        timings = Timings(embed_ms=0.0, search_ms=0.0, llm_ms=0.0, total_ms=0.0)
        await self._save(prepared, _Run(), status="cancelled", timings=timings, error_code="client_disconnected")

    async def _saved(
        self, prepared: Prepared, run: _Run, *, status: str, timings: Timings, error_code: str | None
    ) -> tuple[Message | None, AppError | None]:
        """The stored answer (none for a stateless question, or a chat deleted meanwhile), or why it could not be
        stored: the database went away while it was answered (an error already in flight wins over that one)."""
        if prepared.chat is None:
            return None, None
        try:
            saved = await asyncio.shield(
                self._save(prepared, run, status=status, timings=timings, error_code=error_code)
            )
        except AppError as exc:
            return None, exc
        return saved, None

    async def _save(
        self, prepared: Prepared, run: _Run, *, status: str, timings: Timings, error_code: str | None
    ) -> Message | None:
        """Complete the question's ``pending`` answer; ``None`` if its chat was deleted meanwhile."""
        if prepared.answer_id is None:
            raise ValueError("nothing to save a stateless answer to")
        async with self.db.transaction() as conn:
            return await ChatRepository(conn).finish_message(
                prepared.answer_id,
                "".join(run.parts),
                status=status,
                citations=run.cited,
                also_retrieved=run.also_retrieved,
                usage=run.usage,
                timings=timings,
                error_code=error_code,
            )


class AnswerStream:
    """One streamed answer. A client that leaves before streaming begins cancels the response before
    :meth:`events` ever runs, so nothing would save the answer; :meth:`settle` runs after the response and
    saves it as cancelled then (found by the soak, ``bench/soak.py``)."""

    def __init__(self, answerer: Answerer, prepared: Prepared) -> None:
        self.answerer = answerer
        self.prepared = prepared
        self.started = False

    async def events(self) -> AsyncIterator[Event]:
        self.started = True
        async for event in self.answerer.events(self.prepared):
            yield event

    async def settle(self) -> None:
        if not self.started:
            await self.answerer.save_unstarted(self.prepared)


class _Run:
    """What one answer has gathered so far: the passages it was given, its text, usage, grounding and clocks."""

    def __init__(self) -> None:
        self.started = self.llm_started = time.perf_counter()
        self.retrieval: Retrieval | None = None
        self.citations: list[Citation] = []
        """Every passage the answer was given, numbered as it may cite them."""
        self.parts: list[str] = []
        self.usage = Usage()
        self.grounded: Grounded | None = None

    def take(self, step: Step) -> None:
        if isinstance(step, Retrieval):
            self.retrieval, self.citations = step, citations_of(step)
            self.llm_started = time.perf_counter()
        elif isinstance(step, Token):
            self.parts.append(step.text)
        elif isinstance(step, Grounded):
            self.grounded = step
        elif isinstance(step, Usage):
            self.usage = step

    def _split(self) -> tuple[list[Citation], list[Citation]]:
        # An answer cut short (an error, a client that left) has no verdict: what it was given counts as cited,
        # so a revocation still withholds it.
        cited = [c.citation for c in self.citations] if self.grounded is None else self.grounded.cited
        return split_citations(self.citations, [c.citation for c in self.citations], cited)

    @property
    def grounding(self) -> Grounding | None:
        """What grounding did: declined from the retrieval scores, or dropped sentences resting on no passage."""
        grounded = self.grounded
        if grounded is None:
            return None
        return Grounding(
            declined=grounded.declined, dropped_sentences=len(grounded.dropped), unsupported=list(grounded.dropped)
        )

    @property
    def llm_fallback(self) -> LlmFallback | None:
        return None if self.grounded is None else self.grounded.llm_fallback

    @property
    def cited(self) -> list[Citation]:
        """The passages the answer cites."""
        return self._split()[0]

    @property
    def also_retrieved(self) -> list[Citation]:
        """The passages it was given and does not cite."""
        return self._split()[1]

    def timings(self, *, answered: bool) -> Timings:
        """Per-stage milliseconds; the LLM's time only if it answered (or began to)."""
        finished = time.perf_counter()
        retrieval = self.retrieval
        return Timings(
            embed_ms=retrieval.embed_ms if retrieval else 0.0,
            search_ms=retrieval.search_ms if retrieval else 0.0,
            llm_ms=round((finished - self.llm_started) * 1000, 3) if answered else 0.0,
            total_ms=round((finished - self.started) * 1000, 3),
        )


def citations_of(retrieval: Retrieval) -> list[Citation]:
    """The passages a retrieval found, numbered as an answer cites them. A citation takes every field of the
    passage's :class:`FoundPassage` as it is, so a field added there reaches the API with nothing to copy by hand."""
    return [Citation(citation=n, **_found(c)) for n, c in enumerate(retrieval.chunks, start=1)]


_FOUND = FoundPassage.__struct_fields__


def _found(chunk: RetrievedChunk) -> dict[str, Any]:
    """The passage's :class:`FoundPassage` fields, its scores rounded to 6 places as the API has always given them."""
    fields = {name: getattr(chunk, name) for name in _FOUND}
    fields["score"], fields["distance"] = round(chunk.score, 6), round(chunk.distance, 6)
    return fields


async def _ending(
    question: str,
    passages: list[Passage],
    grounder: Grounder,
    *,
    shown: str,
    quote: asyncio.Future[Preliminary | None] | None,
    fallback: LlmFallback | None,
) -> tuple[str, list[int], LlmFallback | None]:
    """The answer's last text, its citations and why another provider answered if one did: what grounding leaves
    of the model's answer, then the quote it rests on (:func:`with_the_quote`); or, when nothing of the model's
    answer stands, the quote in its place. ``shown``: the answer's text streamed so far."""
    rest, cited = grounder.finish(), grounder.cited
    supporting = None if quote is None else await quote
    if supporting is None:
        return rest, cited, fallback
    if grounder.only_declined:
        if not answers_over_a_decline(question, passages, supporting.text, supporting.cited):
            return rest, cited, fallback
        return supporting.text, supporting.cited, fallback or DECLINED_FALLBACK
    if grounder.rested_on_nothing:
        return supporting.text, supporting.cited, fallback or UNSUPPORTED_FALLBACK
    rest += with_the_quote(shown + rest, supporting.text)
    return rest, list(dict.fromkeys([*cited, *supporting.cited])), fallback


def with_the_quote(answer: str, quote: str) -> str:
    """What follows a model's answer: the checked quote of the passages, as a Markdown block quote under
    :data:`QUOTE_LEAD`, or nothing when the answer already says every two words of it that follow each other in a
    clause (:func:`_already_says`): the same words in another order may say something else ("vX.Y.Z" against
    "vX.Y.0 … (W < Z)").

    A small model misreads passages that a quote states plainly (on the answer bench's dev split the 0.5B model's
    sentences were wrong on questions the quote answered, and right on others it did not), so the reader gets
    both: the model's words, and the source's own beside them to check them by."""
    if _already_says(answer, quote):
        return ""
    quoted = "\n".join(f"> {line}".rstrip() for line in quote.strip().splitlines())
    return f"\n\n{QUOTE_LEAD}\n\n{quoted}"


def _already_says(answer: str, quote: str) -> bool:
    """Whether ``answer`` says every two words of ``quote`` that follow each other within one of its clauses (a
    one-word clause: its word), citation markers and case aside. Not across a clause's end: a quote leads with its
    section's heading ("Visitors: Visitors must …"), which an answer has no reason to join to the sentence."""
    said = _WORD.findall(_MARKERS.sub(" ", answer).lower())
    pairs, words = set(itertools.pairwise(said)), set(said)
    for clause in _CLAUSE_END.split(_MARKERS.sub(" ", quote).lower()):
        quoted = _WORD.findall(clause)
        if not (set(itertools.pairwise(quoted)) <= pairs if len(quoted) > 1 else set(quoted) <= words):
            return False
    return True


_MARKERS = re.compile(r"\[\d+(?:\s*,\s*\d+)*\]")
_WORD = re.compile(r"\w+")
_CLAUSE_END = re.compile(r"[.:;!?…](?=\s|$)|\n")
"""Where a clause ends: a stop, colon or semicolon before a space (not the dots inside "vX.Y.Z"), or a line's end."""


def _instructions(config: AgentVersion, request: LlmRequest) -> str:
    """What the model is told that its user may not read: the agent's system prompt, its context template's own
    words and its collections' instructions. An answer repeating them is withheld (:class:`Grounder`)."""
    template = (config.context_template or "").replace(CONTEXT_PLACEHOLDER, "\n")
    instructions = sorted({p.instruction for p in request.passages if p.instruction})
    return "\n".join([request.system, template, *instructions])


def _passages(chunks: Sequence[RetrievedChunk]) -> list[Passage]:
    """The chunks as the answer reads them, numbered for citation: each with its context (a parent, or joined
    neighbours)."""
    return [
        Passage(
            collection=c.collection,
            instruction=c.instruction or None,
            document_id=c.document_id,
            document_name=c.document_name,
            page_start=c.page_start,
            page_end=c.page_end,
            text=c.context,
            score=c.score,
            citation=n,
        )
        for n, c in enumerate(chunks, start=1)
    ]


def _llm_request(prepared: Prepared, passages: list[Passage], *, with_system: bool) -> LlmRequest:
    config = prepared.config
    question = grounded_question(prepared.text, passages, config.context_template) if with_system else prepared.text
    return LlmRequest(
        model=config.llm_model,
        system=config.system_prompt.strip() if with_system else "",
        messages=[*prepared.history, ChatMessage(role="user", content=question)],
        passages=passages,
        temperature=config.temperature,
        max_tokens=config.max_tokens,
    )


async def _first_then(
    first: asyncio.Future[Preliminary | None] | None, stream: AsyncGenerator[LlmEvent, None]
) -> AsyncGenerator[Preliminary | LlmEvent, None]:
    """``first``'s quote as soon as it is ready, then the model's events: the model's request is sent at once and
    reads its prompt meanwhile, so the quote costs its first token nothing. Either left unfinished is cancelled."""
    if first is None:
        async with contextlib.aclosing(stream):
            async for item in stream:
                yield item
        return
    head = asyncio.ensure_future(_next(stream))
    try:
        shown = await first
        if shown is not None:
            yield shown
        event = await head
        while event is not None:
            yield event
            event = await _next(stream)
    finally:
        for task in (first, head):
            if not task.done():
                task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task  # a failure no one reads (the model's llm_busy after the quote) is taken here, not logged
        await stream.aclose()


async def _next(stream: AsyncGenerator[LlmEvent, None]) -> LlmEvent | None:
    """The stream's next event; ``None`` at its end."""
    try:
        return await anext(stream)
    except StopAsyncIteration:
        return None


def _event(step: Step, run: _Run) -> Event | None:
    """The stream event a step is shown as, if any (usage and grounding go in ``done``)."""
    if isinstance(step, Retrieval):
        return Event(event="sources", data={"citations": run.citations})
    if isinstance(step, Preliminary):
        return Event(event="preliminary", data={"text": step.text, "citations": step.cited, "provider": EXTRACTIVE})
    if isinstance(step, Token):
        return Event(event="token", data={"text": step.text})
    return None
