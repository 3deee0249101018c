"""The documents API end to end on a real PostgreSQL, real parsers and real files built in the tests."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any
from uuid import UUID

import httpx
import msgspec
import pymupdf
import pytest
from litestar import Litestar

from chonkit.app import create_app, provide_documents, provide_originals
from common.clients import SharedClients
from common.config import Settings
from common.db import PoolDatabase, SingleConnectionDatabase
from common.db.database import Connection
from tests.chonkit.conftest import AppClient, bearer
from tests.support.documents import docx, pdf, zip_bomb_docx

PDF_MEDIA = "application/pdf"


def files(*items: tuple[str, bytes]) -> list[tuple[str, tuple[str, bytes, str]]]:
    return [("files", (name, data, "application/octet-stream")) for name, data in items]


async def upload(client: httpx.AsyncClient, *items: tuple[str, bytes]) -> httpx.Response:
    return await client.post("/documents", files=files(*items))


async def document_count(conn: Connection) -> int:
    return int(await conn.fetchval("SELECT count(*) FROM chonkit.documents"))


def stored_blobs(settings: Settings) -> list[Path]:
    return [p for p in (settings.server.data_path / "documents").rglob("*") if p.is_file()]


async def test_upload_get_list_download_patch_delete(chonkit: httpx.AsyncClient, settings: Settings) -> None:
    data = pdf(["Page one talks about vacation policy.", "Page two is about sick leave.", "Page three: payroll."])
    created = await upload(chonkit, ("handbook.pdf", data))
    assert created.status_code == 201
    result = created.json()["results"][0]
    assert result["status"] == "created"
    document = result["document"]
    assert (document["name"], document["doc_type"], document["page_count"]) == ("handbook.pdf", "pdf", 3)
    assert document["size_bytes"] == len(data)
    doc_id = document["id"]

    assert (await chonkit.get(f"/documents/{doc_id}")).json() == document
    listing = (await chonkit.get("/documents", params={"q": "HANDBOOK"})).json()
    assert [d["id"] for d in listing["items"]] == [doc_id]
    assert listing["total"] == 1

    download = await chonkit.get(f"/documents/{doc_id}/content")
    assert download.status_code == 200
    assert download.content == data
    assert download.headers["content-type"] == PDF_MEDIA
    assert "handbook.pdf" in download.headers["content-disposition"]

    patched = (await chonkit.patch(f"/documents/{doc_id}", json={"label": "HR"})).json()
    assert (patched["name"], patched["label"], patched["tags"]) == ("handbook.pdf", "HR", [])
    patched = (await chonkit.patch(f"/documents/{doc_id}", json={"tags": ["policy", "2026"]})).json()
    assert (patched["label"], patched["tags"]) == ("HR", ["policy", "2026"])
    patched = (await chonkit.patch(f"/documents/{doc_id}", json={"label": None})).json()
    assert (patched["label"], patched["tags"]) == (None, ["policy", "2026"])

    assert (await chonkit.delete(f"/documents/{doc_id}")).status_code == 204
    assert (await chonkit.get(f"/documents/{doc_id}")).json()["code"] == "document_not_found"
    assert stored_blobs(settings) == []


async def test_identical_bytes_are_stored_once_and_equal_names_twice(
    chonkit: httpx.AsyncClient, settings: Settings, conn: Connection
) -> None:
    first = (await upload(chonkit, ("a.md", b"# Title\n\nSame bytes."))).json()["results"][0]
    again = await upload(chonkit, ("renamed.md", b"# Title\n\nSame bytes."))
    assert again.status_code == 200
    duplicate = again.json()["results"][0]
    assert duplicate["status"] == "duplicate"
    assert duplicate["document"]["id"] == first["document"]["id"]
    other = (await upload(chonkit, ("a.md", b"# Title\n\nOther bytes."))).json()["results"][0]
    assert other["status"] == "created"
    assert await document_count(conn) == 2
    assert len(stored_blobs(settings)) == 2


async def test_many_files_in_one_request_get_results_in_order(chonkit: httpx.AsyncClient, conn: Connection) -> None:
    response = await upload(
        chonkit,
        ("notes.txt", b"Plain notes.\n\nSecond paragraph."),
        ("broken.pdf", b"%PDF-1.7\n garbage"),
        ("page.html", b"<html><body><h1>Hi</h1><p>Text</p><script>x()</script></body></html>"),
    )
    assert response.status_code == 201
    results = response.json()["results"]
    assert [r["status"] for r in results] == ["created", "rejected", "created"]
    assert results[1]["error"]["code"] == "document_corrupt"
    assert results[1]["filename"] == "broken.pdf"
    assert await document_count(conn) == 2


BAD_UPLOADS: list[tuple[str, str, bytes, int, str]] = [
    ("empty", "empty.txt", b"", 422, "empty_file"),
    ("encrypted pdf", "secret.pdf", pdf(["Top secret"], encrypt=True), 422, "document_encrypted"),
    ("truncated pdf", "cut.pdf", pdf(["Some text here."] * 3)[:300], 422, "document_corrupt"),
    ("garbage pdf", "junk.pdf", b"%PDF-1.4\n" + bytes(range(256)) * 20, 422, "document_corrupt"),
    ("docx zip bomb", "bomb.docx", zip_bomb_docx(), 422, "document_zip_bomb"),
    ("docx not a zip", "fake.docx", b"this is not a zip archive at all", 415, "type_mismatch"),
    ("pdf named .txt", "report.txt", pdf(["Real PDF content."]), 415, "type_mismatch"),
    ("unsupported type", "tool.exe", b"MZ\x90\x00binary", 415, "unsupported_type"),
    ("path traversal name", "../../etc/passwd.txt", b"hello there", 422, "invalid_filename"),
    ("windows path name", "..\\evil.txt", b"hello there", 422, "invalid_filename"),
]


@pytest.mark.parametrize(
    ("name", "data", "status", "code"), [b[1:] for b in BAD_UPLOADS], ids=[b[0] for b in BAD_UPLOADS]
)
async def test_bad_uploads_get_their_own_code_and_leave_no_trace(
    chonkit: httpx.AsyncClient, settings: Settings, conn: Connection, name: str, data: bytes, status: int, code: str
) -> None:
    response = await upload(chonkit, (name, data))
    assert response.status_code == status, response.text
    body = response.json()
    assert body["code"] == code
    assert body["results"][0]["status"] == "rejected"
    assert await document_count(conn) == 0
    assert stored_blobs(settings) == []


@pytest.mark.parametrize("raw_name", [b"a\x07b.txt", b"nul\x00byte.txt", b"rtl\xe2\x80\xaetxt.exe"])
async def test_control_characters_in_names_are_refused(
    chonkit: httpx.AsyncClient, conn: Connection, raw_name: bytes
) -> None:
    """httpx escapes such names, so the multipart body is written by hand, as a hostile client would."""
    boundary = b"ragu-test-boundary"
    body = (
        b"--" + boundary + b"\r\n"
        b'Content-Disposition: form-data; name="files"; filename="' + raw_name + b'"\r\n'
        b"Content-Type: text/plain\r\n\r\nhello there\r\n--" + boundary + b"--\r\n"
    )
    response = await chonkit.post(
        "/documents", content=body, headers={"Content-Type": f"multipart/form-data; boundary={boundary.decode()}"}
    )
    assert response.status_code in {400, 422}, response.text
    assert response.json()["code"] in {"invalid_filename", "invalid_request"}
    assert await document_count(conn) == 0


async def test_upload_over_the_limit_is_413(
    settings: Settings,
    db: SingleConnectionDatabase,
    clients: SharedClients,
    app_client: AppClient,
    conn: Connection,
) -> None:
    small = settings.with_(chonkit_max_upload_bytes=10_000)
    async with app_client(create_app(small, database=db, clients=clients, worker=False)) as client:
        client.headers.update(bearer(small))
        response = await upload(client, ("big.txt", b"word " * 5_000))
    assert response.status_code == 413
    assert response.json()["code"] in {"payload_too_large", "file_too_large"}
    assert await document_count(conn) == 0


async def test_admin_only(chonkit: httpx.AsyncClient, settings: Settings) -> None:
    user = bearer(settings, "bob", admin=False, groups=("hr",))
    response = await chonkit.get("/documents", headers=user)
    assert (response.status_code, response.json()["code"]) == (403, "admin_required")
    anonymous = await chonkit.get("/documents", headers={"Authorization": ""})
    assert anonymous.status_code == 401


async def test_list_pagination_sort_and_bad_sort(chonkit: httpx.AsyncClient) -> None:
    for i in range(5):
        await upload(chonkit, (f"doc{i}.txt", f"Document number {i}.".encode()))
    page = (await chonkit.get("/documents", params={"limit": 2, "offset": 1, "sort": "name"})).json()
    assert [d["name"] for d in page["items"]] == ["doc1.txt", "doc2.txt"]
    assert page["total"] == 5
    bad = await chonkit.get("/documents", params={"sort": "password"})
    assert (bad.status_code, bad.json()["code"]) == (422, "invalid_sort")
    too_big = await chonkit.get("/documents", params={"limit": 100_000})
    assert too_big.status_code == 400


async def test_patch_rejects_unknown_fields_and_path_names(chonkit: httpx.AsyncClient) -> None:
    doc_id = (await upload(chonkit, ("x.txt", b"Some text."))).json()["results"][0]["document"]["id"]
    unknown = await chonkit.patch(f"/documents/{doc_id}", json={"sha256": "0" * 64})
    assert unknown.status_code == 400
    path_name = await chonkit.patch(f"/documents/{doc_id}", json={"name": "../x.txt"})
    assert (path_name.status_code, path_name.json()["code"]) == (422, "invalid_filename")
    assert (await chonkit.get(f"/documents/{doc_id}")).json()["name"] == "x.txt"


# -- configs and previews -------------------------------------------------------------------------------------


@pytest.fixture
async def three_page_pdf(chonkit: httpx.AsyncClient) -> str:
    data = pdf([f"This is page {n}.\nIt is about topic {n}." for n in (1, 2, 3)])
    doc_id: str = (await upload(chonkit, ("three.pdf", data))).json()["results"][0]["document"]["id"]
    return doc_id


BAD_CONFIGS: list[tuple[str, dict[str, Any], str]] = [
    ("invalid regex", {"parse": {"line_filters": ["(unclosed"]}}, "invalid_regex"),
    ("backreference", {"parse": {"line_filters": [r"(\w)\1"]}}, "invalid_regex"),
    ("lookahead", {"parse": {"line_filters": ["total(?= EUR)"]}}, "invalid_regex"),
    ("page range outside", {"parse": {"page_range": {"start": 2, "end": 9}}}, "page_range_out_of_bounds"),
    ("inverted page range", {"parse": {"page_range": {"start": 3, "end": 1}}}, "invalid_page_range"),
    ("zero chunk size", {"chunk": {"strategy": "fixed", "size": 0, "overlap": 0}}, "invalid_chunk_size"),
    ("negative chunk size", {"chunk": {"strategy": "fixed", "size": -5, "overlap": 0}}, "invalid_chunk_size"),
    ("overlap = size", {"chunk": {"strategy": "fixed", "size": 100, "overlap": 100}}, "invalid_overlap"),
    ("overlap > size", {"chunk": {"strategy": "fixed", "size": 100, "overlap": 150}}, "invalid_overlap"),
]


@pytest.mark.parametrize(("body", "code"), [b[1:] for b in BAD_CONFIGS], ids=[b[0] for b in BAD_CONFIGS])
async def test_bad_configs_are_refused_when_saved(
    chonkit: httpx.AsyncClient, three_page_pdf: str, body: dict[str, Any], code: str
) -> None:
    before = (await chonkit.get(f"/documents/{three_page_pdf}/config")).json()
    response = await chonkit.put(f"/documents/{three_page_pdf}/config", json=body)
    assert response.status_code == 422, response.text
    assert response.json()["code"] == code
    assert (await chonkit.get(f"/documents/{three_page_pdf}/config")).json() == before


async def test_unknown_config_fields_are_refused(chonkit: httpx.AsyncClient, three_page_pdf: str) -> None:
    for body in ({"parse": {"pages": [1]}}, {"chunking": {}}, {"chunk": {"strategy": "fixed", "size": 9, "sizee": 1}}):
        response = await chonkit.put(f"/documents/{three_page_pdf}/config", json=body)
        assert response.status_code in {400, 422}, body
        assert response.json()["code"] in {"invalid_request", "unknown_field"}


async def test_saved_page_range_drives_the_parse_preview(chonkit: httpx.AsyncClient, three_page_pdf: str) -> None:
    saved = await chonkit.put(
        f"/documents/{three_page_pdf}/config",
        json={"parse": {"page_range": {"start": 2, "end": 3}, "line_filters": ["topic 3"]}},
    )
    assert saved.status_code == 200
    preview = (await chonkit.post(f"/documents/{three_page_pdf}/preview/parse", json={})).json()
    blocks = [b for s in preview["sections"] for b in s["blocks"]]
    assert [b["page"] for b in blocks] == [2, 3]
    assert "page 2" in blocks[0]["text"]
    assert blocks[1]["text"] == "This is page 3."
    assert preview["page_count"] == 3


async def test_unsaved_configs_preview_chunks_with_model_tokens(chonkit: httpx.AsyncClient) -> None:
    markdown = b"# Guide\n\n## Install\n\nRun the installer. Then restart.\n\n## Use\n\nOpen the app. Click start.\n"
    doc_id = (await upload(chonkit, ("guide.md", markdown))).json()["results"][0]["document"]["id"]
    response = await chonkit.post(
        f"/documents/{doc_id}/preview/chunks",
        json={"chunk": {"strategy": "structure", "size": 64, "overlap": 0, "unit": "tokens"}},
    )
    assert response.status_code == 200, response.text
    preview = response.json()
    assert (preview["embedding_provider"], preview["model"]) == ("local", "all-MiniLM-L6-v2")
    paths = [c["heading_path"] for c in preview["chunks"]]
    assert ["Guide", "Install"] in paths
    assert ["Guide", "Use"] in paths
    install = next(c for c in preview["chunks"] if c["heading_path"] == ["Guide", "Install"])
    assert install["text"].startswith("Guide > Install")
    assert 0 < install["token_count"] <= 64
    assert preview["oversized"] == []
    # nothing was saved by previewing
    assert (await chonkit.get(f"/documents/{doc_id}/config")).json()["chunk"] is None


async def test_preview_reports_chunks_over_the_model_limit(chonkit: httpx.AsyncClient) -> None:
    text = (" ".join(["tokenization"] * 400)).encode()
    doc_id = (await upload(chonkit, ("long.txt", text))).json()["results"][0]["document"]["id"]
    preview = (
        await chonkit.post(
            f"/documents/{doc_id}/preview/chunks",
            json={"chunk": {"strategy": "fixed", "size": 20_000, "overlap": 0, "unit": "characters"}},
        )
    ).json()
    assert preview["oversized"] == [0]
    assert preview["chunks"][0]["oversized"] is True
    assert preview["chunks"][0]["token_count"] > preview["max_tokens"]
    assert preview["chunks"][0]["text"] == text.decode()  # reported, never truncated


async def test_docx_parse_preview_keeps_headings_in_reading_order(chonkit: httpx.AsyncClient) -> None:
    data = docx([("Heading 1", "Leave"), ("Normal", "Ten days a year."), ("Heading 2", "Sick"), ("Normal", "Call in.")])
    doc_id = (await upload(chonkit, ("leave.docx", data))).json()["results"][0]["document"]["id"]
    preview = (await chonkit.post(f"/documents/{doc_id}/preview/parse", json={})).json()
    blocks = [(b["kind"], b["text"], b["heading_path"]) for s in preview["sections"] for b in s["blocks"]]
    assert blocks == [
        ("heading", "Leave", ["Leave"]),
        ("paragraph", "Ten days a year.", ["Leave"]),
        ("heading", "Sick", ["Leave", "Sick"]),
        ("paragraph", "Call in.", ["Leave", "Sick"]),
    ]


async def test_a_backtracking_line_filter_previews_within_the_issues_bar(chonkit: httpx.AsyncClient) -> None:
    """Issue #14: Python's ``re`` took 9.5 s on this preview; the bar is an answer within 3 s."""
    text = ("a" * 26 + "b\n") * 3
    doc_id = (await upload(chonkit, ("aaa.txt", text.encode()))).json()["results"][0]["document"]["id"]
    saved = await chonkit.put(f"/documents/{doc_id}/config", json={"parse": {"line_filters": ["(a+)+$"]}})
    assert saved.status_code == 200, saved.text

    started = time.perf_counter()
    preview = await chonkit.post(f"/documents/{doc_id}/preview/parse", json={})

    assert time.perf_counter() - started < 3.0
    assert preview.status_code == 200, preview.text
    assert [b["text"] for s in preview.json()["sections"] for b in s["blocks"]] == [text.strip()]


# -- concurrency, on committed data ------------------------------------------------------------------------------


async def test_hundred_concurrent_identical_uploads_store_one_document(
    settings: Settings, database_url: str, clients: SharedClients, app_client: AppClient
) -> None:
    data = pdf(["Concurrency is not parallelism."])
    database = await PoolDatabase.connect(database_url, min_size=2, max_size=10)
    app: Litestar = create_app(settings, database=database, clients=clients, worker=False)
    try:
        async with app_client(app) as client:
            client.headers.update(bearer(settings))
            responses = await asyncio.gather(*(upload(client, (f"copy{i}.pdf", data)) for i in range(100)))
            statuses = sorted(r.json()["results"][0]["status"] for r in responses)
            assert statuses.count("created") == 1
            assert statuses.count("duplicate") == 99
            ids = {r.json()["results"][0]["document"]["id"] for r in responses}
            assert len(ids) == 1
            async with database.transaction() as c:
                assert (
                    await c.fetchval(
                        "SELECT count(*) FROM chonkit.documents WHERE sha256 = encode(sha256($1), 'hex')", data
                    )
                    == 1
                )
            assert len(stored_blobs(settings)) == 1
            await client.delete(f"/documents/{ids.pop()}")
    finally:
        await database.aclose()


async def test_a_blob_removal_left_by_a_delete_spares_bytes_uploaded_again_meanwhile(
    settings: Settings, database_url: str, clients: SharedClients, app_client: AppClient
) -> None:
    """A deletion removes the original after its commit, in a background task; the same bytes uploaded in
    between make a new document whose original that removal must leave alone (found by the soak)."""
    data = pdf(["Deleted, then uploaded again."])
    database = await PoolDatabase.connect(database_url, min_size=1, max_size=4)
    app: Litestar = create_app(settings, database=database, clients=clients, worker=False)
    try:
        async with app_client(app) as client:
            client.headers.update(bearer(settings))
            first = (await upload(client, ("again.pdf", data))).json()["results"][0]["document"]
            # the deletion, its blob removal not run yet
            await provide_documents(app.state).delete(msgspec.convert(first["id"], UUID))
            second = (await upload(client, ("again.pdf", data))).json()["results"][0]
            assert second["status"] == "created"

            removed = await provide_originals(app.state).remove(first["sha256"])  # the removal left behind

            assert removed is False
            assert (await client.get(f"/documents/{second['document']['id']}/content")).content == data
            assert (await client.delete(f"/documents/{second['document']['id']}")).status_code == 204
            assert stored_blobs(settings) == []  # with nobody left using it, the original goes
    finally:
        await database.aclose()


def test_pymupdf_builds_the_pdfs_we_upload() -> None:
    with pymupdf.open(stream=pdf(["a", "b"]), filetype="pdf") as doc:
        assert doc.page_count == 2
