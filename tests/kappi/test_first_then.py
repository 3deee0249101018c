"""The preliminary quote and the model's stream run side by side (kappi/chat/answering.py ``_first_then``): a
reader who leaves after the quote must leave nothing behind that fails unobserved."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import AsyncGenerator
from typing import Any

from common.errors import Unavailable
from kappi.chat.answering import Preliminary, _first_then
from kappi.llm.base import LlmEvent


async def _busy() -> AsyncGenerator[LlmEvent, None]:
    raise Unavailable("local is answering 3 questions", code="llm_busy")
    yield  # an async generator, as a provider's stream is


async def _quote() -> Preliminary | None:
    return Preliminary(text="Leave is 25 days.", cited=[1])


async def test_a_reader_who_leaves_after_the_quote_leaves_no_unretrieved_model_error() -> None:
    """The model refused (llm_busy) while the quote was shown; the reader then left. Before, the refusal stayed
    unretrieved in its task and asyncio logged it as an error when the task was collected."""
    loop = asyncio.get_running_loop()
    unobserved: list[dict[str, Any]] = []
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _, context: unobserved.append(context))
    try:
        stream = _first_then(asyncio.ensure_future(_quote()), _busy())
        shown = await anext(stream)
        await asyncio.sleep(0.01)  # the model's first event, its refusal, arrives meanwhile
        await stream.aclose()
        del stream
        gc.collect()
        await asyncio.sleep(0)
    finally:
        loop.set_exception_handler(previous)

    assert isinstance(shown, Preliminary)
    assert unobserved == []
