"""Parsing in a parse process: the same results and errors as in-process, and an event loop left free."""

from __future__ import annotations

import asyncio
import itertools
import os
import signal
import time

import msgspec
import pytest

from chonkit.document import isolated
from chonkit.document.chunking import default_chunk_config
from chonkit.document.isolated import chunk_isolated, parse_isolated
from chonkit.document.parsing import DocumentType, PageRange, ParseConfig
from chonkit.document.parsing.parser import parse
from common.embedders.registry import default_registry
from common.errors import InvalidInput
from tests.chonkit.parsing.conftest import make_pdf

LOOP_STALL_BAR_SECONDS = 0.3
"""Issue #14: ``GET /kappi/health`` never takes over 300 ms while chonkit parses."""


async def test_results_are_those_of_an_in_process_parse(samples: dict[DocumentType, bytes]) -> None:
    config = ParseConfig(line_filters=["(?i)first"])
    for doc_type, data in samples.items():
        assert await parse_isolated(data, doc_type, config) == parse(data, doc_type, config), doc_type


async def test_errors_keep_their_status_code_and_extra() -> None:
    config = ParseConfig(page_range=PageRange(start=2, end=5))

    with pytest.raises(InvalidInput) as caught:
        await parse_isolated(make_pdf(["one", "two"]), DocumentType.PDF, config)

    assert caught.value.code == "page_range_out_of_bounds"
    assert caught.value.extra == {"start": 2, "end": 5, "page_count": 2}


async def test_a_heavy_parse_leaves_the_event_loop_free() -> None:
    """msgspec decodes and formats a 12 MB JSON in single calls holding the GIL: in a worker thread that stalled
    the event loop for 0.4-0.9 s."""
    data = msgspec.json.encode([{"id": i, "name": f"item {i}", "tags": ["a", "b"]} for i in range(200_000)])
    await parse_isolated(b"{}", DocumentType.JSON, ParseConfig())  # processes started, as in a running server
    ticks = [time.perf_counter()]

    async def tick() -> None:
        while True:
            await asyncio.sleep(0.01)
            ticks.append(time.perf_counter())

    ticker = asyncio.create_task(tick())
    doc = await parse_isolated(data, DocumentType.JSON, ParseConfig())
    ticks.append(time.perf_counter())  # the loop's first moment after the parse ends the last gap
    ticker.cancel()

    assert doc.blocks[0].kind == "code"
    assert max(after - before for before, after in itertools.pairwise(ticks)) < LOOP_STALL_BAR_SECONDS


async def test_a_parse_process_that_dies_is_a_clear_error_and_the_next_parse_works() -> None:
    """As when the kernel ends a parse for its memory, or a native library crashes on a hostile file."""
    data = b"# Title\n\nA paragraph of text.\n\n" * 40_000  # about 2 s of parsing
    await parse_isolated(b"{}", DocumentType.JSON, ParseConfig())
    parsing = asyncio.create_task(parse_isolated(data, DocumentType.MARKDOWN, ParseConfig()))
    await asyncio.sleep(0.3)
    assert isolated._pool is not None
    for pid in list(isolated._pool._processes):  # the executor's own record of its processes
        os.kill(pid, signal.SIGKILL)

    with pytest.raises(InvalidInput) as caught:
        await parsing

    assert caught.value.code == "document_corrupt"
    assert (await parse_isolated(b'{"ok": true}', DocumentType.JSON, ParseConfig())).text == '{\n  "ok": true\n}'


async def test_chunking_a_large_document_leaves_the_event_loop_free() -> None:
    """The local model's tokenizer counts a large document's chunks in a parse process: from a worker thread its
    batch calls held the GIL and stalled the event loop past the bar (the field trial saw ``/kappi/health`` wait
    ~0.5 s during such a preview; 160,000 JSON items stall a thread's loop ~0.45 s here)."""
    data = msgspec.json.encode([{"id": i, "name": f"item {i}", "tags": ["a", "b"]} for i in range(160_000)])
    doc = await parse_isolated(data, DocumentType.JSON, ParseConfig())
    tokenizer = default_registry().get("local", "all-MiniLM-L6-v2")
    ticks = [time.perf_counter()]

    async def tick() -> None:
        while True:
            await asyncio.sleep(0.01)
            ticks.append(time.perf_counter())

    ticker = asyncio.create_task(tick())
    result = await chunk_isolated(doc, default_chunk_config(), "local", "all-MiniLM-L6-v2", tokenizer, max_tokens=256)
    ticks.append(time.perf_counter())
    ticker.cancel()

    assert result.chunks
    assert all(c.token_count == tokenizer.count([c.text])[0] for c in result.chunks[:50])  # the model's counts
    assert max(after - before for before, after in itertools.pairwise(ticks)) < LOOP_STALL_BAR_SECONDS
