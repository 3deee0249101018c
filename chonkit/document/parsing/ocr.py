"""Text from page images, offline: RapidOCR (PP-OCR detection and recognition models in ONNX, shipped inside the
pinned ``rapidocr`` wheel) on onnxruntime, one thread.

Chosen over Tesseract with ``bench/ocr_bench.py`` (figures in ``docs/benchmarks.md``): it installs from PyPI
alone, with its models, where Tesseract needs the system's ``tesseract-ocr-eng``. It runs only in a parse
process (:mod:`chonkit.document.isolated`), which loads the models once, on its first page to recognise.

A page takes the recogniser seconds (3-5 s for a full page here), so a document's OCR is bounded and can be stopped:
at most :data:`MAX_OCR_PAGES` pages are recognised per parse (counted, and refused, before the first one is), a
blank page is never given to the recogniser (:func:`is_blank`), and the parsers ask a :data:`StopCheck` before
each page whether to go on (:func:`stop_if_asked`), which is how a cancelled job ends its parse between two pages.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import numpy.typing as npt

from common.errors import InvalidInput
from common.packaged import PackagedFile

if TYPE_CHECKING:
    import pymupdf

OcrMode = Literal["off", "auto", "force"]
"""``off``: never; ``auto``: pages without a text layer (:func:`needs_ocr`); ``force``: every page, whatever its
text layer says."""

OCR_DPI = 150
"""Pages are rendered at this resolution to be recognised (``bench/ocr_bench.py`` compares 150 and 200)."""
MIN_TEXT_LAYER_CHARS = 16
"""A page whose text layer has fewer non-space characters than this (a scanner's page number, a stray mark) and
that shows an image counts as scanned in ``auto`` mode."""
MAX_IMAGE_PIXELS = 40_000_000
"""An image page larger than this (a 40-megapixel scan; an A4 page at 600 dpi is 35) is refused before it is
decoded in full: a small file can declare a huge image."""
OCR_THREADS = 1
"""onnxruntime threads per parse process: two parse processes share two cores with the event loop."""
MAX_OCR_PAGES = 500
"""Pages (of a PDF, or frames of an image) one parse may recognise. At 1-5 s a page here this holds a parse process
for at most about half an hour (a scanned book of 500 pages still fits); a document that needs more is refused with
``ocr_too_many_pages`` before its first page is recognised, so it costs nothing, and a page range or sections can
select a part of it. Issue #26: a TIFF of 2,000 frames held the only worker for 7 min 46 s."""
BLANK_CONTRAST = 32
"""A page image whose values all lie within this of each other (of 255, over every channel) shows nothing to read and
is not recognised: the recogniser takes as long on an empty page as on a full one (0.2-3 s here), and the check takes
a millisecond. Faint text is darker than its paper by more than this, and so is a coloured mark in one channel."""

_ENGINE_LOCK = threading.Lock()

Image = npt.NDArray[np.uint8]
"""Height x width x 3, RGB."""
StopCheck = Callable[[], bool]
"""Asked before each page: True when the parse should stop (its job was cancelled, its caller has gone)."""


class ParseStopped(Exception):
    """A parse ended early because it was told to stop (:data:`StopCheck`); nothing of it is kept."""


def stop_if_asked(stop: StopCheck | None, *, page: int) -> None:
    """Raises :class:`ParseStopped` when ``stop`` says so; called before each page, so a stop waits at most for the
    page being recognised."""
    if stop is not None and stop():
        raise ParseStopped(f"stopped before page {page}")


def check_ocr_pages(count: int) -> None:
    """Refuse to recognise ``count`` pages past :data:`MAX_OCR_PAGES` (``ocr_too_many_pages``), before the first."""
    if count > MAX_OCR_PAGES:
        raise InvalidInput(
            f"{count} pages need OCR; at most {MAX_OCR_PAGES} are recognised per document. Choose a page range or "
            "sections of the pages to read, or split the document.",
            code="ocr_too_many_pages",
            extra={"pages": count, "limit": MAX_OCR_PAGES},
        )


def is_blank(image: Image) -> bool:
    """Whether ``image`` is one flat grey tone (:data:`BLANK_CONTRAST`): a blank scan or frame, which holds no text.

    The whole array's extremes, not a per-pixel reduction over channels: that took 150 ms an A4 page, this 1 ms. A flat
    colour that is not grey is recognised all the same (the check only ever errs towards reading a page)."""
    return int(image.max()) - int(image.min()) < BLANK_CONTRAST


def needs_ocr(text_layer: str, *, has_images: bool, mode: OcrMode) -> bool:
    """Whether a page is recognised from its image rather than read from its text layer."""
    if mode == "force":
        return True
    if mode == "off":
        return False
    return has_images and sum(not ch.isspace() for ch in text_layer) < MIN_TEXT_LAYER_CHARS


def page_image(page: pymupdf.Page, *, dpi: int = OCR_DPI) -> Image:
    """``page`` rendered as RGB pixels at ``dpi``, for :func:`recognise`.

    Raises:
        InvalidInput: ``image_too_large`` (:func:`check_page_size`).
    """
    import pymupdf  # loaded by the PDF parser already; the server imports this module (OcrMode) and never renders

    check_page_size(page, dpi=dpi)
    scale = dpi / 72
    matrix = pymupdf.Matrix(scale, scale)  # type: ignore[no-untyped-call]  # pymupdf is untyped
    picture = page.get_pixmap(matrix=matrix, colorspace=pymupdf.csRGB, alpha=False)
    return pixmap_pixels(picture)


def check_page_size(page: pymupdf.Page, *, dpi: int = OCR_DPI) -> None:
    """Refuse a page that would render past :data:`MAX_IMAGE_PIXELS` (``image_too_large``), before rendering it."""
    scale = dpi / 72
    check_pixels(page.rect.width * scale, page.rect.height * scale, page=int(page.number) + 1)


def check_pixels(width: float, height: float, *, page: int) -> None:
    """Raises ``image_too_large`` when an image of ``width`` x ``height`` pixels is past :data:`MAX_IMAGE_PIXELS`."""
    if width * height > MAX_IMAGE_PIXELS:
        raise InvalidInput(
            f"Page {page} is {int(width)}x{int(height)} pixels; at most {MAX_IMAGE_PIXELS:,} pixels are recognised.",
            code="image_too_large",
            extra={"page": page},
        )


def pixmap_pixels(picture: pymupdf.Pixmap) -> Image:
    """A pymupdf RGB pixmap's pixels as an array (a copy: the pixmap's buffer goes with it)."""
    rows = np.frombuffer(picture.samples, dtype=np.uint8).reshape(picture.height, picture.stride)
    return rows[:, : picture.width * 3].reshape(picture.height, picture.width, 3).copy()


def recognise(image: Image) -> str:
    """The text in ``image``, one line per row of text, left to right (a table's row stays on one line)."""
    with _ENGINE_LOCK:  # the engine is not documented as thread-safe; a parse process runs one parse anyway
        output = _engine()(np.ascontiguousarray(image[:, :, ::-1]))  # RapidOCR takes OpenCV's BGR order
    boxes = getattr(output, "boxes", None)
    texts = getattr(output, "txts", None)
    if boxes is None or texts is None:
        return ""
    return _lines(list(zip((np.asarray(b) for b in boxes), texts, strict=True)))


def _lines(found: list[tuple[npt.NDArray[Any], str]]) -> str:
    """Group the recognised boxes into rows: a box whose vertical middle falls inside a row's span joins it."""
    rows: list[tuple[float, float, list[tuple[float, str]]]] = []
    for box, text in sorted(found, key=lambda item: float(item[0][:, 1].min())):
        top, bottom = float(box[:, 1].min()), float(box[:, 1].max())
        middle, left = (top + bottom) / 2, float(box[:, 0].min())
        for index, (row_top, row_bottom, words) in enumerate(rows):
            if row_top <= middle <= row_bottom:
                words.append((left, text))
                rows[index] = (min(row_top, top), max(row_bottom, bottom), words)
                break
        else:
            rows.append((top, bottom, [(left, text)]))
    return "\n".join(" ".join(text for _, text in sorted(words)) for _, _, words in rows)


DETECTION_MODEL = PackagedFile(
    "rapidocr",
    "models/PP-OCRv6_det_small.onnx",
    "090f04abcd9d9a7498bc4ebf677e4cb9bdce1fe4197ddb7e529f1ef44e1ff94f",
    what="ocr_model",
)
"""PP-OCRv6 small text detection, in the pinned wheel; its digest is the one RapidAI publish for it
(``rapidocr/default_models.yaml``, ``multi_PP-OCRv6_det_small``)."""
RECOGNITION_MODEL = PackagedFile(
    "rapidocr",
    "models/PP-OCRv6_rec_small.onnx",
    "6f327246b50388f3c176ae304bd95767ea6dc0c9ae92153ef8cbe210b3c14884",
    what="ocr_model",
)
"""PP-OCRv6 small text recognition (``multi_PP-OCRv6_rec_small`` there)."""


@functools.cache
def _engine() -> Any:
    """The models, loaded once per process on first use (about a second); imported late so that a process that
    never recognises a page never pays for OpenCV and the models.

    Each model file is checked against its pinned digest and named by path (``ocr_model_mismatch`` otherwise):
    left to find its own, RapidOCR downloads a file whose digest differs from its list, and Ragu never reaches the
    network for weights."""
    from rapidocr import RapidOCR  # heavy, and only for pages that need it

    return RapidOCR(
        params={
            "Global.log_level": "warning",
            "Det.model_path": str(DETECTION_MODEL.verified_path()),
            "Rec.model_path": str(RECOGNITION_MODEL.verified_path()),
            # The 180-degree line classifier turned a third of the lines of plain typeset pages upside down into
            # garbage (bench/ocr_bench.py: recall 0.76 with it, 1.00 without); scanners deskew whole pages.
            "Global.use_cls": False,
            "EngineConfig.onnxruntime.intra_op_num_threads": OCR_THREADS,
            "EngineConfig.onnxruntime.inter_op_num_threads": OCR_THREADS,
        }
    )
