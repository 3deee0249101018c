"""Hostile and broken inputs against chonkit's upload and config APIs (and kappi's JSON bodies).

Every input must be answered with a client error carrying a stable ``code`` (or, for inputs that are
merely unusual, be accepted), within a bounded time, and a rejection must leave nothing behind: no row,
no blob. Third-party files are never committed: the real-world PDFs come from pypdf's source distribution,
downloaded at test time by ``tests/chonkit/parsing/conftest.py``.
"""

from __future__ import annotations

import io
import random
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from chonkit.app import create_app as create_chonkit
from common.clients import SharedClients
from common.config import Settings
from common.db import SingleConnectionDatabase
from common.db.database import Connection
from tests.chonkit.parsing.conftest import pypdf_download, pypdf_resources
from tests.conftest import AppClient
from tests.kappi.conftest import as_user
from tests.support.documents import docx, pdf, zip_bomb_docx

__all__ = ["pypdf_download", "pypdf_resources"]

PER_INPUT_SECONDS = 20.0
"""Generous: a bound that catches a hang or a blow-up, not a benchmark (those live under ``bench/``)."""
MUTATIONS = 300
STABLE_CODE = {
    "document_corrupt",
    "document_encrypted",
    "document_zip_bomb",
    "empty_file",
    "no_text",
    "type_mismatch",
    "unsupported_type",
    "invalid_filename",
    "file_too_large",
    "payload_too_large",
    "invalid_request",
}


class Tally:
    """How many inputs were tried and the slowest answer, printed for the hardening report."""

    tried = 0
    slowest = 0.0

    @classmethod
    def timed(cls, started: float) -> None:
        elapsed = time.perf_counter() - started
        cls.tried += 1
        cls.slowest = max(cls.slowest, elapsed)
        assert elapsed < PER_INPUT_SECONDS


@pytest.fixture(scope="module", autouse=True)
def report_tally() -> Iterator[None]:
    yield
    print(f"\nbad inputs tried: {Tally.tried}, slowest answer: {Tally.slowest:.2f} s")


async def upload(chonkit: httpx.AsyncClient, name: str, data: bytes) -> httpx.Response:
    started = time.perf_counter()
    response = await chonkit.post("/documents", files=[("files", (name, data, "application/octet-stream"))])
    Tally.timed(started)
    return response


async def assert_consistent_store(conn: Connection, settings: Settings) -> int:
    """Every stored row has its blob and every blob its row: nothing half-stored. Returns the row count."""
    rows = {r["sha256"] for r in await conn.fetch("SELECT sha256 FROM chonkit.documents")}
    blob_root = settings.server.data_path / "documents"
    blobs = {p.name for p in blob_root.rglob("*") if p.is_file()} if blob_root.exists() else set()
    assert rows == blobs
    return len(rows)


def assert_rejected(response: httpx.Response) -> None:
    assert 400 <= response.status_code < 500, response.text[:500]
    assert response.headers["content-type"].startswith("application/problem+json")
    assert response.json()["code"] in STABLE_CODE, response.text[:500]


def assert_accepted_or_rejected(response: httpx.Response) -> None:
    if response.status_code not in {200, 201}:
        assert_rejected(response)


# -- PDFs --------------------------------------------------------------------------------------------------------


async def test_every_pypdf_test_pdf_is_stored_or_refused_cleanly(
    chonkit: httpx.AsyncClient, conn: Connection, settings: Settings, pypdf_resources: Path
) -> None:
    """pypdf's own corpus of odd, broken and encrypted PDFs from many producers."""
    files = _read_pdfs(pypdf_resources)
    assert len(files) >= 20
    codes: set[str] = set()
    for name, data in files:
        response = await upload(chonkit, name, data)
        assert_accepted_or_rejected(response)
        if response.status_code >= 400:
            codes.add(response.json()["code"])
    assert "document_encrypted" in codes or "document_corrupt" in codes
    await assert_consistent_store(conn, settings)


def _read_pdfs(folder: Path) -> list[tuple[str, bytes]]:
    return [(path.name, path.read_bytes()) for path in sorted(folder.rglob("*.pdf"))]


def mutate(data: bytes, rng: random.Random) -> bytes:
    """One random corruption: flipped bytes, a cut, a spliced duplicate or inserted junk."""
    buffer = bytearray(data)
    match rng.randrange(4):
        case 0:
            for _ in range(rng.randint(1, 64)):
                buffer[rng.randrange(len(buffer))] = rng.randrange(256)
        case 1:
            cut = rng.randrange(len(buffer))
            buffer = buffer[:cut] + buffer[-rng.randint(0, 64) :] if rng.random() < 0.5 else buffer[:cut]
        case 2:
            start = rng.randrange(len(buffer))
            buffer[start:start] = buffer[rng.randrange(len(buffer)) :][: rng.randint(1, 512)]
        case _:
            start = rng.randrange(len(buffer))
            buffer[start:start] = rng.randbytes(rng.randint(1, 256))
    return bytes(buffer)


async def test_randomly_mutated_pdfs_are_stored_or_refused_cleanly(
    chonkit: httpx.AsyncClient, conn: Connection, settings: Settings
) -> None:
    rng = random.Random(20_26)
    valid = pdf(["Mutation target, page one.", "Second page, with more words in it.", "Third page."])
    created = rejected = 0
    for n in range(MUTATIONS):
        response = await upload(chonkit, f"mutant{n}.pdf", mutate(valid, rng))
        assert_accepted_or_rejected(response)
        created += response.status_code == 201
        rejected += response.status_code >= 400
    assert rejected > 0
    assert await assert_consistent_store(conn, settings) == created


# -- archives, markup, text, names -----------------------------------------------------------------------------


def _zip(entries: list[tuple[str, bytes]], *, compression: int = zipfile.ZIP_DEFLATED) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression) as archive:
        for name, data in entries:
            archive.writestr(name, data)
    return out.getvalue()


def _docx_parts(document_xml: bytes, *extra: tuple[str, bytes]) -> bytes:
    """A real DOCX (python-docx's parts) with its main part replaced, plus ``extra`` entries."""
    with zipfile.ZipFile(io.BytesIO(docx([("Normal", "placeholder")]))) as real:
        parts = [(i.filename, real.read(i)) for i in real.infolist() if i.filename != "word/document.xml"]
    return _zip([*parts, ("word/document.xml", document_xml), *extra])


def _bare_content_types() -> bytes:
    """A ``[Content_Types].xml`` without its namespace: python-docx trips over it with an AttributeError."""
    return _zip([("[Content_Types].xml", b'<?xml version="1.0"?><Types/>'), ("word/document.xml", b"<w:document/>")])


def _wide_bomb() -> bytes:
    """Hundreds of 1 MiB entries, each under the ratio check's floor, adding up past the total limit."""
    return _docx_parts(b"<w:document/>", *((f"word/media/{n}.bin", b"\0" * (1 << 20)) for n in range(210)))


def _nested_bomb() -> bytes:
    """A zip bomb zipped inside the DOCX's main part."""
    return _docx_parts(_zip([("inner.xml", b"\0" * (16 << 20))]))


def _many_entries() -> bytes:
    return _docx_parts(b"<w:document/>", *((f"word/x{n}.xml", b"") for n in range(10_050)))


def _lying_sizes() -> bytes:
    """A directory that claims document.xml is 10 bytes while it inflates to 1 MiB."""
    data = bytearray(_docx_parts(b"<w:document>" + b"A" * (1 << 20) + b"</w:document>"))
    central = data.rfind(b"PK\x01\x02word/document.xml"[:4])
    while central >= 0 and b"word/document.xml" not in data[central + 46 : central + 46 + 17]:
        central = data.rfind(b"PK\x01\x02", 0, central)
    data[central + 24 : central + 28] = (10).to_bytes(4, "little")
    return bytes(data)


def _embedded_docx() -> bytes:
    """A real DOCX that carries another (bomb) archive as an embedded object: never unpacked, so storable."""
    outer = zipfile.ZipFile(io.BytesIO(docx([("Normal", "Outer text.")])))
    parts = [(i.filename, outer.read(i)) for i in outer.infolist()]
    return _zip([*parts, ("word/embeddings/bomb.zip", zip_bomb_docx())])


def _billion_laughs() -> bytes:
    entities = "".join(f'<!ENTITY l{n} "{("&l" + str(n - 1) + ";") * 10}">' for n in range(1, 10))
    return f'<?xml version="1.0"?><!DOCTYPE d [<!ENTITY l0 "lol">{entities}]><w:document>&l9;</w:document>'.encode()


def _huge_page_tree() -> bytes:
    """A hand-written PDF whose page tree claims two billion pages."""
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 2000000000 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] >>",
    ]
    out = bytearray(b"%PDF-1.7\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 4\n0000000000 65535 f \n" + b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size 4 /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % xref
    return bytes(out)


BAD_FILES: list[tuple[str, str, Any]] = [
    ("docx high-ratio bomb", "bomb.docx", zip_bomb_docx),
    ("docx wide bomb", "wide.docx", _wide_bomb),
    ("docx nested bomb", "nested.docx", _nested_bomb),
    ("docx with 10k entries", "many.docx", _many_entries),
    ("docx with lying sizes", "liar.docx", _lying_sizes),
    ("docx with a bomb embedded", "embedded.docx", _embedded_docx),
    ("docx that is a truncated zip", "cut.docx", lambda: docx([("Normal", "Some text.")])[:400]),
    ("docx with a bare content-types part", "bare.docx", _bare_content_types),
    ("docx without document.xml", "empty.docx", lambda: _zip([("[Content_Types].xml", b"<Types/>")])),
    ("docx with broken XML", "broken.docx", lambda: _docx_parts(b"<w:document><w:body><unclosed")),
    ("docx with an XML entity bomb", "lol.docx", lambda: _docx_parts(_billion_laughs())),
    ("deeply nested html", "deep.html", lambda: b"<div>" * 200_000 + b"deep text" + b"</div>" * 200_000),
    ("deeply nested unclosed html", "deep2.html", lambda: b"<b><i>" * 100_000 + b"text"),
    ("html of only tags", "tags.html", lambda: b"<p></p>" * 100_000),
    ("deeply nested json", "deep.json", lambda: b"[" * 100_000 + b"]" * 100_000),
    ("deeply nested json object", "deep2.json", lambda: b'{"a":' * 50_000 + b"1" + b"}" * 50_000),
    ("invalid json", "bad.json", lambda: b'{"a": "unterminated'),
    ("deeply nested markdown", "deep.md", lambda: b">" * 100_000 + b" quote"),
    ("markdown list bomb", "list.md", lambda: b"".join(b"  " * n + b"- item\n" for n in range(2_000))),
    ("10 MB single-line text", "line.txt", lambda: b"word " * 2_000_000),
    ("10 MB single-line csv", "line.csv", lambda: b"a;" * 5_000_000),
    ("invalid UTF-8", "bad.txt", lambda: b"caf\xc3 \xff\xfe not \xed\xa0\x80 utf8 " * 100),
    ("UTF-16 without a BOM", "wide.txt", lambda: "Plain words in UTF-16.".encode("utf-16-le")),
    ("lone surrogates (CESU-8)", "cesu.md", lambda: b"# Title\n\n\xed\xa0\xbd\xed\xb8\x80 text"),
    ("NUL bytes in text", "nul.txt", lambda: b"text\x00with\x00nuls " * 100),
    ("only whitespace", "blank.txt", lambda: b" \n\t\r\n " * 1000),
    ("BOM only", "bom.txt", lambda: b"\xef\xbb\xbf"),
    ("PDF header on text", "fake.pdf", lambda: b"%PDF-1.7\nnot really\n%%EOF"),
    ("PDF with a huge page count claim", "pages.pdf", _huge_page_tree),
    ("encrypted PDF", "locked.pdf", lambda: pdf(["Secret"], encrypt=True)),
    ("NUL in the file name", "a\x00b.txt", lambda: b"hello"),
    ("control characters in the name", "a\x1b[31mred.txt", lambda: b"hello"),
    ("a 300-byte name", "n" * 300 + ".txt", lambda: b"hello"),
    ("only an extension", ".txt", lambda: b"hello"),
    ("dot-dot name", "..", lambda: b"hello"),
]


@pytest.mark.parametrize(("name", "build"), [b[1:] for b in BAD_FILES], ids=[b[0] for b in BAD_FILES])
async def test_hostile_files_are_answered_cleanly(
    chonkit: httpx.AsyncClient, conn: Connection, settings: Settings, name: str, build: Any
) -> None:
    response = await upload(chonkit, name, build())
    assert_accepted_or_rejected(response)
    if response.status_code >= 400:
        assert await assert_consistent_store(conn, settings) == 0


@pytest.mark.parametrize(
    ("name", "build", "code"),
    [
        ("bomb.docx", zip_bomb_docx, "document_zip_bomb"),
        ("wide.docx", _wide_bomb, "document_zip_bomb"),
        ("many.docx", _many_entries, "document_zip_bomb"),
        ("nested.docx", _nested_bomb, "document_corrupt"),
        ("lol.docx", lambda: _docx_parts(_billion_laughs()), "document_corrupt"),
        ("liar.docx", _lying_sizes, "document_corrupt"),
        ("bare.docx", _bare_content_types, "document_corrupt"),
        ("locked.pdf", lambda: pdf(["Secret"], encrypt=True), "document_encrypted"),
    ],
)
async def test_bombs_and_locks_get_their_own_code(
    chonkit: httpx.AsyncClient, conn: Connection, settings: Settings, name: str, build: Any, code: str
) -> None:
    response = await upload(chonkit, name, build())
    assert (response.status_code // 100, response.json()["code"]) == (4, code), response.text[:300]
    assert await assert_consistent_store(conn, settings) == 0


# -- JSON bodies: configs, patches, agents, chats ------------------------------------------------------------------


@pytest.fixture
async def document_id(chonkit: httpx.AsyncClient) -> str:
    response = await upload(chonkit, "target.pdf", pdf(["Page one.", "Page two."]))
    doc_id: str = response.json()["results"][0]["document"]["id"]
    return doc_id


NUL = "a\u0000b"


def _chonkit_bodies(document_id: str) -> list[tuple[str, str, str, Any]]:
    return [
        ("NUL in a label", "PATCH", f"/documents/{document_id}", {"label": NUL}),
        ("NUL in a tag", "PATCH", f"/documents/{document_id}", {"tags": [NUL]}),
        ("NUL in a name", "PATCH", f"/documents/{document_id}", {"name": NUL + ".pdf"}),
        ("NUL in a line filter", "PUT", f"/documents/{document_id}/config", {"parse": {"line_filters": [NUL]}}),
        ("unknown config field", "PUT", f"/documents/{document_id}/config", {"parse": {"ocr": True}}),
        ("config of the wrong type", "PUT", f"/documents/{document_id}/config", {"parse": "everything"}),
        ("config as a list", "PUT", f"/documents/{document_id}/config", [1, 2, 3]),
        (
            "huge page numbers",
            "PUT",
            f"/documents/{document_id}/config",
            {"parse": {"page_range": {"start": 1, "end": 2**70}}},
        ),
        (
            "negative pages",
            "PUT",
            f"/documents/{document_id}/config",
            {"parse": {"page_range": {"start": -1, "end": 1}}},
        ),
        (
            "huge chunk size",
            "POST",
            f"/documents/{document_id}/preview/chunks",
            {"chunk": {"strategy": "fixed", "size": 2**62, "overlap": 0}},
        ),
        ("unknown embedding model", "POST", f"/documents/{document_id}/preview/chunks", {"model": "nope"}),
        (
            "unknown embedding provider",
            "POST",
            f"/documents/{document_id}/preview/chunks",
            {"embedding_provider": "nope"},
        ),
        ("NUL in a collection name", "POST", "/collections", {"name": "A\u0000b"}),
        ("NUL in a group", "POST", "/collections", {"name": "Nul_group", "groups": [NUL]}),
        ("NUL in a search", "POST", f"/collections/{document_id}/search", {"query": NUL}),
        ("unknown collection field", "POST", "/collections", {"name": "Abc", "dimension": 3}),
        ("document ids that are not ids", "POST", f"/collections/{document_id}/documents", {"document_ids": ["x"]}),
        ("NUL in the sort", "GET", "/documents?sort=a%00b", None),
        ("NUL in the search", "GET", "/documents?q=a%00b", None),
    ]


async def test_bad_chonkit_json_bodies_are_4xx_and_change_nothing(chonkit: httpx.AsyncClient, document_id: str) -> None:
    before = (
        (await chonkit.get(f"/documents/{document_id}")).json(),
        (await chonkit.get(f"/documents/{document_id}/config")).json(),
    )
    for label, method, path, body in _chonkit_bodies(document_id):
        started = time.perf_counter()
        response = await chonkit.request(method, path, json=body)
        Tally.timed(started)
        assert 400 <= response.status_code < 500, (label, response.text[:300])
        assert response.json()["code"], label
    after = (
        (await chonkit.get(f"/documents/{document_id}")).json(),
        (await chonkit.get(f"/documents/{document_id}/config")).json(),
    )
    assert after == before
    assert [c["name"] for c in (await chonkit.get("/collections")).json()] == []


def _kappi_bodies(agent_id: str, chat_id: str) -> list[tuple[str, str, str, Any]]:
    return [
        ("NUL in an agent name", "POST", "/admin/agents", {"name": NUL}),
        ("NUL in a description", "POST", "/admin/agents", {"name": "A", "description": NUL}),
        ("NUL in a system prompt", "PATCH", f"/admin/agents/{agent_id}", {"system_prompt": NUL}),
        ("NUL in an agent group", "POST", "/admin/agents", {"name": "A", "groups": [NUL]}),
        ("garbage token to explain", "POST", f"/admin/agents/{agent_id}/access", {"token": "x" * 20_000}),
        ("NUL in a chat title", "POST", "/chats", {"agent_id": agent_id, "title": NUL}),
        ("NUL in a rename", "PATCH", f"/chats/{chat_id}", {"title": NUL}),
        ("NUL in a question", "POST", f"/chats/{chat_id}/messages", {"content": NUL}),
        ("NUL in a streamed question", "POST", f"/chats/{chat_id}/messages/stream", {"content": NUL}),
        ("unknown agent field", "POST", "/admin/agents", {"name": "A", "colour": "red"}),
        ("agent_id not a uuid", "POST", "/chats", {"agent_id": "hr"}),
        ("NaN temperature", "POST", "/admin/agents", {"name": "A", "temperature": "NaN"}),
        ("huge max_tokens", "POST", "/admin/agents", {"name": "A", "max_tokens": 2**70}),
    ]


async def test_bad_kappi_json_bodies_are_4xx_and_store_nothing(
    kappi: httpx.AsyncClient, conn: Connection, settings: Settings
) -> None:
    admin = as_user(settings, "root", admin=True)
    agent = (await kappi.post("/admin/agents", json={"name": "Target"}, headers=admin)).json()
    chat = (await kappi.post("/chats", json={"agent_id": agent["id"]}, headers=admin)).json()
    for label, method, path, body in _kappi_bodies(agent["id"], chat["id"]):
        started = time.perf_counter()
        response = await kappi.request(method, path, json=body, headers=admin)
        Tally.timed(started)
        assert 400 <= response.status_code < 500, (label, response.text[:300])
        assert response.json()["code"], label
    assert await conn.fetchval("SELECT count(*) FROM kappi.agents") == 1
    assert await conn.fetchval("SELECT count(*) FROM kappi.messages") == 0
    assert (await kappi.get(f"/chats/{chat['id']}", headers=admin)).json()["chat"]["title"] == chat["title"]


async def test_json_bodies_over_kappis_request_limit_are_413(kappi: httpx.AsyncClient, settings: Settings) -> None:
    """Kappi keeps Litestar's 10 MB default request limit."""
    body = b'{"name": "' + b"x" * 10_000_001 + b'"}'
    headers = {**as_user(settings, "root", admin=True), "Content-Type": "application/json"}
    started = time.perf_counter()
    response = await kappi.post("/admin/agents", content=body, headers=headers)
    Tally.timed(started)
    assert (response.status_code, response.json()["code"]) == (413, "payload_too_large")


async def test_json_bodies_over_chonkits_request_limit_are_413(
    settings: Settings, db: SingleConnectionDatabase, clients: SharedClients, app_client: AppClient, conn: Connection
) -> None:
    """Chonkit's admin router admits uploads, so its limit is the upload limit (made small here)."""
    small = settings.with_(chonkit_max_upload_bytes=100_000)
    async with app_client(create_chonkit(small, database=db, clients=clients, worker=False)) as client:
        client.headers.update(as_user(small, "root", admin=True))
        created = await client.post("/documents", files=[("files", ("t.txt", b"Some text.", "text/plain"))])
        doc_id = created.json()["results"][0]["document"]["id"]
        body = b'{"parse": {"line_filters": ["' + b"x" * 100_001 + b'"]}}'
        started = time.perf_counter()
        response = await client.put(
            f"/documents/{doc_id}/config", content=body, headers={"Content-Type": "application/json"}
        )
        Tally.timed(started)
        assert (response.status_code, response.json()["code"]) == (413, "payload_too_large")
        assert (await client.get(f"/documents/{doc_id}/config")).json()["parse"]["line_filters"] in (None, [])


@pytest.mark.parametrize(
    "files",
    [
        [],
        [("files", (None, "not a file"))],
        [("attachment", ("a.txt", b"hello there"))],
        [("", (None, "null")), ("files", (None, "{}"))],
    ],
    ids=["no parts", "text instead of a file", "file under another name", "only text fields"],
)
async def test_multipart_forms_without_files_are_4xx(
    chonkit: httpx.AsyncClient, conn: Connection, settings: Settings, files: list[Any]
) -> None:
    """An empty form used to crash Litestar's list[UploadFile] extraction with an IndexError (500)."""
    if files:
        response = await chonkit.post("/documents", files=files)
    else:
        boundary = "ragu-empty"
        response = await chonkit.post(
            "/documents",
            content=f"--{boundary}--\r\n".encode(),
            headers={"Content-Type": f"multipart/form-data; boundary={boundary}"},
        )
    assert response.status_code in {400, 422}, response.text
    assert response.json()["code"] in {"invalid_request", "no_files"}
    assert await assert_consistent_store(conn, settings) == 0
