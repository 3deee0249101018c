"""Chat Completions answered by kappi's one answer pipeline: an agent the caller may use, their groups from their
token, and :class:`~kappi.chat.answering.Answerer` as the stateless query API runs it.

The agent check is :func:`~kappi.chat.service.visible` (an agent the caller may not use is "not found", word for word
as one that does not exist); retrieval, the relevance floor and grounding are the pipeline's; nothing is stored.
Earlier turns of ``messages`` are the answer's history, as a chat's stored turns are for a follow-up question.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any, cast
from uuid import UUID

import msgspec

from common.auth import Principal
from common.errors import AppError, BadRequest, NotFound
from kappi.agent.models import Agent
from kappi.chat.answering import Event, Prepared
from kappi.chat.service import HISTORY_MESSAGES, ChatService, visible
from kappi.llm.base import ChatMessage, Usage
from kappi.openai_api.models import (
    AssistantMessage,
    Choice,
    ChunkChoice,
    Completion,
    CompletionChunk,
    CompletionRequest,
    CompletionUsage,
    Delta,
    InputMessage,
    ModelCard,
    ModelList,
)

DONE = "[DONE]"
"""The data of the last event of a stream, as OpenAI ends one."""


async def models(chats: ChatService, principal: Principal) -> ModelList:
    """The agents the caller may use, exactly the list ``GET /agents`` gives them."""
    return ModelList(
        data=[
            ModelCard(
                id=str(agent.id),
                created=int(agent.created_at.timestamp()),
                name=agent.name,
                description=agent.description,
            )
            for agent in await chats.usable_agents(principal)
        ]
    )


async def prepare(chats: ChatService, request: CompletionRequest, principal: Principal) -> Prepared:
    """The question as the pipeline takes it, after the agent check; nothing about the request is trusted for access
    (the groups are the token's)."""
    question, history = question_and_history(request.messages)
    agent = await _agent(chats, request.model, principal)
    return Prepared(agent=agent, config=agent.config, text=question, history=history, groups=principal.groups)


async def complete(chats: ChatService, request: CompletionRequest, principal: Principal) -> Completion:
    """The whole answer at once: the query API's answer and citations in OpenAI's shape."""
    prepared = await prepare(chats, request, principal)
    answer = await chats.answerer.query(prepared)
    message = AssistantMessage(
        content=answer.answer, ragu_citations=answer.citations, ragu_also_retrieved=answer.also_retrieved
    )
    return Completion(
        id=_completion_id(),
        created=int(time.time()),
        model=str(prepared.agent.id),
        choices=[Choice(message=message)],
        usage=_usage(answer.usage),
    )


async def stream(chats: ChatService, request: CompletionRequest, principal: Principal) -> AsyncIterator[str]:
    """The answer as ``chat.completion.chunk`` data, ending ``[DONE]``.

    The answer runs until its first text before the stream begins, so every refusal and every failure before any
    text (the agent, the request, an LLM that is busy or down) is an HTTP error with its own status, as an OpenAI
    client expects (its SDKs retry a ``503`` after ``Retry-After``); only a failure after text was sent is an event
    in the stream (``{"error": {...}}``, which the SDKs raise)."""
    prepared = await prepare(chats, request, principal)
    include_usage = request.stream_options is not None and bool(request.stream_options.include_usage)
    # events() is an async generator (annotated as an iterator): closed at once when the stream is
    events = cast(AsyncGenerator[Event, None], chats.answerer.events(prepared, reraise=True, preliminary=False))
    started: list[Event] = []
    try:
        async for event in events:
            started.append(event)
            if event.event in ("token", "done"):
                break
    except BaseException:
        await events.aclose()
        raise
    return _chunks(events, started, str(prepared.agent.id), include_usage=include_usage)


async def _chunks(
    events: AsyncGenerator[Event, None], started: list[Event], model: str, *, include_usage: bool
) -> AsyncIterator[str]:
    """``started``, then the rest of ``events``, as chunks. ``aclosing``: a client that leaves stops the LLM call now
    (the pipeline's own rule)."""
    ident, created = _completion_id(), int(time.time())

    def chunk(delta: Delta | None, *, finish: bool = False, usage: Usage | None = None) -> str:
        choices = [] if delta is None else [ChunkChoice(delta=delta, finish_reason="stop" if finish else None)]
        usage_ = None if usage is None else _usage(usage)
        return _encode(CompletionChunk(id=ident, created=created, model=model, choices=choices, usage=usage_))

    yield chunk(Delta(role="assistant", content=""))
    async with contextlib.aclosing(events):
        try:
            async for event in _chained(started, events):
                if event.event == "token":
                    yield chunk(Delta(content=event.data["text"]))
                elif event.event == "done":
                    cited, also = event.data["citations"], event.data["also_retrieved"]
                    yield chunk(Delta(ragu_citations=cited, ragu_also_retrieved=also), finish=True)
                    if include_usage:
                        yield chunk(None, usage=event.data["usage"])
        except AppError as exc:  # after text was sent: the stream's last event says why it ends here
            yield _encode({"error": error_body(exc.code, exc.detail, status=exc.status)})
            return
    yield DONE


async def _chained(started: list[Event], rest: AsyncIterator[Event]) -> AsyncIterator[Event]:
    for event in started:
        yield event
    async for event in rest:
        yield event


def question_and_history(messages: list[InputMessage]) -> tuple[str, list[ChatMessage]]:
    """The last message is the question (it must be the user's); the user and assistant turns before it, the last
    :data:`~kappi.chat.service.HISTORY_MESSAGES` of them, are its history. System and developer messages are not
    read: the agent's own instructions stand, and a caller's may not replace them."""
    *earlier, last = messages
    if last.role != "user":
        raise BadRequest(
            f"the last message is the question and must have the role user, not {last.role}",
            code="last_message_not_user",
        )
    question = _text(last, len(messages) - 1)
    if not question.strip():
        raise BadRequest("the question (the last message) is empty", code="empty_question")
    history = [
        ChatMessage(role="user" if m.role == "user" else "assistant", content=text)
        for n, m in enumerate(earlier)
        if m.role in ("user", "assistant") and (text := _text(m, n)).strip()
    ]
    return question, history[-HISTORY_MESSAGES:]


def _text(message: InputMessage, index: int) -> str:
    """A message's text: its string, or its ``text`` parts joined by a blank line. Any other part (an image, a file)
    is refused: an answer may not pretend to have read it."""
    if message.content is None or isinstance(message.content, str):
        return message.content or ""
    others = sorted({part.type for part in message.content if part.type != "text"})
    if others:
        raise BadRequest(
            f"messages[{index}] holds {', '.join(others)} content; only text is read",
            code="unsupported_content",
            extra={"param": f"messages[{index}].content"},
        )
    return "\n\n".join(part.text or "" for part in message.content)


async def _agent(chats: ChatService, model: str, principal: Principal) -> Agent:
    """The agent named by ``model`` if the caller may use it; otherwise one answer, whether it exists or not."""
    try:
        agent_id: UUID | None = UUID(model)
    except ValueError:
        agent_id = None
    found = None if agent_id is None else await chats.agents.get(agent_id)
    try:
        return visible(found, agent_id or uuid.UUID(int=0), principal)
    except NotFound:
        raise NotFound(
            f"The model `{model}` does not exist or you do not have access to it; GET /v1/models lists yours.",
            code="model_not_found",
            extra={"param": "model"},
        ) from None


ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error"}


def error_body(code: str, message: str, *, status: int, param: str | None = None) -> dict[str, Any]:
    """OpenAI's error object: ``type`` from the status (as OpenAI's are), ``code`` Ragu's own stable code."""
    kind = ERROR_TYPES.get(status) or ("server_error" if status >= 500 else "invalid_request_error")
    if status == 429:
        kind = "rate_limit_error"
    return {"message": message, "type": kind, "param": param, "code": code}


def _usage(usage: Usage) -> CompletionUsage:
    prompt, completion = usage.input_tokens or 0, usage.output_tokens or 0
    return CompletionUsage(prompt_tokens=prompt, completion_tokens=completion, total_tokens=prompt + completion)


def _completion_id() -> str:
    return f"chatcmpl-{uuid.uuid4().hex}"


def _encode(value: Any) -> str:
    return msgspec.json.encode(value).decode()
