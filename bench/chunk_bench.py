"""Chunking throughput: chonkit's ``fixed`` chunker against LangChain's RecursiveCharacterTextSplitter.

Run from the repository root::

    python -m bench.chunk_bench [--mb 4] [--tokenizer-json path/to/tokenizer.json] [--out result.json]

Both splitters get the same text (SciFact abstracts, in file order, until ``--mb`` megabytes), the
same chunk size and overlap, in the same process, on one thread. Each timing is the best of
``--repeat`` runs in CPU seconds: the work is single-threaded, so that equals wall time on an idle
machine and does not swing when other processes share the cores. Ours also records positions,
pages and heading paths, which LangChain's ``split_text`` does not. Token-unit runs use
``--tokenizer-json`` (e.g. all-MiniLM-L6-v2's) or, without one, a BERT-style WordPiece tokenizer
trained on the same corpus, so nothing is downloaded.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from chonkit.document.chunking import CharacterCounter, FixedChunking, chunk
from chonkit.document.parsed import BLOCK_SEPARATOR, Block, BlockKind, ParsedDocument, Section

T = TypeVar("T")

CORPUS = Path("/work/shared/data/scifact/corpus.jsonl")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument("--mb", type=float, default=4.0, help="megabytes of text to chunk")
    parser.add_argument("--size", type=int, default=1000, help="chunk size in characters")
    parser.add_argument("--overlap", type=int, default=200, help="overlap in characters")
    parser.add_argument("--token-mb", type=float, default=1.0, help="megabytes for the (slower) token-unit runs")
    parser.add_argument("--token-size", type=int, default=256)
    parser.add_argument("--token-overlap", type=int, default=32)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--tokenizer-json", type=Path, help="a HuggingFace tokenizer.json for token-unit runs")
    parser.add_argument("--out", type=Path, help="write the JSON result here instead of stdout")
    args = parser.parse_args(argv)

    # One thread: tokenizers batches with a rayon pool, numpy-backed code with OpenMP.
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    os.environ["RAYON_NUM_THREADS"] = "1"
    os.environ["OMP_NUM_THREADS"] = "1"

    doc = _scifact_document(args.corpus, int(args.mb * 1_000_000))
    text = doc.text
    megabytes = len(text.encode()) / 1_000_000
    counter = CharacterCounter()
    results: dict[str, Any] = {
        "text": {"source": str(args.corpus), "megabytes": round(megabytes, 3), "characters": len(text)},
        "sizes": {"characters": [args.size, args.overlap], "tokens": [args.token_size, args.token_overlap]},
        "python": sys.version.split()[0],
    }
    runs: dict[str, Any] = {}

    for snap in (True, False):
        config = FixedChunking(size=args.size, overlap=args.overlap, unit="characters", snap_to_sentences=snap)
        seconds, result = _best(args.repeat, partial(chunk, doc, config, counter, max_tokens=None))
        runs[f"chonkit_characters_snap={str(snap).lower()}"] = _run(
            megabytes, seconds, [c.content for c in result.chunks]
        )

    splitter = _langchain_splitter(args.size, args.overlap, len)
    seconds, pieces = _best(args.repeat, lambda: splitter.split_text(text))
    runs["langchain_characters"] = _run(megabytes, seconds, pieces)

    tokenizer, tokenizer_name = _tokenizer(args.tokenizer_json, args.corpus)
    token_doc = _scifact_document(args.corpus, int(args.token_mb * 1_000_000))
    token_text = token_doc.text
    token_megabytes = len(token_text.encode()) / 1_000_000
    token_config = FixedChunking(size=args.token_size, overlap=args.token_overlap, unit="tokens")
    seconds, result = _best(args.repeat, lambda: chunk(token_doc, token_config, tokenizer, max_tokens=None))
    runs["chonkit_tokens_snap=true"] = _run(token_megabytes, seconds, [c.content for c in result.chunks])
    runs["chonkit_tokens_snap=true"]["max_token_count"] = max(c.token_count for c in result.chunks)

    token_splitter = _langchain_splitter(args.token_size, args.token_overlap, lambda t: tokenizer.count([t])[0])
    seconds, pieces = _best(1, lambda: token_splitter.split_text(token_text))
    runs["langchain_tokens"] = _run(token_megabytes, seconds, pieces)
    runs["langchain_tokens"]["max_token_count"] = max(tokenizer.count(pieces))

    results["runs"] = runs
    results["tokenizer"] = tokenizer_name
    results["speedup_vs_langchain"] = {
        "characters_snap=true": _ratio(runs, "chonkit_characters_snap=true", "langchain_characters"),
        "characters_snap=false": _ratio(runs, "chonkit_characters_snap=false", "langchain_characters"),
        "tokens_snap=true": _ratio(runs, "chonkit_tokens_snap=true", "langchain_tokens"),
    }
    rendered = json.dumps(results, indent=2)
    if args.out:
        args.out.write_text(rendered + "\n")
    else:
        print(rendered)


def _scifact_document(corpus: Path, limit: int) -> ParsedDocument:
    """Abstracts in file order, each a heading (its title) and a paragraph, until ``limit`` bytes."""
    blocks: list[Block] = []
    offset = size = 0
    with corpus.open() as lines:
        for line in lines:
            record = json.loads(line)
            title, body = record["title"].strip(), record["text"].strip()
            if not title or not body:
                continue
            parts: tuple[tuple[BlockKind, str], ...] = (("heading", title), ("paragraph", body))
            for kind, value in parts:
                blocks.append(
                    Block(
                        text=value,
                        kind=kind,
                        char_start=offset,
                        char_end=offset + len(value),
                        heading_path=(title,),
                        level=1 if kind == "heading" else None,
                    )
                )
                offset += len(value) + len(BLOCK_SEPARATOR)
                size += len(value.encode()) + len(BLOCK_SEPARATOR)
            if size >= limit:
                break
    return ParsedDocument(media_type="text/markdown", sections=(Section(blocks=tuple(blocks)),))


def _langchain_splitter(size: int, overlap: int, length: Callable[[str], int]) -> Any:
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    return RecursiveCharacterTextSplitter(chunk_size=size, chunk_overlap=overlap, length_function=length)


class _HuggingFaceCounter:
    """Counts like the embedding model: no special tokens, no truncation, no padding."""

    def __init__(self, tokenizer: Any) -> None:
        tokenizer.no_truncation()
        tokenizer.no_padding()
        self._tokenizer = tokenizer

    def count(self, texts: Sequence[str]) -> list[int]:
        return [len(e.ids) for e in self._tokenizer.encode_batch(list(texts), add_special_tokens=False)]

    def offsets(self, texts: Sequence[str]) -> list[list[tuple[int, int]]]:
        return [list(e.offsets) for e in self._tokenizer.encode_batch(list(texts), add_special_tokens=False)]


def _tokenizer(path: Path | None, corpus: Path) -> tuple[_HuggingFaceCounter, str]:
    from tokenizers import Tokenizer, normalizers, pre_tokenizers
    from tokenizers.models import WordPiece
    from tokenizers.trainers import WordPieceTrainer

    if path is not None:
        return _HuggingFaceCounter(Tokenizer.from_file(str(path))), str(path)
    tokenizer = Tokenizer(WordPiece(unk_token="[UNK]"))  # noqa: S106 - a vocabulary entry, not a password
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    with corpus.open() as lines:
        texts = [json.loads(line)["text"] for line in lines]
    tokenizer.train_from_iterator(
        texts, WordPieceTrainer(vocab_size=30522, special_tokens=["[UNK]"], show_progress=False)
    )
    return _HuggingFaceCounter(
        tokenizer
    ), "WordPiece (BERT normalizer and pre-tokenizer), 30522 pieces trained on the corpus"


def _best(repeat: int, run: Callable[[], T]) -> tuple[float, T]:
    best = float("inf")
    result: T
    for _ in range(repeat):
        started = time.process_time()
        result = run()
        best = min(best, time.process_time() - started)
    return best, result


def _run(megabytes: float, seconds: float, pieces: Sequence[str]) -> dict[str, Any]:
    return {
        "seconds": round(seconds, 4),
        "mb_per_s": round(megabytes / seconds, 2),
        "chunks": len(pieces),
        "mean_chunk_characters": round(sum(map(len, pieces)) / max(1, len(pieces)), 1),
    }


def _ratio(runs: dict[str, Any], ours: str, theirs: str) -> float:
    return round(float(runs[ours]["mb_per_s"]) / float(runs[theirs]["mb_per_s"]), 2)


if __name__ == "__main__":
    main()
