"""PNG, JPEG and TIFF uploads: pictures of text, read by OCR one frame (page) at a time.

Pillow decodes them (the frames of a multi-page TIFF are its pages); the size in the header is checked before any
pixel is decoded, so a small file declaring a huge image is refused (``image_too_large``), and a file Pillow
cannot decode is ``document_corrupt``. Page range and sections select frames as they select PDF pages.

The frames to recognise are counted from the header before any is decoded, so a file of more than
:data:`~chonkit.document.parsing.ocr.MAX_OCR_PAGES` of them is refused at once; a blank frame is decoded but not
recognised, and a stop is asked for before each frame.
"""

from __future__ import annotations

import io
import warnings

import numpy as np
from PIL import Image, ImageSequence, UnidentifiedImageError

from chonkit.document.parsing import ocr
from chonkit.document.parsing.blocks import BlockBuilder
from chonkit.document.parsing.config import ParseConfig
from chonkit.document.parsing.doctype import DocumentType
from chonkit.document.parsing.pdf_parser import page_groups
from common.errors import InvalidInput

MAX_FRAMES = 2000
"""Pages of a multi-page TIFF; a PDF of scans is the better container past that."""
_DECODE_ERRORS = (OSError, ValueError, SyntaxError, EOFError, UnidentifiedImageError)


def parse_image(
    data: bytes,
    doc_type: DocumentType,
    config: ParseConfig,
    builder: BlockBuilder,
    *,
    recognise: bool = True,
    stop: ocr.StopCheck | None = None,
) -> tuple[int, tuple[int, ...]]:
    """Add a ``page`` block (marked ``ocr``) per frame that holds text, in one section per configured range.

    With ``ocr: off`` nothing is recognised, so the image has no text. ``recognise=False`` decodes every frame
    (an upload's check) without recognising it, and does not apply the OCR page limit: the document's parse config,
    set after the upload, may still select fewer frames.

    Returns:
        The frame count and the frames OCR read (or would read; blank ones included, though they add no text).

    Raises:
        InvalidInput: ``document_corrupt``, ``image_too_large``, ``page_range_out_of_bounds`` or
            ``ocr_too_many_pages``.
        ParseStopped: ``stop`` said so before a frame.
    """
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data), formats=[_PIL_FORMATS[doc_type]]) as image:
                frame_count = int(getattr(image, "n_frames", 1))
                if frame_count > MAX_FRAMES:
                    raise InvalidInput(
                        f"The image has {frame_count} pages; at most {MAX_FRAMES} are read.", code="image_too_large"
                    )
                recognised = _read_frames(image, frame_count, config, builder, recognise=recognise, stop=stop)
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        raise InvalidInput(f"The image is too large to read: {exc}", code="image_too_large") from exc
    except _DECODE_ERRORS as exc:
        raise InvalidInput(f"The image could not be read: {exc}.", code="document_corrupt") from exc
    return frame_count, recognised


def _read_frames(
    image: Image.Image,
    frame_count: int,
    config: ParseConfig,
    builder: BlockBuilder,
    *,
    recognise: bool,
    stop: ocr.StopCheck | None,
) -> tuple[int, ...]:
    """Decode each wanted frame (and recognise it, unless OCR is off) into its configured section; the frames
    OCR read."""
    wanted = {
        number: (pages.start, pages.end)
        for pages in page_groups(config, frame_count)
        for number in range(pages.start, pages.end + 1)
    }
    if recognise and config.ocr != "off":
        ocr.check_ocr_pages(len(wanted))
    recognised: list[int] = []
    section: tuple[int, int] | None = None
    for number, frame in enumerate(ImageSequence.Iterator(image), start=1):
        if number not in wanted:
            continue
        if section is not None and wanted[number] != section:
            builder.end_section(page_start=section[0], page_end=section[1])
        section = wanted[number]
        ocr.stop_if_asked(stop, page=number)
        ocr.check_pixels(*frame.size, page=number)
        pixels = np.asarray(frame.convert("RGB"), dtype=np.uint8)  # decodes: corrupt data fails here
        if config.ocr == "off":
            continue
        recognised.append(number)
        if recognise and not ocr.is_blank(pixels):
            builder.add(ocr.recognise(pixels), "page", page=number, ocr=True)
    if section is not None:
        builder.end_section(page_start=section[0], page_end=section[1])
    return tuple(recognised)


_PIL_FORMATS = {DocumentType.PNG: "PNG", DocumentType.JPEG: "JPEG", DocumentType.TIFF: "TIFF"}
