"""The ``openai`` provider against a stand-in OpenAI-compatible server (real HTTP, the documented SSE format)."""

from __future__ import annotations

import asyncio
import socket
import time
from typing import Any

import pytest

from common.errors import AppError, InvalidInput, Unavailable
from kappi.llm import ChatMessage, LlmRequest, Passage, Token, Usage, complete, system_prompt_with_context
from kappi.llm.openai_compatible import OpenAICompatibleProvider
from tests.support.llm_standins import OpenAIStandin, Script, _Plan

PASSAGES = [
    Passage(
        collection="HR",
        instruction="Quote the handbook.",
        document_id="doc-1",
        document_name="handbook.pdf",
        page_start=3,
        page_end=4,
        text="The notice period is 30 days.",
        score=0.8,
        citation=1,
    )
]


def question(text: str = "What is the notice period?") -> LlmRequest:
    return LlmRequest(
        model="llama3.2",
        system=system_prompt_with_context("You are the HR assistant.", PASSAGES),
        messages=[
            ChatMessage(role="user", content="Hi"),
            ChatMessage(role="assistant", content="Hello!"),
            ChatMessage(role="user", content=text),
        ],
        passages=PASSAGES,
        temperature=0.1,
        max_tokens=256,
    )


async def collect(provider: OpenAICompatibleProvider, request: LlmRequest) -> list[Token | Usage]:
    return [event async for event in provider.stream(request)]


async def test_openai_standin_streams_tokens_in_order_then_usage(openai_standin: OpenAIStandin) -> None:
    provider = OpenAICompatibleProvider(base_url=openai_standin.base_url, models=["llama3.2"])
    try:
        events = await collect(provider, question())
    finally:
        await provider.aclose()
    assert events == [
        Token(text="The notice"),
        Token(text=" period is"),
        Token(text=" 30 days"),
        Token(text=" [1]."),
        Usage(input_tokens=42, output_tokens=7),
    ]
    [sent] = openai_standin.requests
    assert "authorization" not in sent.headers  # Ollama-style: no key, no header
    assert sent.body == {
        "model": "llama3.2",
        "messages": [
            {"role": "system", "content": question().system},
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello!"},
            {"role": "user", "content": "What is the notice period?"},
        ],
        "temperature": 0.1,
        "max_tokens": 256,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    assert '<source id="1" document="handbook.pdf" pages="3-4">' in sent.body["messages"][0]["content"]
    assert openai_standin.completed_streams == 1
    assert not openai_standin.client_disconnected.is_set()


async def test_openai_standin_reuses_the_connection_and_complete_joins_the_tokens(
    openai_standin: OpenAIStandin,
) -> None:
    provider = OpenAICompatibleProvider(base_url=openai_standin.base_url)
    try:
        openai_standin.script = Script(tokens=("a", "é", "\u2028", "日本"), input_tokens=5, output_tokens=4)
        first = await complete(provider, question())
        second = await complete(provider, question())
    finally:
        await provider.aclose()
    assert first == second == ("aé\u2028日本", Usage(input_tokens=5, output_tokens=4))
    assert openai_standin.completed_streams == 2
    assert openai_standin.connections == 1  # read to the end of each body, so the connection went back to the pool


async def test_openai_standin_bearer_key_is_sent_and_a_wrong_one_is_llm_auth_failed() -> None:
    async with OpenAIStandin(api_key="sk-right") as standin:
        right = OpenAICompatibleProvider(base_url=standin.base_url, api_key="sk-right")
        wrong = OpenAICompatibleProvider(base_url=standin.base_url, api_key="sk-wrong")
        try:
            text, _ = await complete(right, question())
            with pytest.raises(Unavailable) as caught:
                await complete(wrong, question())
        finally:
            await right.aclose()
            await wrong.aclose()
    assert text == "The notice period is 30 days [1]."
    assert standin.requests[0].headers["authorization"] == "Bearer sk-right"
    assert caught.value.code == "llm_auth_failed"
    assert "invalid api key" in caught.value.detail


@pytest.mark.parametrize(
    ("status", "error_type", "code"),
    [
        (401, Unavailable, "llm_auth_failed"),
        (403, Unavailable, "llm_auth_failed"),
        (429, Unavailable, "llm_unavailable"),
        (500, Unavailable, "llm_unavailable"),
        (503, Unavailable, "llm_unavailable"),
        (504, Unavailable, "llm_timeout"),
        (400, InvalidInput, "llm_rejected"),
        (404, InvalidInput, "llm_rejected"),
    ],
)
async def test_openai_standin_error_statuses_map_to_codes(
    openai_standin: OpenAIStandin, status: int, error_type: type[AppError], code: str
) -> None:
    openai_standin.script = Script(status=status, error_message=f"scripted {status}")
    provider = OpenAICompatibleProvider(base_url=openai_standin.base_url)
    try:
        with pytest.raises(error_type) as caught:
            await collect(provider, question())
    finally:
        await provider.aclose()
    assert caught.value.code == code
    assert f"scripted {status}" in caught.value.detail
    assert caught.value.extra == {"provider": "openai", "status": status}


async def test_openai_standin_stalled_stream_ends_with_llm_timeout(openai_standin: OpenAIStandin) -> None:
    """The stand-in keeps sending keep-alive comments: only real events reset the clock."""
    openai_standin.script = Script(stall_after=1)
    provider = OpenAICompatibleProvider(base_url=openai_standin.base_url, timeout=0.3)
    received: list[Token | Usage] = []

    async def drain() -> None:
        async for event in provider.stream(question()):
            received.append(event)

    started = time.perf_counter()
    try:
        with pytest.raises(Unavailable) as caught:
            await asyncio.wait_for(drain(), 5)  # a hang fails the test rather than blocking the suite
    finally:
        await provider.aclose()
    assert caught.value.code == "llm_timeout"
    assert received == [Token(text="The notice")]
    assert time.perf_counter() - started < 3
    await asyncio.wait_for(openai_standin.client_disconnected.wait(), 2)


async def test_openai_standin_sees_the_connection_closed_when_the_stream_is_closed_mid_answer(
    openai_standin: OpenAIStandin,
) -> None:
    openai_standin.script = Script(stall_after=2)
    provider = OpenAICompatibleProvider(base_url=openai_standin.base_url, timeout=30)
    try:
        stream = provider.stream(question())
        assert await anext(stream) == Token(text="The notice")
        assert await anext(stream) == Token(text=" period is")
        await stream.aclose()  # what the chat service does when the browser goes away
        await asyncio.wait_for(openai_standin.client_disconnected.wait(), 2)
    finally:
        await provider.aclose()
    assert openai_standin.completed_streams == 0


async def test_openai_standin_dropped_connection_is_llm_unavailable(openai_standin: OpenAIStandin) -> None:
    openai_standin.script = Script(drop_after=1)
    provider = OpenAICompatibleProvider(base_url=openai_standin.base_url)
    try:
        with pytest.raises(Unavailable) as caught:
            await collect(provider, question())
    finally:
        await provider.aclose()
    assert caught.value.code == "llm_unavailable"


async def test_openai_standin_unreachable_server_is_llm_unavailable() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # closed again before the request: nothing listens there
    provider = OpenAICompatibleProvider(base_url=f"http://127.0.0.1:{port}/v1")
    try:
        with pytest.raises(Unavailable) as caught:
            await collect(provider, question())
    finally:
        await provider.aclose()
    assert caught.value.code == "llm_unavailable"
    assert "ConnectError" in caught.value.detail


async def test_openai_standin_error_event_mid_stream_is_llm_unavailable_after_the_tokens_before_it(
    openai_standin: OpenAIStandin,
) -> None:
    openai_standin.script = Script(error_after=1, error_message="the model crashed")
    provider = OpenAICompatibleProvider(base_url=openai_standin.base_url)
    received: list[Token | Usage] = []

    async def drain() -> None:
        async for event in provider.stream(question()):
            received.append(event)

    try:
        with pytest.raises(Unavailable) as caught:
            await drain()
    finally:
        await provider.aclose()
    assert caught.value.code == "llm_unavailable"
    assert "the model crashed" in caught.value.detail
    assert received == [Token(text="The notice")]


class _TruncatingStandin(OpenAIStandin):
    """The stand-in, except that the event after the first token is cut short mid-JSON, as a faulty server or proxy
    sends it: the cut event still holds the model's text."""

    def plan(self, body: Any, script: Script) -> _Plan:
        plan = super().plan(body, script)
        cut = b'data: {"choices": [{"index": 0, "delta": {"content": "Confidential: the Orion reorganisation\n\n'
        plan.events.insert(plan.token_positions[0] + 1, cut)
        return plan


async def test_openai_standin_malformed_event_is_llm_unavailable_without_quoting_the_models_text() -> None:
    """Regression (#26): the error quoted the event's first 100 characters, which may be the model's raw answer (its
    system prompt repeated), into a detail that reaches the user and the log."""
    async with _TruncatingStandin() as standin:
        provider = OpenAICompatibleProvider(base_url=standin.base_url)
        try:
            with pytest.raises(Unavailable) as caught:
                await collect(provider, question())
        finally:
            await provider.aclose()
    assert caught.value.code == "llm_unavailable"
    assert "malformed event" in caught.value.detail
    assert "Orion" not in caught.value.detail
