"""The ``cohere`` provider: the official SDK's v2 ``chat_stream`` against a stand-in ``/v2/chat`` stream."""

from __future__ import annotations

import asyncio
import time

import pytest

from common.errors import AppError, InvalidInput, Unavailable
from kappi.llm import ChatMessage, LlmRequest, Passage, Token, Usage, complete, system_prompt_with_context
from kappi.llm.cohere_chat import CohereChatProvider
from tests.support.llm_standins import CohereChatStandin, Script

PASSAGES = [
    Passage(
        collection="HR",
        instruction=None,
        document_id="doc-1",
        document_name="handbook.pdf",
        page_start=3,
        page_end=3,
        text="The notice period is 30 days.",
        score=0.8,
        citation=1,
    )
]


def question() -> LlmRequest:
    return LlmRequest(
        model="command-r-08-2024",
        system=system_prompt_with_context("You are the HR assistant.", PASSAGES),
        messages=[
            ChatMessage(role="user", content="Hi"),
            ChatMessage(role="assistant", content="Hello!"),
            ChatMessage(role="user", content="What is the notice period?"),
        ],
        passages=PASSAGES,
        temperature=0.2,
        max_tokens=300,
    )


def provider_for(
    standin: CohereChatStandin, *, api_key: str = "test-cohere-key", timeout: float = 10
) -> CohereChatProvider:
    return CohereChatProvider(api_key=api_key, base_url=standin.root_url, timeout=timeout)


async def test_cohere_chat_standin_streams_content_deltas_in_order_then_billed_usage(
    cohere_standin: CohereChatStandin,
) -> None:
    provider = provider_for(cohere_standin)
    try:
        events = [event async for event in provider.stream(question())]
    finally:
        await provider.aclose()
    assert events == [
        Token(text="The notice"),
        Token(text=" period is"),
        Token(text=" 30 days"),
        Token(text=" [1]."),
        Usage(input_tokens=42, output_tokens=7),  # billed units, not the raw 102 prompt tokens
    ]
    [sent] = cohere_standin.requests
    assert sent.path == "/v2/chat"
    assert sent.headers["authorization"] == "Bearer test-cohere-key"
    assert sent.body == {
        "model": "command-r-08-2024",
        "messages": [
            {"role": "system", "content": question().system},
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello!"},
            {"role": "user", "content": "What is the notice period?"},
        ],
        "temperature": 0.2,
        "max_tokens": 300,
        "stream": True,
    }


async def test_cohere_chat_standin_complete_joins_the_answer(cohere_standin: CohereChatStandin) -> None:
    cohere_standin.script = Script(tokens=("Thirty", " days", " [1]."), input_tokens=9, output_tokens=3)
    provider = provider_for(cohere_standin)
    try:
        assert await complete(provider, question()) == ("Thirty days [1].", Usage(input_tokens=9, output_tokens=3))
    finally:
        await provider.aclose()
    assert provider.models() == [
        "command-a-03-2025",
        "command-r-plus-08-2024",
        "command-r-08-2024",
        "command-r7b-12-2024",
    ]


async def test_cohere_chat_standin_wrong_key_is_llm_auth_failed(cohere_standin: CohereChatStandin) -> None:
    provider = provider_for(cohere_standin, api_key="not-the-key")
    try:
        with pytest.raises(Unavailable) as caught:
            await complete(provider, question())
    finally:
        await provider.aclose()
    assert caught.value.code == "llm_auth_failed"
    assert "invalid api key" in caught.value.detail
    assert len(cohere_standin.requests) == 1  # retries are off


@pytest.mark.parametrize(
    ("status", "error_type", "code"),
    [
        (498, Unavailable, "llm_auth_failed"),
        (429, Unavailable, "llm_unavailable"),
        (500, Unavailable, "llm_unavailable"),
        (503, Unavailable, "llm_unavailable"),
        (400, InvalidInput, "llm_rejected"),
        (422, InvalidInput, "llm_rejected"),
    ],
)
async def test_cohere_chat_standin_error_statuses_map_to_codes(
    cohere_standin: CohereChatStandin, status: int, error_type: type[AppError], code: str
) -> None:
    cohere_standin.script = Script(status=status, error_message=f"scripted {status}")
    provider = provider_for(cohere_standin)
    try:
        with pytest.raises(error_type) as caught:
            await complete(provider, question())
    finally:
        await provider.aclose()
    assert caught.value.code == code
    assert f"scripted {status}" in caught.value.detail
    assert len(cohere_standin.requests) == 1


async def test_cohere_chat_standin_stalled_stream_ends_with_llm_timeout(cohere_standin: CohereChatStandin) -> None:
    cohere_standin.script = Script(stall_after=1)
    provider = provider_for(cohere_standin, timeout=0.3)
    received: list[Token | Usage] = []

    async def drain() -> None:
        async for event in provider.stream(question()):
            received.append(event)

    started = time.perf_counter()
    try:
        with pytest.raises(Unavailable) as caught:
            await asyncio.wait_for(drain(), 5)
    finally:
        await provider.aclose()
    assert caught.value.code == "llm_timeout"
    assert received == [Token(text="The notice")]
    assert time.perf_counter() - started < 3
    await asyncio.wait_for(cohere_standin.client_disconnected.wait(), 2)


async def test_cohere_chat_standin_sees_the_connection_closed_when_the_stream_is_closed_mid_answer(
    cohere_standin: CohereChatStandin,
) -> None:
    cohere_standin.script = Script(stall_after=2)
    provider = provider_for(cohere_standin, timeout=30)
    try:
        stream = provider.stream(question())
        assert [await anext(stream), await anext(stream)] == [Token(text="The notice"), Token(text=" period is")]
        await stream.aclose()
        await asyncio.wait_for(cohere_standin.client_disconnected.wait(), 2)
    finally:
        await provider.aclose()
    assert cohere_standin.completed_streams == 0


async def test_cohere_chat_standin_dropped_connection_is_llm_unavailable(cohere_standin: CohereChatStandin) -> None:
    cohere_standin.script = Script(drop_after=2)
    provider = provider_for(cohere_standin)
    try:
        with pytest.raises(Unavailable) as caught:
            await complete(provider, question())
    finally:
        await provider.aclose()
    assert caught.value.code == "llm_unavailable"


async def test_cohere_chat_standin_error_event_mid_stream_is_llm_unavailable_after_the_tokens_before_it(
    cohere_standin: CohereChatStandin,
) -> None:
    cohere_standin.script = Script(error_after=1, error_message="the model crashed")
    provider = provider_for(cohere_standin)
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
