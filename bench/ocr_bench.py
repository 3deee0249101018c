"""OCR of scanned pages: RapidOCR (our engine, ``chonkit.document.parsing.ocr``) against Tesseract through pymupdf.

Run from the repository root::

    python -m bench.ocr_bench [--pdf FILE ...] [--pages 4] [--dpi 150,200] [--out result.json]
    python -m bench --only ocr_bench [--quick]      # through the runner: 1 page of each PDF at 150 dpi when quick

The scans are made here so the truth is known: the first ``--pages`` pages of each real text PDF (by default a PDF
typeset from this repository's own ``docs/*.md`` and the Debian manuals in ``/usr/share/doc`` that are present) are
rendered to images at each ``--dpi`` and rebuilt into a PDF of images only, with no text layer. Both engines read
the same image pages in the same process; the truth is each page's original text layer. Word recall counts the
truth's words (lower-cased runs of letters and digits, as a multiset) that the OCR text holds; pages/s is wall
time on one thread each (onnxruntime ``intra_op_num_threads=1``; Tesseract with ``OMP_THREAD_LIMIT=1``), after
one warm-up page that loads each engine. Tesseract needs Debian's ``tesseract-ocr-eng``; without it only ours runs.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import platform
import re
import textwrap
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_THREAD_LIMIT", "1")  # Tesseract's OpenMP: one thread, as ours

import pymupdf  # after the thread limit, which Tesseract reads when it loads

from chonkit.document.parsing import ocr

DEFAULT_PDFS = (
    Path("/usr/share/doc/shared-mime-info/shared-mime-info-spec.pdf"),
    Path("/usr/share/doc/libtasn1-doc/libtasn1.pdf"),
)
TESSDATA_DIRS = (Path("/usr/share/tesseract-ocr/5/tessdata"), Path("/usr/share/tesseract-ocr/4.00/tessdata"))
_WORD = re.compile(r"[^\W_]+")

Engine = Callable[[pymupdf.Page, int], str]
"""Reads one image-only page, rendered at the given dpi, and returns its text."""


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--pdf", type=Path, action="append", help="a text PDF to scan (repeatable)")
    parser.add_argument("--pages", type=int, default=4, help="pages scanned from each PDF")
    parser.add_argument("--dpi", default="150,200", help="scan resolutions, comma-separated")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    result = measure(args.pdf or [], pages=args.pages, dpis=[int(d) for d in args.dpi.split(",")])
    print(json.dumps(result, indent=2))
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n")


def run(quick: bool) -> dict[str, Any]:
    """The runner's entry (``python -m bench``): the default PDFs, with the ratios as its summary rows."""
    result = measure([], pages=1 if quick else 4, dpis=[ocr.OCR_DPI] if quick else [ocr.OCR_DPI, 200])
    result["summary"] = [
        {"metric": f"{name} at {entry['dpi']} dpi, rapidocr/tesseract", "value": ratio, "target": None}
        for entry in result["runs"]
        for name, ratio in entry.get("rapidocr_vs_tesseract", {}).items()
    ]
    return result


def measure(pdfs: Sequence[Path], *, pages: int, dpis: Sequence[int]) -> dict[str, Any]:
    """Scan ``pdfs`` (or the defaults) and measure both engines; the result as JSON-ready data."""
    if pdfs:
        return compare([path.read_bytes() for path in pdfs], [path.name for path in pdfs], pages=pages, dpis=dpis)
    found = [path for path in DEFAULT_PDFS if path.exists()]
    originals = [_typeset_repository_docs(), *(path.read_bytes() for path in found)]
    return compare(originals, ["docs/*.md (typeset)", *(path.name for path in found)], pages=pages, dpis=dpis)


def compare(originals: Sequence[bytes], names: Sequence[str], *, pages: int, dpis: Sequence[int]) -> dict[str, Any]:
    """Scan each original at each resolution and measure both engines on the same image pages."""
    tessdata = next((str(d) for d in TESSDATA_DIRS if (d / "eng.traineddata").exists()), None)
    engines: dict[str, Engine] = {"rapidocr": _rapidocr}
    if tessdata is not None:
        engines["tesseract"] = lambda page, dpi: _tesseract(page, dpi, tessdata)
    runs = []
    for dpi in dpis:
        truths, scans = [], []
        for original in originals:
            page_truths, scanned = scan(original, pages=pages, dpi=dpi)
            truths.extend(page_truths)
            scans.append(scanned)
        figures = {name: _measure(engine, scans, truths, dpi) for name, engine in engines.items()}
        entry: dict[str, Any] = {"dpi": dpi, "pages": len(truths), "engines": figures}
        if "tesseract" in figures:
            ours, theirs = figures["rapidocr"], figures["tesseract"]
            entry["rapidocr_vs_tesseract"] = {
                "recall_ratio": round(ours["word_recall"] / theirs["word_recall"], 3),
                "speed_ratio": round(ours["pages_per_s"] / theirs["pages_per_s"], 3),
            }
        runs.append(entry)
    return {
        "sources": list(names),
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
        "tesseract": tessdata is not None,
        "runs": runs,
    }


def scan(original: bytes, *, pages: int, dpi: int) -> tuple[list[str], bytes]:
    """The first ``pages`` pages' text layers, and a PDF of those pages as images only (what a scanner makes)."""
    truths = []
    scanned = pymupdf.open()  # type: ignore[no-untyped-call]
    with pymupdf.open(stream=original, filetype="pdf") as source:  # type: ignore[no-untyped-call]
        for number in range(min(pages, source.page_count)):
            page = source.load_page(number)
            truths.append(page.get_text())
            picture = page.get_pixmap(dpi=dpi)
            blank = scanned.new_page(width=page.rect.width, height=page.rect.height)
            blank.insert_image(blank.rect, stream=picture.tobytes("png"))
    data: bytes = scanned.tobytes()
    return truths, data


def word_recall(truth: str, found: str) -> float:
    """Share of the truth's words (a multiset) that ``found`` holds."""
    expected = collections.Counter(_WORD.findall(truth.lower()))
    got = collections.Counter(_WORD.findall(found.lower()))
    total = sum(expected.values())
    return sum(min(count, got[word]) for word, count in expected.items()) / total if total else 1.0


def _measure(engine: Engine, scans: Sequence[bytes], truths: Sequence[str], dpi: int) -> dict[str, float]:
    documents = [pymupdf.open(stream=data, filetype="pdf") for data in scans]  # type: ignore[no-untyped-call]
    pages = [document.load_page(n) for document in documents for n in range(document.page_count)]
    assert not any(page.get_text().strip() for page in pages), "a scan must have no text layer"
    engine(pages[0], dpi)  # loads the engine
    texts = []
    started = time.perf_counter()
    for page in pages:
        texts.append(engine(page, dpi))
    elapsed = time.perf_counter() - started
    recalls = [word_recall(truth, text) for truth, text in zip(truths, texts, strict=True)]
    weights = [len(_WORD.findall(truth)) for truth in truths]
    return {
        "word_recall": round(sum(r * w for r, w in zip(recalls, weights, strict=True)) / sum(weights), 4),
        "worst_page_recall": round(min(recalls), 4),
        "pages_per_s": round(len(pages) / elapsed, 3),
        "s_per_page": round(elapsed / len(pages), 3),
    }


def _rapidocr(page: pymupdf.Page, dpi: int) -> str:
    """What the PDF parser does with a scanned page (which it renders at ``ocr.OCR_DPI``)."""
    return ocr.recognise(ocr.page_image(page, dpi=dpi))


def _tesseract(page: pymupdf.Page, dpi: int, tessdata: str) -> str:
    textpage = page.get_textpage_ocr(dpi=dpi, full=True, language="eng", tessdata=tessdata)
    return str(page.get_text(textpage=textpage))


def _typeset_repository_docs() -> bytes:
    """A plain text PDF (one font, long lines, Markdown's pipes and backticks) from this repository's docs."""
    text = "\n".join(p.read_text() for p in sorted(Path("docs").glob("*.md")))
    lines = [piece for line in text.splitlines() for piece in textwrap.wrap(line, 90) or [""]]
    document = pymupdf.open()  # type: ignore[no-untyped-call]
    for first in range(0, len(lines), 55):
        page = document.new_page()
        for row, line in enumerate(lines[first : first + 55]):
            page.insert_text((50, 60 + 13 * row), line, fontsize=10)
    data: bytes = document.tobytes()
    return data


if __name__ == "__main__":
    main()
