"""Issue #26, item 9: OCR is bounded and can be stopped. A document needing more than ``MAX_OCR_PAGES`` recognised
pages is refused before the first is recognised, blank pages never reach the recogniser, and a parse told to stop
ends before its next page, in the parse process too (real RapidOCR, pymupdf and Pillow throughout; the recogniser
is only watched, never replaced)."""

from __future__ import annotations

import asyncio
import io
import time
from collections.abc import Callable

import numpy as np
import psutil
import pymupdf
import pytest
from PIL import Image

from chonkit.document import isolated
from chonkit.document.isolated import parse_isolated
from chonkit.document.parsing import DocumentType, PageRange, ParseConfig, ocr
from chonkit.document.parsing.parser import parse
from common.errors import InvalidInput
from tests.chonkit.parsing.conftest import make_pdf, make_scanned_pdf, make_text_image

STOP_BAR_SECONDS = 2.0
"""A stopped parse returns to its caller at once (it does not wait for the page being recognised)."""
IDLE_BAR_SECONDS = 20.0
"""The parse process stops before its next page: a full page takes 3-5 s to recognise here, and two cores are
shared, so four pages' worth; the whole document takes minutes."""
IDLE_BAR_PAGES = 4
"""The same bar in pages, for a machine busier than that: four times one page's recognition as measured in the same
run (the suite's other worker may be recognising pages or loading a model meanwhile); still a tenth of the whole
document, so a parse that ran on to its end fails it."""


def text_page_frames(count: int) -> bytes:
    """A TIFF of ``count`` frames, each a full A4 page of text at 150 dpi (3-5 s of OCR apiece), deflated small."""
    lines = "\n".join(
        f"Clause {n}: the supplier delivers the goods within thirty days of the order." for n in range(40)
    )
    with pymupdf.open(stream=make_pdf([lines]), filetype="pdf") as document:
        picture = document.load_page(0).get_pixmap(dpi=150)
        frame = Image.frombytes("RGB", (picture.width, picture.height), picture.samples).convert("L")
    buffer = io.BytesIO()
    frame.save(buffer, "TIFF", save_all=True, append_images=[frame] * (count - 1), compression="tiff_deflate")
    return buffer.getvalue()


def _frames(*frames: Image.Image) -> bytes:
    buffer = io.BytesIO()
    frames[0].save(buffer, "TIFF", save_all=True, append_images=list(frames[1:]))
    return buffer.getvalue()


def _blank_pdf_page(document: pymupdf.Document, tone: int) -> None:
    """A page that shows an image of one flat tone: what a scanner makes of an empty sheet."""
    page = document.new_page()
    picture = pymupdf.Pixmap(pymupdf.csRGB, pymupdf.IRect(0, 0, 64, 64), False)
    picture.clear_with(tone)
    page.insert_image(page.rect, pixmap=picture)


@pytest.fixture
def recognised(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The image heights the real recogniser was given, in order (the parsers call ``ocr.recognise``)."""
    calls: list[int] = []
    real = ocr.recognise

    def spy(image: ocr.Image) -> str:
        calls.append(image.shape[0])
        return real(image)

    monkeypatch.setattr(ocr, "recognise", spy)
    return calls


@pytest.mark.parametrize("doc_type", [DocumentType.PDF, DocumentType.TIFF])
def test_more_pages_to_recognise_than_the_limit_are_refused_before_the_first_is_recognised(
    doc_type: DocumentType, recognised: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The issue's TIFF of 2,000 frames held the only worker for 7 min 46 s; now it costs a header read."""
    monkeypatch.setattr(ocr, "MAX_OCR_PAGES", 3)
    pages = [f"Page {n} of the scanned contract, signed by both parties" for n in range(1, 5)]
    data = make_scanned_pdf(pages) if doc_type is DocumentType.PDF else make_text_image(pages, "TIFF")

    with pytest.raises(InvalidInput) as caught:
        parse(data, doc_type, ParseConfig())

    assert (caught.value.code, caught.value.extra) == ("ocr_too_many_pages", {"pages": 4, "limit": 3})
    assert recognised == []
    assert parse(data, doc_type, ParseConfig(), recognise=False).ocr_pages == (1, 2, 3, 4)  # an upload's check
    three = parse(data, doc_type, ParseConfig(page_range=PageRange(start=2, end=4)))  # a part may be chosen
    assert three.ocr_pages == (2, 3, 4)
    assert len(recognised) == 3


def test_the_limit_counts_only_the_pages_without_a_text_layer(
    recognised: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ocr, "MAX_OCR_PAGES", 1)
    text = pymupdf.open(stream=make_pdf(["Typed page one.", "Typed page two."]), filetype="pdf")
    scan = make_scanned_pdf(["Page three was scanned from the signed paper copy"])
    text.insert_pdf(pymupdf.open(stream=scan, filetype="pdf"))

    doc = parse(text.tobytes(), DocumentType.PDF, ParseConfig())

    assert doc.ocr_pages == (3,)
    assert [b.page for b in doc.blocks] == [1, 2, 3]


def test_blank_frames_are_not_given_to_the_recogniser(recognised: list[int]) -> None:
    """A flat frame (white, black, grey) holds no text, and recognising it takes as long as a page of text."""
    (text,) = [Image.open(io.BytesIO(make_text_image(["Delivery note 4711"])))]
    size = text.size
    data = _frames(
        Image.new("RGB", size, "white"),
        text.convert("RGB"),
        Image.new("RGB", size, (0, 0, 0)),
        Image.new("RGB", size, (128, 128, 128)),
    )

    doc = parse(data, DocumentType.TIFF, ParseConfig())

    assert len(recognised) == 1
    assert [b.page for b in doc.blocks] == [2]
    assert "4711" in doc.blocks[0].text
    assert doc.ocr_pages == (1, 2, 3, 4)  # all four were looked at


def test_blank_scanned_pages_are_not_given_to_the_recogniser(recognised: list[int]) -> None:
    scan = make_scanned_pdf(["Minutes of the meeting of the board on the first of May"])
    document = pymupdf.open(stream=scan, filetype="pdf")
    _blank_pdf_page(document, 255)
    _blank_pdf_page(document, 0)

    doc = parse(document.tobytes(), DocumentType.PDF, ParseConfig())

    assert len(recognised) == 1
    assert doc.ocr_pages == (1, 2, 3)
    assert [b.page for b in doc.blocks] == [1]


def test_a_page_showing_only_a_page_number_is_not_blank() -> None:
    page = np.full((1755, 1240, 3), 255, dtype=np.uint8)
    page[1700:1720, 610:622] = 40  # a small, dark mark: "3" at the foot of the page
    faint = np.full((100, 100, 3), 250, dtype=np.uint8)
    faint[40:60, 40:60] = (250, 250, 200)  # yellow on white shows in one channel

    assert not ocr.is_blank(page)
    assert not ocr.is_blank(faint)
    assert ocr.is_blank(np.full((10, 10, 3), 17, dtype=np.uint8))


@pytest.mark.parametrize("doc_type", [DocumentType.PDF, DocumentType.TIFF])
def test_a_stop_asked_for_ends_the_parse_before_the_next_page(doc_type: DocumentType, recognised: list[int]) -> None:
    pages = ["First page of the scan", "Second page", "Third page"]
    data = make_scanned_pdf(pages) if doc_type is DocumentType.PDF else make_text_image(pages, "TIFF")

    def stop() -> bool:
        return len(recognised) >= 1  # asked to stop while page 1 was read

    with pytest.raises(ocr.ParseStopped):
        parse(data, doc_type, ParseConfig(), stop=stop)

    assert len(recognised) == 1


async def test_a_stopped_parse_returns_at_once_and_its_process_goes_idle_within_a_page() -> None:
    """The parse process is told to stop (a flag file it reads between pages), not killed: killing it would break
    the executor and fail the other process's parse with it."""
    data = text_page_frames(40)  # minutes of OCR
    await parse_isolated(b"{}", DocumentType.JSON, ParseConfig())  # processes started, as in a running server
    assert isolated._pool is not None
    processes = [psutil.Process(pid) for pid in isolated._pool._processes]
    stop = asyncio.Event()
    parsing = asyncio.create_task(parse_isolated(data, DocumentType.TIFF, ParseConfig(), stop=stop))
    await _until(lambda: _busy(processes), within=30, what="OCR started")
    neighbour = asyncio.create_task(parse_isolated(make_pdf(["A neighbour's upload"]), DocumentType.PDF, ParseConfig()))

    stop.set()
    asked = time.perf_counter()
    with pytest.raises(ocr.ParseStopped):
        await parsing
    returned = time.perf_counter() - asked
    await _until(lambda: not _busy(processes), within=IDLE_BAR_SECONDS, what="parse processes idle")
    idle = time.perf_counter() - asked

    print(f"\nstopped parse: returned after {returned:.3f}s, processes idle after {idle:.1f}s")
    assert returned < STOP_BAR_SECONDS
    assert (await neighbour).text == "A neighbour's upload"  # the other process's parse was not disturbed
    assert (await parse_isolated(b'{"ok": true}', DocumentType.JSON, ParseConfig())).text == '{\n  "ok": true\n}'


async def test_a_cancelled_caller_stops_its_parse_process_too() -> None:
    """A preview whose request is abandoned (or a worker shut down mid-parse) leaves no OCR running on."""
    data = text_page_frames(40)
    await parse_isolated(b"{}", DocumentType.JSON, ParseConfig())
    assert isolated._pool is not None
    processes = [psutil.Process(pid) for pid in isolated._pool._processes]
    started = time.perf_counter()
    await parse_isolated(text_page_frames(1), DocumentType.TIFF, ParseConfig())
    bar = max(IDLE_BAR_SECONDS, IDLE_BAR_PAGES * (time.perf_counter() - started))
    parsing = asyncio.create_task(parse_isolated(data, DocumentType.TIFF, ParseConfig()))
    await _until(lambda: _busy(processes), within=30, what="OCR started")

    parsing.cancel()
    asked = time.perf_counter()
    with pytest.raises(asyncio.CancelledError):
        await parsing
    await _until(lambda: not _busy(processes), within=bar, what="parse processes idle")
    print(f"\ncancelled parse: processes idle after {time.perf_counter() - asked:.1f}s (bar {bar:.1f}s)")


def _busy(processes: list[psutil.Process]) -> bool:
    """Whether any of ``processes`` used more than a quarter of a core over the last half second."""
    before = [p.cpu_times() for p in processes]
    time.sleep(0.5)
    after = [p.cpu_times() for p in processes]
    return any((a.user + a.system) - (b.user + b.system) > 0.125 for a, b in zip(after, before, strict=True))


async def _until(check: Callable[[], bool], *, within: float, what: str) -> None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if await asyncio.to_thread(check):
            return
    raise AssertionError(f"{what}: not within {within}s")
