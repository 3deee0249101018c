"""Parse in a separate process, so that a heavy document never stalls the event loop that answers questions.

A worker thread is not enough: the parsers are pure Python or hold the GIL inside C (markdown-it, lxml), and
parsing a 4 MB Markdown file in ``asyncio.to_thread`` held kappi's ``/health`` up to 0.9 s in ``ragu serve``.
The processes come from a forkserver that has imported the parsers once (a clean interpreter: no threads or
event loop inherited). They start on first use and end with the interpreter, which lets a running parse finish
(and they end on their own if the server is killed). A result comes back in a msgpack file, decoded in a thread:
through the executor's pipe it would be unpickled holding the GIL, and a process killed while writing a large
result there leaves a partial message that hangs the executor for good (CPython 3.11).
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import tempfile
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

import msgspec

from chonkit.document.parsed import ParsedDocument
from chonkit.document.parsing.config import ParseConfig
from chonkit.document.parsing.doctype import DocumentType
from chonkit.document.parsing.parser import parse
from common.errors import InvalidInput

PARSE_PROCESSES = 2
"""Two parses at a time: uploads, previews and the embedding worker share them, and they leave the event loop
a core of its own on a two-core machine."""

_pool: ProcessPoolExecutor | None = None
_decoder = msgspec.msgpack.Decoder(ParsedDocument)


async def parse_isolated(data: bytes, doc_type: DocumentType, config: ParseConfig) -> ParsedDocument:
    """:func:`~chonkit.document.parsing.parse` in a parse process; raises what it raises.

    Raises:
        InvalidInput: also ``document_corrupt`` when the parse process dies on the document (a crash in a
            native library, or the kernel ending it for its memory).
    """
    global _pool  # noqa: PLW0603  # one set of parse processes per server process
    pool = _pool or await _started_processes()
    descriptor, name = tempfile.mkstemp(prefix="ragu-parsed-", suffix=".msgpack")
    os.close(descriptor)
    result = Path(name)
    future: Future[None] | None = None
    try:
        future = pool.submit(_parse_into, result, data, doc_type, config)
        await asyncio.wrap_future(future)
        return await asyncio.to_thread(_decoder.decode, await asyncio.to_thread(result.read_bytes))
    except BrokenProcessPool:
        if _pool is pool:
            _pool = None
        raise InvalidInput(
            "The document could not be read: the parser stopped unexpectedly on it.", code="document_corrupt"
        ) from None
    finally:
        if future is None or future.done():
            os.unlink(result)
        else:  # cancelled while the parse runs on: its result goes when it ends
            future.add_done_callback(lambda _: os.unlink(result))


async def _started_processes() -> ProcessPoolExecutor:
    global _pool  # noqa: PLW0603
    started = await asyncio.to_thread(_start_processes)
    if _pool is None:
        _pool = started
    else:  # another parse started them meanwhile
        started.shutdown(wait=False)
    return _pool


def _start_processes() -> ProcessPoolExecutor:
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["chonkit.document.parsing.isolated"])
    pool = ProcessPoolExecutor(PARSE_PROCESSES, mp_context=context)
    pool.submit(int).result()  # waits, off the event loop, for the forkserver's imports (~0.5 s)
    return pool


def _parse_into(result: Path, data: bytes, doc_type: DocumentType, config: ParseConfig) -> None:
    result.write_bytes(msgspec.msgpack.encode(parse(data, doc_type, config)))
