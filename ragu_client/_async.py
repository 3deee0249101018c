"""The asynchronous clients: :class:`AsyncKappiClient` and :class:`AsyncChonkitClient`, a method for every route.

``_sync.py`` is written from this file by ``tests/ragu_client/generate.py`` (``async`` and ``await`` removed, each
async type replaced by its sync twin), so both have the same methods: edit this file, then run the generator.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping, Sequence
from types import TracebackType
from typing import Any, Literal, Self, TypeVar
from urllib.parse import quote
from uuid import UUID

import httpx
import msgspec

from ragu_client._core import (
    FAILURES,
    AsyncToken,
    Files,
    RetryPolicy,
    SseParser,
    decode,
    event_of,
    no_answer,
    policy,
    prepared,
    problem,
    token_async,
)
from ragu_client.models import (
    AccessExplanation,
    AccessQuery,
    Agent,
    AgentCreate,
    AgentUpdate,
    AgentVersion,
    Answer,
    AnswerEvent,
    AnswerToken,
    AssignmentChanges,
    AssignmentReport,
    Chat,
    ChatCreate,
    ChatDetail,
    ChatRename,
    ChunkPreview,
    ChunkPreviewRequest,
    Collection,
    CollectionCreate,
    CollectionDetail,
    CollectionDocument,
    CollectionModel,
    Document,
    DocumentConfig,
    DocumentIds,
    DocumentPage,
    DocumentPatch,
    Done,
    EmbeddingChange,
    EmbeddingReport,
    GroupsUpdate,
    Health,
    Job,
    JobCreated,
    LlmCatalog,
    MigrationStatus,
    ParsePreview,
    ParsePreviewRequest,
    Preliminary,
    Providers,
    QueryAnswer,
    QueryRequest,
    Question,
    RetrievalFilters,
    Retrieved,
    RetrieveRequest,
    Run,
    SearchRequest,
    SearchResponse,
    Source,
    SourceCreate,
    Sources,
    SourceUpdate,
    UploadResponse,
    UserAgent,
)

T = TypeVar("T")
Id = UUID | str
Mode = Literal["dense", "lexical", "hybrid"]
Stage = Literal["queued", "parsing", "chunking", "embedding", "writing", "done", "skipped", "failed", "cancelled"]
UNSET: Any = msgspec.UNSET
"""An argument left out: the request omits it and the service's default applies (``None`` is sent as null)."""

_ANSWER_EVENTS: dict[str, type[AnswerEvent]] = {
    "sources": Sources,
    "preliminary": Preliminary,
    "token": AnswerToken,
    "done": Done,
}


def _query(**params: Any) -> dict[str, Any]:
    return {name: str(value) for name, value in params.items() if value is not None}


def _seg(value: Id) -> str:
    """A path parameter as one path segment: a ``/``, ``?``, ``#`` or ``..`` in it cannot reach another route."""
    return quote(str(value), safe="").replace(".", "%2E")


def _uuid(value: Id) -> Any:
    """An id for a request body, sent as given: a string that is no UUID (a name, say) is the service's to refuse,
    with its ``invalid_id`` problem (a :class:`~ragu_client.errors.BadRequestError`), not a ``ValueError`` here."""
    return str(value)


def _listed(values: Any, item: Callable[[Any], Any]) -> Any:
    """A sequence argument as the list a request holds; ``None`` and UNSET as they are."""
    return values if values is None or values is UNSET else [item(value) for value in values]


class AsyncService:
    """A session with one service at ``base_url`` (``https://ragu.example/kappi`` or ``.../chonkit``): the caller's
    token on every request, retries by :class:`RetryPolicy`, every failure a
    :class:`~ragu_client.errors.RaguError`. Use it as a context manager, or close it."""

    def __init__(
        self,
        base_url: str,
        token: AsyncToken,
        *,
        timeout: float | httpx.Timeout = 30.0,
        retries: RetryPolicy | int = 2,
        headers: Mapping[str, str] | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._token = token
        self.retries = policy(retries)
        self._headers = dict(headers or {})
        self._http = httpx.AsyncClient(base_url=base_url, timeout=timeout, transport=transport)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        await self.aclose()

    # the routes both services serve

    async def health(self) -> Health:
        """Alive (no dependency checked)."""
        return await self._call("GET", "/health", Health)

    async def ready(self) -> Health:
        """Ready to serve: its database answers (503 ``not_ready`` otherwise)."""
        return await self._call("GET", "/ready", Health)

    async def metrics(self) -> str:
        """Prometheus metrics, as text."""
        response = await self._request("GET", "/metrics")
        return response.text

    async def schemas(self) -> list[str]:
        """The names of the contract's JSON Schemas."""
        return await self._call("GET", "/schemas", list[str])

    async def schema(self, name: str) -> dict[str, Any]:
        """One of the contract's JSON Schemas (``identity``, ``text-payload``)."""
        return await self._call("GET", f"/schemas/{_seg(name)}", dict[str, Any])

    # the transport

    async def _call(
        self, method: str, path: str, answer: type[T], *, json: Any = None, params: dict[str, Any] | None = None
    ) -> T:
        response = await self._request(method, path, json=json, params=params)
        return decode(response.content, answer, response.status_code)

    async def _request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: dict[str, Any] | None = None,
        files: Files | None = None,
    ) -> httpx.Response:
        """The answer, read whole; an error answer raises, after the retries the policy allows. The body is read
        inside the retries, so a connection that breaks while it arrives is retried as the policy says."""
        return await self._send(method, path, json, params, files, stream=False)

    async def _events(self, method: str, path: str, *, json: Any = None) -> AsyncGenerator[tuple[str, bytes], None]:
        """(event name, data) of a Server-Sent Events answer, as each arrives; an ``error`` event raises
        :class:`~ragu_client.errors.StreamError`. Closing the generator closes the connection."""
        async with self._opened(method, path, json=json) as response:
            parser = SseParser()
            try:
                async for line in response.aiter_lines():
                    event = event_of(response.status_code, parser.line(line))
                    if event is not None:
                        yield event
            except FAILURES as exc:
                raise no_answer(exc) from None
            event = event_of(response.status_code, parser.end())
            if event is not None:
                yield event

    @contextlib.asynccontextmanager
    async def _opened(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: dict[str, Any] | None = None,
        files: Files | None = None,
    ) -> AsyncIterator[httpx.Response]:
        response = await self._send(method, path, json, params, files, stream=True)
        try:
            yield response
        finally:
            await response.aclose()

    async def _send(
        self, method: str, path: str, json: Any, params: dict[str, Any] | None, files: Files | None, *, stream: bool
    ) -> httpx.Response:
        """The first answer that is not an error (``stream``: its body not read yet); or the error, after the
        retries."""
        retry = 0
        while True:
            content, headers = prepared(json, await token_async(self._token), self._headers)
            try:
                request = self._http.build_request(
                    method, path, content=content, params=params, files=files, headers=headers
                )
                response = await self._http.send(request, stream=stream)
            except FAILURES as exc:
                wait = self.retries.after_failure(retry, method, exc)
                if wait is None:
                    raise no_answer(exc) from None
            else:
                if not response.is_error:
                    return response
                wait = self.retries.after_answer(retry, method, response)
                try:
                    await response.aread()
                except FAILURES as exc:
                    raise no_answer(exc) from None
                finally:
                    await response.aclose()
                if wait is None:
                    raise problem(response)
            await asyncio.sleep(wait)
            retry += 1


class AsyncKappiClient(AsyncService):
    """Kappi: the agents a user may use, questions (stateless, retrieval only, or in a chat, streamed) and their
    chats; with an admin's token, the agents themselves. Everything answers as the token's user."""

    # the user API

    async def agents(self) -> list[UserAgent]:
        """The active agents the token's groups may use."""
        return await self._call("GET", "/agents", list[UserAgent])

    async def agent(self, agent_id: Id) -> UserAgent:
        return await self._call("GET", f"/agents/{_seg(agent_id)}", UserAgent)

    async def query(self, agent_id: Id, content: str, *, filters: RetrievalFilters | None = UNSET) -> QueryAnswer:
        """Ask once, without a chat: the answer with its citations; nothing is stored. ``filters`` narrow the
        documents searched by tag or label."""
        body = QueryRequest(content=content, filters=filters)
        return await self._call("POST", f"/agents/{_seg(agent_id)}/query", QueryAnswer, json=body)

    async def retrieve(
        self,
        agent_id: Id,
        content: str,
        top_k: int | None = UNSET,
        *,
        filters: RetrievalFilters | None = UNSET,
        group_by: Literal["chunk", "document"] = "chunk",
    ) -> Retrieved:
        """The passages a question finds, best first, without an answer (no LLM is called); ``top_k`` up to 200,
        ``group_by="document"`` for each document's best passage with its count."""
        body = RetrieveRequest(content=content, top_k=top_k, filters=filters, group_by=group_by)
        return await self._call("POST", f"/agents/{_seg(agent_id)}/retrieve", Retrieved, json=body)

    async def create_chat(self, agent_id: Id, title: str | None = UNSET) -> Chat:
        body = ChatCreate(agent_id=_uuid(agent_id), title=title)
        return await self._call("POST", "/chats", Chat, json=body)

    async def chats(self, limit: int | None = None, offset: int | None = None) -> list[Chat]:
        """The token's user's chats, the most recently active first."""
        return await self._call("GET", "/chats", list[Chat], params=_query(limit=limit, offset=offset))

    async def chat(self, chat_id: Id) -> ChatDetail:
        return await self._call("GET", f"/chats/{_seg(chat_id)}", ChatDetail)

    async def rename_chat(self, chat_id: Id, title: str) -> Chat:
        return await self._call("PATCH", f"/chats/{_seg(chat_id)}", Chat, json=ChatRename(title=title))

    async def delete_chat(self, chat_id: Id) -> None:
        await self._request("DELETE", f"/chats/{_seg(chat_id)}")

    async def ask(self, chat_id: Id, content: str) -> Answer:
        """A question in a chat, answered as a whole (the chat's recent turns go with it)."""
        return await self._call("POST", f"/chats/{_seg(chat_id)}/messages", Answer, json=Question(content=content))

    async def ask_streamed(self, chat_id: Id, content: str) -> AsyncGenerator[AnswerEvent, None]:
        """:class:`Sources`, then (when a model answers) one :class:`Preliminary` quote, then :class:`AnswerToken`\\ s,
        then :class:`Done`; a failed answer raises :class:`~ragu_client.errors.StreamError` with its code. Closing
        the iterator (``contextlib.aclosing``) closes the connection at once, which stops an answer still being
        written."""
        events = self._events("POST", f"/chats/{_seg(chat_id)}/messages/stream", json=Question(content=content))
        async with contextlib.aclosing(events):
            async for name, data in events:
                kind = _ANSWER_EVENTS.get(name)
                if kind is not None:  # an event kind added later is skipped, not an error
                    yield decode(data, kind, 200)

    # the admin API (an admin's token)

    async def admin_agents(self) -> list[Agent]:
        """Every agent, active or not, with its configuration and collections."""
        return await self._call("GET", "/admin/agents", list[Agent])

    async def admin_agent(self, agent_id: Id) -> Agent:
        return await self._call("GET", f"/admin/agents/{_seg(agent_id)}", Agent)

    async def create_agent(self, agent: AgentCreate) -> Agent:
        return await self._call("POST", "/admin/agents", Agent, json=agent)

    async def update_agent(self, agent_id: Id, changes: AgentUpdate) -> Agent:
        """A change of its configuration makes a new version; questions under way keep theirs."""
        return await self._call("PATCH", f"/admin/agents/{_seg(agent_id)}", Agent, json=changes)

    async def delete_agent(self, agent_id: Id) -> None:
        await self._request("DELETE", f"/admin/agents/{_seg(agent_id)}")

    async def activate_agent(self, agent_id: Id) -> Agent:
        return await self._call("POST", f"/admin/agents/{_seg(agent_id)}/activate", Agent)

    async def deactivate_agent(self, agent_id: Id) -> Agent:
        return await self._call("POST", f"/admin/agents/{_seg(agent_id)}/deactivate", Agent)

    async def agent_versions(self, agent_id: Id) -> list[AgentVersion]:
        return await self._call("GET", f"/admin/agents/{_seg(agent_id)}/versions", list[AgentVersion])

    async def assign_collections(self, agent_id: Id, changes: AssignmentChanges) -> AssignmentReport:
        """Add and remove the agent's collections; each has its own result (``ok``, or a ``code``)."""
        return await self._call("PUT", f"/admin/agents/{_seg(agent_id)}/collections", AssignmentReport, json=changes)

    async def explain_access(self, agent_id: Id, who: AccessQuery) -> AccessExplanation:
        """What a user with these groups (or this token) would see of the agent, and why."""
        return await self._call("POST", f"/admin/agents/{_seg(agent_id)}/access", AccessExplanation, json=who)

    async def llms(self) -> LlmCatalog:
        """The LLM providers and models agents may use."""
        return await self._call("GET", "/admin/llms", LlmCatalog)


class AsyncChonkitClient(AsyncService):
    """Chonkit, the admin API (an admin's token): documents, collections, embedding jobs, sources and search."""

    # documents

    async def upload(self, files: Sequence[tuple[str, bytes]]) -> UploadResponse:
        """(file name, bytes) pairs. Each file has its own result (``created``, ``duplicate`` or ``rejected``);
        when every file is rejected the call raises, its ``body["results"]`` holding each file's reason."""
        sent = [("files", file) for file in files]
        response = await self._request("POST", "/documents", files=sent)
        return decode(response.content, UploadResponse, response.status_code)

    async def documents(
        self, *, limit: int | None = None, offset: int | None = None, sort: str | None = None, q: str | None = None
    ) -> DocumentPage:
        """A page of documents; ``sort`` a field, ``-`` first for descending (``-created_at``), ``q`` a name filter."""
        params = _query(limit=limit, offset=offset, sort=sort, q=q)
        return await self._call("GET", "/documents", DocumentPage, params=params)

    async def document(self, document_id: Id) -> Document:
        return await self._call("GET", f"/documents/{_seg(document_id)}", Document)

    async def update_document(self, document_id: Id, changes: DocumentPatch) -> Document:
        """Rename it, or set its label and tags (which its chunks carry for filters)."""
        return await self._call("PATCH", f"/documents/{_seg(document_id)}", Document, json=changes)

    async def delete_document(self, document_id: Id) -> None:
        await self._request("DELETE", f"/documents/{_seg(document_id)}")

    async def download(self, document_id: Id) -> bytes:
        """The document's bytes as uploaded."""
        response = await self._request("GET", f"/documents/{_seg(document_id)}/content")
        return response.content

    async def document_config(self, document_id: Id) -> DocumentConfig:
        return await self._call("GET", f"/documents/{_seg(document_id)}/config", DocumentConfig)

    async def set_document_config(self, document_id: Id, config: DocumentConfig) -> DocumentConfig:
        """How the document is parsed and chunked from its next embedding on."""
        return await self._call("PUT", f"/documents/{_seg(document_id)}/config", DocumentConfig, json=config)

    async def preview_parse(self, document_id: Id, request: ParsePreviewRequest | None = None) -> ParsePreview:
        body = request or ParsePreviewRequest()
        return await self._call("POST", f"/documents/{_seg(document_id)}/preview/parse", ParsePreview, json=body)

    async def preview_chunks(self, document_id: Id, request: ChunkPreviewRequest | None = None) -> ChunkPreview:
        body = request or ChunkPreviewRequest()
        return await self._call("POST", f"/documents/{_seg(document_id)}/preview/chunks", ChunkPreview, json=body)

    # collections

    async def collections(self) -> list[Collection]:
        return await self._call("GET", "/collections", list[Collection])

    async def collection(self, collection_id: Id) -> CollectionDetail:
        return await self._call("GET", f"/collections/{_seg(collection_id)}", CollectionDetail)

    async def create_collection(
        self,
        name: str,
        *,
        groups: Sequence[str] = UNSET,
        vector_provider: str = "pgvector",
        embedding_provider: str = "local",
        model: str | None = UNSET,
    ) -> Collection:
        """``groups`` who may read it (none: everyone); ``model`` the embedder's model (its default if left out)."""
        body = CollectionCreate(
            name=name,
            groups=_listed(groups, str),
            vector_provider=vector_provider,
            embedding_provider=embedding_provider,
            model=model,
        )
        return await self._call("POST", "/collections", Collection, json=body)

    async def delete_collection(self, collection_id: Id) -> None:
        await self._request("DELETE", f"/collections/{_seg(collection_id)}")

    async def set_groups(self, collection_id: Id, groups: Sequence[str]) -> Collection:
        """Replace who may read the collection (empty: everyone); applies to the chunks before it returns."""
        body = GroupsUpdate(groups=list(groups))
        return await self._call("PUT", f"/collections/{_seg(collection_id)}/groups", Collection, json=body)

    async def collection_documents(self, collection_id: Id) -> list[CollectionDocument]:
        return await self._call("GET", f"/collections/{_seg(collection_id)}/documents", list[CollectionDocument])

    async def add_documents(self, collection_id: Id, document_ids: Sequence[Id]) -> JobCreated:
        """Queue the documents' embedding; follow the job with :meth:`follow_job` or :meth:`wait_for_job`."""
        body = DocumentIds(document_ids=_listed(document_ids, _uuid))
        return await self._call("POST", f"/collections/{_seg(collection_id)}/documents", JobCreated, json=body)

    async def remove_documents(self, collection_id: Id, document_ids: Sequence[Id]) -> JobCreated:
        """Queue the removal of the documents' chunks from the collection."""
        body = DocumentIds(document_ids=_listed(document_ids, _uuid))
        return await self._call("POST", f"/collections/{_seg(collection_id)}/documents/remove", JobCreated, json=body)

    async def embedding_model(self, collection_id: Id) -> CollectionModel:
        return await self._call("GET", f"/collections/{_seg(collection_id)}/embedding", CollectionModel)

    async def change_embedding(self, collection_id: Id, change: EmbeddingChange) -> MigrationStatus:
        """Re-embed the collection with another model, in the background; questions switch when it is complete."""
        return await self._call("PUT", f"/collections/{_seg(collection_id)}/embedding", MigrationStatus, json=change)

    async def reports(self, collection_id: Id) -> list[EmbeddingReport]:
        return await self._call("GET", f"/collections/{_seg(collection_id)}/reports", list[EmbeddingReport])

    async def search(
        self,
        collection_id: Id,
        query: str,
        *,
        limit: int = 5,
        max_distance: float | None = UNSET,
        mode: Mode = "hybrid",
        dense_weight: float = 0.4,
        document_ids: Sequence[Id] | None = UNSET,
        tags: Sequence[str] | None = UNSET,
        labels: Sequence[str] | None = UNSET,
        group_by: Literal["document"] | None = UNSET,
    ) -> SearchResponse:
        """The admin's test bench: a collection searched without an agent or access filter."""
        body = SearchRequest(
            query=query,
            limit=limit,
            max_distance=max_distance,
            mode=mode,
            dense_weight=dense_weight,
            document_ids=_listed(document_ids, _uuid),
            tags=_listed(tags, str),
            labels=_listed(labels, str),
            group_by=group_by,
        )
        return await self._call("POST", f"/collections/{_seg(collection_id)}/search", SearchResponse, json=body)

    async def providers(self) -> Providers:
        """The embedding and vector providers this deployment offers."""
        return await self._call("GET", "/providers", Providers)

    # jobs

    async def jobs(self, *, collection_id: Id | None = None, limit: int | None = None) -> list[Job]:
        """The latest jobs, of one collection or all."""
        return await self._call("GET", "/jobs", list[Job], params=_query(collection_id=collection_id, limit=limit))

    async def job(
        self, job_id: Id, *, limit: int | None = None, offset: int | None = None, stage: Stage | None = None
    ) -> Job:
        """The job with a page of its items (``stage``: only items in that stage)."""
        params = _query(limit=limit, offset=offset, stage=stage)
        return await self._call("GET", f"/jobs/{_seg(job_id)}", Job, params=params)

    async def cancel_job(self, job_id: Id) -> Job:
        return await self._call("POST", f"/jobs/{_seg(job_id)}/cancel", Job)

    async def retry_job(self, job_id: Id) -> Job:
        return await self._call("POST", f"/jobs/{_seg(job_id)}/retry", Job)

    async def follow_job(self, job_id: Id) -> AsyncGenerator[Job, None]:
        """The job's events as they happen: first its counts, then each change (``items``: the items that
        changed), ending when the job finishes."""
        async with contextlib.aclosing(self._events("GET", f"/jobs/{_seg(job_id)}/events")) as events:
            async for name, data in events:
                if name == "job":
                    yield decode(data, Job, 200)

    async def wait_for_job(self, job_id: Id) -> Job:
        """Follow the job until it finishes, then the whole job (its status may be ``failed``: check it)."""
        async with contextlib.aclosing(self.follow_job(job_id)) as updates:  # closes the stream at once
            async for update in updates:
                if update.finished:
                    break
        return await self.job(job_id)

    # sources

    async def sources(self, collection_id: Id) -> list[Source]:
        return await self._call("GET", f"/collections/{_seg(collection_id)}/sources", list[Source])

    async def source(self, collection_id: Id, source_id: Id) -> Source:
        return await self._call("GET", f"/collections/{_seg(collection_id)}/sources/{_seg(source_id)}", Source)

    async def create_source(self, collection_id: Id, source: SourceCreate) -> Source:
        """A folder on the server or a web site the collection follows."""
        return await self._call("POST", f"/collections/{_seg(collection_id)}/sources", Source, json=source)

    async def update_source(self, collection_id: Id, source_id: Id, changes: SourceUpdate) -> Source:
        path = f"/collections/{_seg(collection_id)}/sources/{_seg(source_id)}"
        return await self._call("PATCH", path, Source, json=changes)

    async def delete_source(self, collection_id: Id, source_id: Id) -> None:
        await self._request("DELETE", f"/collections/{_seg(collection_id)}/sources/{_seg(source_id)}")

    async def sync_source(self, collection_id: Id, source_id: Id) -> Run:
        """Start a sync now: the run embeds what is new or changed and removes what is gone."""
        return await self._call("POST", f"/collections/{_seg(collection_id)}/sources/{_seg(source_id)}/sync", Run)

    async def runs(self, collection_id: Id, source_id: Id, *, limit: int | None = None) -> list[Run]:
        path = f"/collections/{_seg(collection_id)}/sources/{_seg(source_id)}/runs"
        return await self._call("GET", path, list[Run], params=_query(limit=limit))

    async def run(self, collection_id: Id, source_id: Id, run_id: Id) -> Run:
        return await self._call(
            "GET", f"/collections/{_seg(collection_id)}/sources/{_seg(source_id)}/runs/{_seg(run_id)}", Run
        )

    async def cancel_run(self, collection_id: Id, source_id: Id, run_id: Id) -> Run:
        path = f"/collections/{_seg(collection_id)}/sources/{_seg(source_id)}/runs/{_seg(run_id)}/cancel"
        return await self._call("POST", path, Run)

    async def retry_run(self, collection_id: Id, source_id: Id, run_id: Id) -> Run:
        path = f"/collections/{_seg(collection_id)}/sources/{_seg(source_id)}/runs/{_seg(run_id)}/retry"
        return await self._call("POST", path, Run)

    async def follow_run(self, collection_id: Id, source_id: Id, run_id: Id) -> AsyncGenerator[Run, None]:
        """The run now, then whenever its status, report or job progress changes, ending when it finishes."""
        path = f"/collections/{_seg(collection_id)}/sources/{_seg(source_id)}/runs/{_seg(run_id)}/events"
        async with contextlib.aclosing(self._events("GET", path)) as events:
            async for name, data in events:
                if name == "run":
                    yield decode(data, Run, 200)
