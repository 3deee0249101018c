"""``/documents``: upload, list, read, edit, download and delete originals; save and preview their configs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any
from uuid import UUID

import msgspec
from litestar import Controller, Response, delete, get, patch, post, put
from litestar.background_tasks import BackgroundTask
from litestar.datastructures import UploadFile
from litestar.di import NamedDependency
from litestar.params import FromPath, FromQuery, JSONBody, MultipartBody, QueryParameter
from litestar.response import File
from litestar.status_codes import HTTP_200_OK, HTTP_201_CREATED

from chonkit.document.models import (
    ChunkPreview,
    ChunkPreviewRequest,
    Document,
    DocumentConfig,
    DocumentPage,
    DocumentPatch,
    ParsePreview,
    ParsePreviewRequest,
    UploadResponse,
)
from chonkit.document.service import DocumentService, IncomingFile, UnusedOriginals
from common.http.pagination import Offset
from common.http.problems import problem


@dataclass
class UploadForm:
    """The multipart form, by field name: Litestar validates it (a body without ``files``, or with text where a
    file belongs, is a 400), where a bare ``list[UploadFile]`` took whatever field came first and failed on none."""

    files: list[UploadFile]


Limit = Annotated[int, QueryParameter(ge=1, le=200, description="page size")]


class DocumentController(Controller):
    """Originals uploaded by admins. Files are parsed at upload, so what is stored is known to be readable."""

    path = "/documents"
    tags = ["documents"]

    @post("/", status_code=HTTP_201_CREATED, summary="Upload one or many files")
    async def upload(
        self, documents: NamedDependency[DocumentService], data: MultipartBody[UploadForm]
    ) -> Response[Any]:
        """Multipart field ``files`` (repeatable). Each file gets its own result: ``created``, ``duplicate``
        (identical bytes are stored once; the existing document is returned) or ``rejected`` with a code.
        201 when anything was created, 200 when all were duplicates; when every file is rejected the
        response is the first rejection's problem document (4xx), with all per-file results attached."""
        files = [IncomingFile(filename=f.filename, data=await f.read()) for f in data.files]
        results = await documents.upload(files)
        errors = [r.error for r in results if r.error is not None]
        if len(errors) == len(results):
            first = errors[0]
            return problem(first.status, first.code, first.detail, results=msgspec.to_builtins(results))
        status = HTTP_201_CREATED if any(r.status == "created" for r in results) else HTTP_200_OK
        return Response(UploadResponse(results=results), status_code=status)

    @get("/", summary="List documents")
    async def list_documents(
        self,
        documents: NamedDependency[DocumentService],
        limit: FromQuery[Limit] = 50,
        offset: FromQuery[Offset] = 0,
        sort: FromQuery[str] = "-created_at",
        q: FromQuery[str | None] = None,
    ) -> DocumentPage:
        """Newest first by default; ``sort`` is one of ``created_at``, ``updated_at``, ``name``, ``size_bytes``
        (prefix ``-`` for descending); ``q`` searches names and labels (case-insensitive substring)."""
        return await documents.page(limit=limit, offset=offset, sort=sort, search=q)

    @get("/{document_id:uuid}", summary="Get a document")
    async def get_document(self, documents: NamedDependency[DocumentService], document_id: FromPath[UUID]) -> Document:
        return await documents.get(document_id)

    @patch("/{document_id:uuid}", summary="Edit name, label or tags")
    async def patch_document(
        self, documents: NamedDependency[DocumentService], document_id: FromPath[UUID], data: JSONBody[DocumentPatch]
    ) -> Document:
        """Only the fields sent change; ``"label": null`` clears the label."""
        return await documents.patch(document_id, data)

    @get("/{document_id:uuid}/content", summary="Download the original")
    async def download(self, documents: NamedDependency[DocumentService], document_id: FromPath[UUID]) -> File:
        """The bytes as uploaded, with the type's content type and the document's name."""
        document, path = await documents.content_path(document_id)
        return File(path=path, filename=document.name, media_type=document.media_type)

    @delete("/{document_id:uuid}", summary="Delete a document")
    async def delete_document(
        self,
        documents: NamedDependency[DocumentService],
        originals: NamedDependency[UnusedOriginals],
        document_id: FromPath[UUID],
    ) -> Response[None]:
        """Removes its vectors from every collection and the row now, and the stored original once the
        deletion has committed."""
        document = await documents.delete(document_id)
        return Response(None, status_code=204, background=BackgroundTask(originals.remove, document.sha256))

    @get("/{document_id:uuid}/config", summary="The saved parse and chunk config")
    async def get_config(
        self, documents: NamedDependency[DocumentService], document_id: FromPath[UUID]
    ) -> DocumentConfig:
        return await documents.get_config(document_id)

    @put("/{document_id:uuid}/config", summary="Save the parse and chunk config")
    async def put_config(
        self, documents: NamedDependency[DocumentService], document_id: FromPath[UUID], data: JSONBody[DocumentConfig]
    ) -> DocumentConfig:
        """Validated when saved: unknown fields, invalid regexes, page ranges outside the document, zero or
        negative chunk sizes and overlaps not smaller than the size are all refused with their own code."""
        return await documents.set_config(document_id, data)

    @post("/{document_id:uuid}/preview/parse", status_code=HTTP_200_OK, summary="Preview the parsed text")
    async def preview_parse(
        self,
        documents: NamedDependency[DocumentService],
        document_id: FromPath[UUID],
        data: JSONBody[ParsePreviewRequest],
    ) -> ParsePreview:
        """Blocks with pages, heading paths and offsets, for the saved or an unsaved parse config."""
        return await documents.preview_parse(document_id, data)

    @post("/{document_id:uuid}/preview/chunks", status_code=HTTP_200_OK, summary="Preview the chunks")
    async def preview_chunks(
        self,
        documents: NamedDependency[DocumentService],
        document_id: FromPath[UUID],
        data: JSONBody[ChunkPreviewRequest],
    ) -> ChunkPreview:
        """Chunks with token counts (the embedding model's tokenizer) and positions, for unsaved configs,
        so an admin can tune sizes before embedding. Chunks over the model's limit are listed in ``oversized``."""
        return await documents.preview_chunks(document_id, data)
