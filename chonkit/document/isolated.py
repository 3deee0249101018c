"""Parse and chunk in separate processes, so that a heavy document never stalls the event loop that answers
questions.

A worker thread is not enough: the parsers and the chunker are pure Python or hold the GIL inside C
(markdown-it, lxml, the tokenizer), so in ``ragu serve`` a large preview held kappi's ``/health`` for most of a
second from a thread. The processes come from a forkserver that has imported the parsers once (a clean
interpreter: no threads or event loop inherited). They start on first use and end with the interpreter, which
lets a running parse finish; if the server is killed, they end too (:func:`_end_with`). Chunking runs there for the
``local`` models, whose tokenizer each process loads once; other providers' tokenizers chunk in a thread.
A result comes back in a msgpack file, read and decoded in a thread: through the executor's pipe it would be
unpickled holding the GIL, and a process killed while writing a large result there leaves a partial message that
hangs the executor for good (CPython 3.11). Decoding holds the GIL too, so a chunk result comes in frames of
:data:`CHUNKS_PER_FRAME`: the loop waits for one frame's decode at most, not the whole result's (a tenth of a
second and more for a large document).

A parse can be stopped (issue #26: OCR held the only worker for minutes and ignored its job's cancel): the caller
gives :func:`parse_isolated` an event, and when it is set (or the caller is cancelled) the call ends at once and a
flag file next to the result file tells the parse process to stop before its next page
(:func:`~chonkit.document.parsing.ocr.stop_if_asked`), seconds later at most. The process is never killed for it:
that would break the executor, and with it the other process's parse (somebody's upload or preview). A file, not
a ``multiprocessing.Event``: the executor pickles its calls, which such an event cannot pass through, and a file's
existence costs one ``stat`` a page to ask.
"""

from __future__ import annotations

import asyncio
import functools
import multiprocessing
import os
import select
import tempfile
import threading
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import TypeVar

import msgspec

from chonkit.document.chunking import Chunk, ChunkConfig, ChunkResult, TokenCounter, chunk
from chonkit.document.parsed import ParsedDocument
from chonkit.document.parsing.config import ParseConfig
from chonkit.document.parsing.doctype import DocumentType
from chonkit.document.parsing.ocr import ParseStopped
from common.embedders.registry import default_registry
from common.errors import InvalidInput

PARSE_PROCESSES = 2
"""Two parses at a time: uploads, previews and the embedding worker share them, and they leave the event loop
a core of its own on a two-core machine."""

T = TypeVar("T")

IN_PROCESS_TOKENIZERS = frozenset({"local"})
"""Providers whose tokenizers a parse process can load on its own (no key, no network)."""

PARSERS = "chonkit.document.parsing.parser"
"""Every parser (pymupdf, python-docx, markdown-it: ~0.8 s to import), imported by the forkserver the parse
processes come from and never by the server that starts them, which has no use for it."""

CHUNKS_PER_FRAME = 256
"""Chunks decoded in one go (a few milliseconds of holding the GIL)."""


class _FramedChunks(msgspec.Struct, array_like=True):
    """A :class:`ChunkResult` whose chunk lists are msgpack frames of up to :data:`CHUNKS_PER_FRAME` each."""

    chunks: list[bytes]
    parents: list[bytes]
    oversized: list[int]


_pool: ProcessPoolExecutor | None = None
_decoder = msgspec.msgpack.Decoder(ParsedDocument)
_framed_decoder = msgspec.msgpack.Decoder(_FramedChunks)
_frame_decoder = msgspec.msgpack.Decoder(list[Chunk])


async def parse_isolated(
    data: bytes,
    doc_type: DocumentType,
    config: ParseConfig,
    *,
    recognise: bool = True,
    stop: asyncio.Event | None = None,
) -> ParsedDocument:
    """:func:`~chonkit.document.parsing.parse` in a parse process; raises what it raises.

    OCR takes seconds a page, so an upload checks with ``recognise=False`` and leaves the recognition to the
    embedding worker (and to a preview that asks for it); each parse process loads the OCR models once.

    Args:
        stop: when set, the call ends at once with :class:`ParseStopped`, and the parse process stops before its
            next page. Being cancelled stops the parse process alike.

    Raises:
        InvalidInput: also ``document_corrupt`` when the parse process dies on the document (a crash in a
            native library, or the kernel ending it for its memory).
        ParseStopped: ``stop`` was set first.
    """
    return await _in_process(_decoder.decode, _parse_into, data, doc_type, config, recognise, stop=stop)


async def chunk_isolated(
    doc: ParsedDocument, config: ChunkConfig, provider: str, model: str, tokenizer: TokenCounter, *, max_tokens: int
) -> ChunkResult:
    """:func:`~chonkit.document.chunking.chunk` with ``provider``'s ``model`` counting tokens: in a parse process
    when its tokenizer can load there (:data:`IN_PROCESS_TOKENIZERS`), else with ``tokenizer`` in a thread."""
    if provider not in IN_PROCESS_TOKENIZERS:
        return await asyncio.to_thread(chunk, doc, config, tokenizer, max_tokens=max_tokens)
    return await _in_process(_unframed, _chunk_into, doc, config, (provider, model), max_tokens)


async def _in_process(
    decode: Callable[[bytes], T], work: Callable[..., None], *args: object, stop: asyncio.Event | None = None
) -> T:
    """Run ``work(*args, result=path, flag=path)`` in a parse process; the msgpack bytes it wrote, read and
    decoded off the loop. Left before the work ends (``stop`` set, or cancelled), the flag file is made, which
    tells the work to stop; both files go when it ends."""
    global _pool  # noqa: PLW0603  # one set of parse processes per server process
    if stop is not None and stop.is_set():
        raise ParseStopped("stopped before it started")
    pool = _pool or await _started_processes()
    descriptor, name = tempfile.mkstemp(prefix="ragu-parsed-", suffix=".msgpack")
    os.close(descriptor)
    result = Path(name)
    flag = result.with_name(result.name + ".stop")
    future: Future[None] | None = None
    try:
        future = pool.submit(work, *args, result=result, flag=flag)
        await _done_unless_stopped(asyncio.wrap_future(future), stop)
        return await asyncio.to_thread(lambda: decode(result.read_bytes()))
    except BrokenProcessPool:
        if _pool is pool:
            _pool = None
        raise InvalidInput(
            "The document could not be read: the parser stopped unexpectedly on it.", code="document_corrupt"
        ) from None
    finally:
        if future is None or future.done():
            _remove(result, flag)
        else:  # left while the work runs on: told to stop, it ends at its next page, and its files go then
            flag.touch()
            future.add_done_callback(lambda _: _remove(result, flag))


async def _done_unless_stopped(work: asyncio.Future[None], stop: asyncio.Event | None) -> None:
    """Wait for ``work``; raises :class:`ParseStopped` as soon as ``stop`` is set, if that comes first. ``work``
    is cancelled when left, so that nobody is owed its outcome (and a call still queued never starts)."""
    if stop is None:
        await work  # cancelling this await cancels ``work`` too
        return
    stopping = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait((work, stopping), return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopping.cancel()
        if not work.done():
            work.cancel()
    if work.cancelled():
        raise ParseStopped("stopped by its caller")
    work.result()  # the parse's own error, if any


def _remove(*paths: Path) -> None:
    for path in paths:
        path.unlink(missing_ok=True)


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
    context.set_forkserver_preload(["chonkit.document.isolated", PARSERS])
    pool = ProcessPoolExecutor(PARSE_PROCESSES, mp_context=context, initializer=_end_with, initargs=(os.getpid(),))
    pool.submit(int).result()  # waits, off the event loop, for the forkserver's imports (~0.5 s)
    return pool


def _end_with(parent: int) -> None:
    """Make this parse process exit when ``parent`` (the process whose executor it serves) does, however it ends.

    A killed parent runs no clean-up, and nothing else would notice: the process holds its own call queue's pipe
    and the forkserver's liveness pipe open, so it waits for work forever and keeps the forkserver alive with it.
    Linux's pidfd says when the parent ends without polling; elsewhere the old behaviour stays.
    """
    if not hasattr(os, "pidfd_open"):
        return
    threading.Thread(target=_exit_when_gone, args=(parent,), name="end-with-parent", daemon=True).start()


def _exit_when_gone(pid: int) -> None:
    try:
        handle = os.pidfd_open(pid)
    except ProcessLookupError:
        os._exit(0)
    select.select([handle], [], [])
    os._exit(0)


def _parse_into(
    data: bytes, doc_type: DocumentType, config: ParseConfig, recognise: bool, *, result: Path, flag: Path
) -> None:
    from chonkit.document.parsing.parser import parse  # the forkserver imported it (PARSERS)

    parsed = parse(data, doc_type, config, recognise=recognise, stop=flag.exists)
    result.write_bytes(msgspec.msgpack.encode(parsed))


def _chunk_into(
    doc: ParsedDocument, config: ChunkConfig, model: tuple[str, str], max_tokens: int, *, result: Path, flag: Path
) -> None:
    """Chunking has no pages to stop between (and takes seconds at most): ``flag`` goes unread."""
    counted = chunk(doc, config, _tokenizer(*model), max_tokens=max_tokens)
    framed = _FramedChunks(_frames(counted.chunks), _frames(counted.parents), counted.oversized)
    result.write_bytes(msgspec.msgpack.encode(framed))


def _frames(chunks: list[Chunk]) -> list[bytes]:
    encode = msgspec.msgpack.encode
    return [encode(chunks[start : start + CHUNKS_PER_FRAME]) for start in range(0, len(chunks), CHUNKS_PER_FRAME)]


def _unframed(data: bytes) -> ChunkResult:
    """Decoded frame by frame, so that a thread running it lets the event loop have the GIL in between."""
    framed = _framed_decoder.decode(data)
    return ChunkResult(
        chunks=[c for frame in framed.chunks for c in _frame_decoder.decode(frame)],
        parents=[c for frame in framed.parents for c in _frame_decoder.decode(frame)],
        oversized=framed.oversized,
    )


@functools.cache
def _tokenizer(provider: str, model: str) -> TokenCounter:
    """The model's tokenizer in this parse process, loaded once (the embedding weights are never loaded)."""
    return default_registry().get(provider, model)
