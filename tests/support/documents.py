"""Real documents built in the tests (no third-party files are committed)."""

from __future__ import annotations

import io
import zipfile

import pymupdf


def pdf(pages: list[str], *, encrypt: bool = False) -> bytes:
    doc = pymupdf.open()
    for text in pages:
        page = doc.new_page()
        page.insert_textbox(pymupdf.Rect(50, 50, 550, 800), text, fontsize=11)
    options = {"encryption": pymupdf.PDF_ENCRYPT_AES_256, "user_pw": "secret", "owner_pw": "owner"} if encrypt else {}
    data: bytes = doc.tobytes(**options)
    doc.close()
    return data


def docx(paragraphs: list[tuple[str, str]]) -> bytes:
    """(style, text) pairs, e.g. ("Heading 1", "Intro"), ("Normal", "Body text.")."""
    import docx as python_docx

    document = python_docx.Document()
    for style, text in paragraphs:
        document.add_paragraph(text, style=style)
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def zip_bomb_docx() -> bytes:
    """A structurally valid DOCX whose document.xml inflates to 16 MB (a 1000:1 ratio)."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("[Content_Types].xml", '<?xml version="1.0"?><Types/>')
        with archive.open("word/document.xml", "w", force_zip64=True) as member:
            chunk = b"\0" * (1 << 20)
            for _ in range(16):
                member.write(chunk)
    return out.getvalue()
