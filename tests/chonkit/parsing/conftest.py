"""Real documents for the parser tests: generated with the real libraries, or fetched from PyPI.

Third-party documents are never committed: the real-world PDFs come from pypdf's source
distribution, downloaded once into ``~/.cache/ragu-test-corpus/``.
"""

from __future__ import annotations

import io
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

import docx
import pymupdf
import pytest
from PIL import Image

from chonkit.document.parsing import DocumentType

PYPDF_SDIST_VERSION = "5.1.0"
CORPUS_DIR = Path.home() / ".cache" / "ragu-test-corpus"

PdfFactory = Callable[..., bytes]


def make_pdf(pages: Sequence[str], **save_options: object) -> bytes:
    """A PDF with one page per entry of ``pages`` (an empty string gives a blank page)."""
    document = pymupdf.open()
    for text in pages:
        page = document.new_page()
        if text:
            page.insert_textbox(pymupdf.Rect(50, 50, 550, 800), text, fontsize=11)
    data: bytes = document.tobytes(**save_options)
    document.close()
    return data


def make_image_only_pdf(page_count: int = 2) -> bytes:
    """What a scanner produces: pages that are pictures, with no text layer."""
    document = pymupdf.open()
    for _ in range(page_count):
        page = document.new_page()
        picture = pymupdf.Pixmap(pymupdf.csRGB, pymupdf.IRect(0, 0, 64, 64), False)
        picture.clear_with(180)
        page.insert_image(pymupdf.Rect(50, 50, 550, 800), pixmap=picture)
    data: bytes = document.tobytes()
    document.close()
    return data


def make_scanned_pdf(pages: Sequence[str], *, dpi: int = 150) -> bytes:
    """A text PDF (``make_pdf``) rendered page by page to images and rebuilt from them: a scan whose truth is known."""
    scanned = pymupdf.open()
    with pymupdf.open(stream=make_pdf(pages), filetype="pdf") as source:
        for page in source:
            blank = scanned.new_page(width=page.rect.width, height=page.rect.height)
            blank.insert_image(blank.rect, stream=page.get_pixmap(dpi=dpi).tobytes("png"))
    data: bytes = scanned.tobytes()
    scanned.close()
    return data


def make_text_image(lines: Sequence[str], image_format: str = "PNG", *, dpi: int = 150) -> bytes:
    """A picture of ``lines`` (one image per entry, as frames of a multi-page TIFF when there are several)."""
    frames = []
    for text in lines:
        document = pymupdf.open()
        page = document.new_page(width=400, height=40 + 16 * text.count("\n"))
        page.insert_text((10, 25), text, fontsize=12)
        picture = page.get_pixmap(dpi=dpi)
        frames.append(Image.frombytes("RGB", (picture.width, picture.height), picture.samples))
        document.close()
    buffer = io.BytesIO()
    frames[0].save(buffer, image_format, save_all=len(frames) > 1, append_images=frames[1:])
    return buffer.getvalue()


def make_docx() -> bytes:
    """A DOCX with nested headings, paragraphs, a bulleted list and a table."""
    document = docx.Document()
    document.add_heading("Handbook", level=1)
    document.add_paragraph("Welcome to the handbook.")
    document.add_heading("Travel", level=2)
    document.add_paragraph("Book trains early.")
    document.add_paragraph("Passport", style="List Bullet")
    document.add_paragraph("Tickets", style="List Bullet")
    table = document.add_table(rows=2, cols=2)
    for row, cells in zip(table.rows, [("City", "Budget"), ("Paris", "120 EUR")], strict=True):
        for cell, text in zip(row.cells, cells, strict=True):
            cell.text = text
    document.add_heading("Expenses", level=1)
    document.add_paragraph("Keep every receipt.")
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


MARKDOWN_SAMPLE = b"""# Guide

Intro paragraph.

## Install

```sh
# this is a shell comment, not a heading
pip install ragu
```

- first
- second

## Use

| key | value |
|-----|-------|
| a   | 1     |
"""

HTML_SAMPLE = b"""<!doctype html><html><head><title>Page title</title><style>p{color:red}</style></head>
<body><script>document.write("<h1>injected</h1>")</script>
<h1>Guide</h1><p>Intro <em>paragraph</em>.</p>
<h2>Install</h2><pre>pip install ragu</pre>
<ul><li>first</li><li>second</li></ul>
<h2>Use</h2><table><tr><th>key</th><th>value</th></tr><tr><td>a</td><td>1</td></tr></table>
</body></html>"""


def sample_documents() -> dict[DocumentType, bytes]:
    """One representative document per supported type."""
    return {
        DocumentType.PDF: make_pdf(["First page text.", "", "Third page text."]),
        DocumentType.DOCX: make_docx(),
        DocumentType.MARKDOWN: MARKDOWN_SAMPLE,
        DocumentType.HTML: HTML_SAMPLE,
        DocumentType.TEXT: "Première ligne.\r\nSuite.\r\n\r\n\r\nDeuxième paragraphe.".encode("cp1252"),
        DocumentType.CSV: b"name;city\nAda;London\nGrace;New York\n",
        DocumentType.JSON: b'{"name": "Ada", "tags": ["math", "engines"], "born": 1815}',
        DocumentType.PNG: make_text_image(["Scanned receipt total"], "PNG"),
        DocumentType.JPEG: make_text_image(["Photographed whiteboard notes"], "JPEG"),
        DocumentType.TIFF: make_text_image(["Faxed page one", "Faxed page two"], "TIFF"),
    }


@pytest.fixture
def pdf_factory() -> PdfFactory:
    return make_pdf


@pytest.fixture
def image_only_pdf() -> bytes:
    return make_image_only_pdf()


@pytest.fixture
def docx_sample() -> bytes:
    return make_docx()


@pytest.fixture
def samples() -> dict[DocumentType, bytes]:
    return sample_documents()


@pytest.fixture(scope="session")
def pypdf_download() -> Path | str:
    """The cached ``resources/`` folder of pypdf's sdist, or why it could not be downloaded.

    Session-scoped and never skipping itself, so an offline run tries the download only once.
    """
    target = CORPUS_DIR / f"pypdf-{PYPDF_SDIST_VERSION}"
    if not (target / "resources").is_dir():
        failure = _download_pypdf_resources(target)
        if failure is not None:
            return failure
    return target / "resources"


@pytest.fixture
def pypdf_resources(pypdf_download: Path | str) -> Path:
    """Real-world PDFs from many producers; the test is skipped only if they could not be downloaded."""
    if isinstance(pypdf_download, str):
        pytest.skip(pypdf_download)
    return pypdf_download


def _download_pypdf_resources(target: Path) -> str | None:
    with tempfile.TemporaryDirectory(prefix="ragu-corpus-") as scratch:
        command = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", "--quiet"]
        command += ["--dest", scratch, f"pypdf=={PYPDF_SDIST_VERSION}"]
        result = subprocess.run(command, capture_output=True, text=True, check=False, timeout=300)  # noqa: S603
        if result.returncode != 0:
            return f"could not download the pypdf {PYPDF_SDIST_VERSION} sdist (network?): {result.stderr[-300:]}"
        (sdist,) = Path(scratch).glob("pypdf-*.tar.gz")
        unpacked = Path(scratch) / "unpacked"
        with tarfile.open(sdist) as archive:
            members = [m for m in archive.getmembers() if m.isfile() and "/resources/" in m.name]
            archive.extractall(unpacked, members=members, filter="data")
        target.parent.mkdir(parents=True, exist_ok=True)
        # Move into place in one step so an interrupted download never leaves a half-filled cache.
        staged = target.parent / f".{target.name}.partial"
        shutil.rmtree(staged, ignore_errors=True)
        shutil.move(unpacked / f"pypdf-{PYPDF_SDIST_VERSION}", staged)
        staged.replace(target)
    return None
