"""PDF parse throughput: chonkit's ``parse()`` against a bare pymupdf loop and against pypdf.

Run from the repository root::

    python -m bench.parse_bench [--pages 60,120,200] [--repeat 3] [--no-real-world] [--out result.json]

All three read the same files in the same process on one core: ``parse()`` (open, validate, extract,
build blocks), a raw ``page.get_text()`` loop over pymupdf (the floor our parser is built on) and
pypdf's ``extract_text()`` (the common pure-Python choice). Each figure is the best of ``--repeat``
rounds in process CPU time, so other load on the machine does not skew the ratios. Files: generated
multi-page prose PDFs (deterministic seed) and, unless ``--no-real-world``, the real-world PDFs of
pypdf's sdist test corpus, cached in ``~/.cache/ragu-test-corpus/`` (downloaded with pip when
missing). Targets: ours >= 0.8x raw pymupdf and >= 10x pypdf, in pages per second.
"""

from __future__ import annotations

import argparse
import gc
import io
import json
import logging
import os
import platform
import random
import shutil
import subprocess
import sys
import tarfile
import tempfile
import textwrap
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

PYPDF_SDIST_VERSION = "5.1.0"
CORPUS_DIR = Path.home() / ".cache" / "ragu-test-corpus"
TARGET_VS_RAW = 0.8
TARGET_VS_PYPDF = 10.0

_VOCABULARY = """
the of and to in a is that for it as was with be by on not he this are or his from at which but have an they
you were her she there been one all we their has would when if so no what up out who them some could more
system document policy budget travel employee report quarter revenue analysis customer contract schedule
approval committee research evidence method results sample patients treatment significant increase decrease
regional manager process quality standard requirement delivery support network service security access data
however therefore although furthermore meanwhile consequently accordingly nevertheless
"""
_WORDS = _VOCABULARY.split()

Extractor = Callable[[bytes], int]
"""Extracts every page of a PDF and returns the number of characters, so work cannot be skipped."""


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", default="60,120,200", help="page counts of the generated PDFs")
    parser.add_argument("--seed", type=int, default=20240611)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-real-world", action="store_true", help="skip pypdf's real-world test PDFs")
    parser.add_argument("--out", type=Path, help="write the JSON result here instead of stdout")
    args = parser.parse_args(argv)
    os.environ["OMP_NUM_THREADS"] = "1"

    import pymupdf

    pymupdf.TOOLS.mupdf_display_errors(False)  # repaired real-world files would flood stderr
    logging.getLogger("pypdf").setLevel(logging.ERROR)

    contenders = _contenders()
    sets = {"generated": _generated_pdfs([int(n) for n in args.pages.split(",")], args.seed)}
    if not args.no_real_world:
        sets["real_world"] = _usable(_real_world_pdfs(), contenders)
    results = {name: _measure(files, contenders, args.repeat) for name, files in sets.items() if files}
    result = {
        "benchmark": "parse_pdf",
        "unit": "pages/s",
        "python": platform.python_version(),
        "machine": platform.machine(),
        "versions": _versions(),
        "repeat": args.repeat,
        "sets": results,
        "total": _combined(list(results.values()), contenders),
        "targets": {"ours_vs_raw_pymupdf": TARGET_VS_RAW, "ours_vs_pypdf": TARGET_VS_PYPDF},
    }
    total = result["total"]
    result["meets_targets"] = (
        total["ours_vs_raw_pymupdf"] >= TARGET_VS_RAW and total["ours_vs_pypdf"] >= TARGET_VS_PYPDF
    )
    text = json.dumps(result, indent=2)
    if args.out:
        args.out.write_text(text + "\n")
    else:
        print(text)


def _contenders() -> dict[str, Extractor]:
    import pymupdf
    from pypdf import PdfReader

    from chonkit.document.parsing import DocumentType, ParseConfig
    from chonkit.document.parsing.parser import parse

    config = ParseConfig()

    def ours(data: bytes) -> int:
        return len(parse(data, DocumentType.PDF, config).text)

    def raw_pymupdf(data: bytes) -> int:
        with pymupdf.open(stream=data, filetype="pdf") as document:
            return sum(len(page.get_text()) for page in document)

    def pypdf(data: bytes) -> int:
        return sum(len(page.extract_text()) for page in PdfReader(io.BytesIO(data)).pages)

    return {"ours": ours, "raw_pymupdf": raw_pymupdf, "pypdf": pypdf}


def _measure(files: list[tuple[str, bytes, int]], contenders: dict[str, Extractor], repeat: int) -> dict[str, Any]:
    """Best-of-``repeat`` CPU time per contender; rounds interleave contenders so load hits all alike."""
    best = dict.fromkeys(contenders, float("inf"))
    chars = dict.fromkeys(contenders, 0)
    for _ in range(repeat):
        for name, extract in contenders.items():
            gc.collect()
            started = time.process_time()
            chars[name] = sum(extract(data) for _, data, _ in files)
            best[name] = min(best[name], time.process_time() - started)
    pages = sum(page_count for _, _, page_count in files)
    return _summary(len(files), pages, best, chars)


def _combined(sets: list[dict[str, Any]], contenders: dict[str, Extractor]) -> dict[str, Any]:
    """All sets together: their best times added up."""
    seconds = {name: sum(s[name]["cpu_seconds"] for s in sets) for name in contenders}
    chars = {name: sum(s[name]["chars"] for s in sets) for name in contenders}
    return _summary(sum(s["files"] for s in sets), sum(s["pages"] for s in sets), seconds, chars)


def _summary(files: int, pages: int, seconds: dict[str, float], chars: dict[str, int]) -> dict[str, Any]:
    summary: dict[str, Any] = {"files": files, "pages": pages}
    for name, spent in seconds.items():
        summary[name] = {"cpu_seconds": round(spent, 4), "pages_per_s": round(pages / spent, 1), "chars": chars[name]}
    summary["ours_vs_raw_pymupdf"] = round(seconds["raw_pymupdf"] / seconds["ours"], 3)
    summary["ours_vs_pypdf"] = round(seconds["pypdf"] / seconds["ours"], 2)
    return summary


def _generated_pdfs(page_counts: list[int], seed: int) -> list[tuple[str, bytes, int]]:
    """Text PDFs of wrapped prose, ~45 lines of ~95 characters per page, like a typical report."""
    import pymupdf

    rng = random.Random(seed)
    files = []
    for page_count in page_counts:
        document = pymupdf.open()
        for number in range(1, page_count + 1):
            lines = [f"Section {number}", *textwrap.wrap(_prose(rng, 4000), width=95)[:44]]
            document.new_page().insert_text((50, 56), "\n".join(lines), fontsize=10)
        files.append((f"generated-{page_count}p.pdf", document.tobytes(garbage=3, deflate=True), page_count))
        document.close()
    return files


def _prose(rng: random.Random, length: int) -> str:
    sentences: list[str] = []
    size = 0
    while size < length:
        words = rng.choices(_WORDS, k=rng.randint(8, 24))
        sentence = " ".join(words).capitalize() + rng.choice([".", ".", ".", ",", ";", "?"])
        sentences.append(sentence)
        size += len(sentence) + 1
    return " ".join(sentences)


def _usable(files: list[tuple[str, bytes, int]], contenders: dict[str, Extractor]) -> list[tuple[str, bytes, int]]:
    """Files every contender can read (no passwords, some text), so all of them do the same work."""
    usable = []
    for name, data, page_count in files:
        try:
            for extract in contenders.values():
                extract(data)
        except Exception as exc:  # noqa: BLE001 -- ours raises AppError, pypdf many types; the file is left out
            print(f"skipping {name}: {type(exc).__name__}: {exc}", file=sys.stderr)
            continue
        usable.append((name, data, page_count))
    return usable


def _real_world_pdfs() -> list[tuple[str, bytes, int]]:
    import pymupdf

    resources = CORPUS_DIR / f"pypdf-{PYPDF_SDIST_VERSION}" / "resources"
    if not resources.is_dir() and not _download_pypdf_resources(resources.parent):
        return []
    files = []
    for path in sorted(resources.rglob("*.pdf")):
        data = path.read_bytes()
        with pymupdf.open(stream=data, filetype="pdf") as document:
            page_count = document.page_count
        files.append((str(path.relative_to(resources)), data, page_count))
    return files


def _download_pypdf_resources(target: Path) -> bool:
    with tempfile.TemporaryDirectory(prefix="ragu-corpus-") as scratch:
        command = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", "--quiet"]
        command += ["--dest", scratch, f"pypdf=={PYPDF_SDIST_VERSION}"]
        if subprocess.run(command, capture_output=True, check=False, timeout=300).returncode != 0:
            print("pypdf sdist unavailable (network?); real-world PDFs skipped", file=sys.stderr)
            return False
        (sdist,) = Path(scratch).glob("pypdf-*.tar.gz")
        with tarfile.open(sdist) as archive:
            members = [m for m in archive.getmembers() if m.isfile() and "/resources/" in m.name]
            archive.extractall(Path(scratch) / "unpacked", members=members, filter="data")
        target.parent.mkdir(parents=True, exist_ok=True)
        staged = target.parent / f".{target.name}.partial"
        shutil.rmtree(staged, ignore_errors=True)
        shutil.move(Path(scratch) / "unpacked" / f"pypdf-{PYPDF_SDIST_VERSION}", staged)
        staged.replace(target)
    return True


def _versions() -> dict[str, str]:
    from importlib.metadata import version

    return {package: version(package) for package in ("pymupdf", "pypdf")}


if __name__ == "__main__":
    main()
