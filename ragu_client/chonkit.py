"""Chonkit's admin API, the calls a script needs: upload documents, make collections and set their groups,
embed documents and follow the job to its end, and search a collection (the admin's unfiltered test bench)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, Sequence
from uuid import UUID

import msgspec

from ragu_client.http import Service
from ragu_client.models import (
    Collection,
    CollectionCreate,
    DocumentIds,
    GroupsUpdate,
    Job,
    JobCreated,
    SearchRequest,
    SearchResponse,
    UploadResponse,
)


class ChonkitClient(Service):
    async def upload(self, files: Sequence[tuple[str, bytes]]) -> UploadResponse:
        """(file name, bytes) pairs. Each file has its own result (``created``, ``duplicate`` or ``rejected``);
        when every file is rejected the call raises, its ``body["results"]`` holding each file's reason."""
        response = await self._send("POST", "/documents", files=[("files", f) for f in files])
        return msgspec.json.decode(response.content, type=UploadResponse)

    async def create_collection(
        self,
        name: str,
        *,
        groups: Sequence[str] = (),
        vector_provider: str = "pgvector",
        embedding_provider: str = "local",
        model: str | None = None,
    ) -> Collection:
        body = CollectionCreate(
            name=name,
            groups=list(groups),
            vector_provider=vector_provider,
            embedding_provider=embedding_provider,
            model=model,
        )
        return await self._call("POST", "/collections", Collection, body=body)

    async def collections(self) -> list[Collection]:
        return await self._call("GET", "/collections", list[Collection])

    async def set_groups(self, collection_id: UUID | str, groups: Sequence[str]) -> Collection:
        """Replace who may read the collection (empty: everyone); applies to the chunks before it returns."""
        body = GroupsUpdate(groups=list(groups))
        return await self._call("PUT", f"/collections/{collection_id}/groups", Collection, body=body)

    async def delete_collection(self, collection_id: UUID | str) -> None:
        await self._send("DELETE", f"/collections/{collection_id}")

    async def add_documents(self, collection_id: UUID | str, document_ids: Sequence[UUID | str]) -> JobCreated:
        """Queue the documents' embedding; follow the job with :meth:`wait_for_job`."""
        body = DocumentIds(document_ids=[UUID(str(d)) for d in document_ids])
        return await self._call("POST", f"/collections/{collection_id}/documents", JobCreated, body=body)

    async def job(self, job_id: UUID | str) -> Job:
        return await self._call("GET", f"/jobs/{job_id}", Job)

    async def follow_job(self, job_id: UUID | str) -> AsyncGenerator[Job, None]:
        """The job's events as they happen: first its counts, then each change (``items``: the items that
        changed), ending when the job finishes."""
        async with contextlib.aclosing(self._events("GET", f"/jobs/{job_id}/events")) as events:
            async for name, data in events:
                if name == "job":
                    yield msgspec.json.decode(data, type=Job)

    async def wait_for_job(self, job_id: UUID | str) -> Job:
        """Follow the job until it finishes, then the whole job (its status may be ``failed``: check it)."""
        async with contextlib.aclosing(self.follow_job(job_id)) as updates:  # closes the stream at once
            async for update in updates:
                if update.finished:
                    break
        return await self.job(job_id)

    async def search(
        self, collection_id: UUID | str, query: str, *, limit: int = 5, max_distance: float | None = None
    ) -> SearchResponse:
        body = SearchRequest(query=query, limit=limit, max_distance=max_distance)
        return await self._call("POST", f"/collections/{collection_id}/search", SearchResponse, body=body)
