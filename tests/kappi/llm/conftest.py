"""Stand-in servers for the LLM providers, one per test, on ephemeral ports of 127.0.0.1."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.support.llm_standins import CohereChatStandin, OpenAIStandin


@pytest.fixture
async def openai_standin() -> AsyncIterator[OpenAIStandin]:
    async with OpenAIStandin() as standin:
        yield standin


@pytest.fixture
async def cohere_standin() -> AsyncIterator[CohereChatStandin]:
    async with CohereChatStandin() as standin:
        yield standin
