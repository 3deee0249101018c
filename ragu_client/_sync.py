"""GENERATED from ``_async.py`` by tests/ragu_client/generate.py: do not edit.

The synchronous clients: :class:`KappiClient` and :class:`ChonkitClient`, the same methods as the
asynchronous ones, answering directly; their streams are iterators.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from types import TracebackType
from typing import Any, Literal, Self, TypeVar
from urllib.parse import quote
from uuid import UUID

import httpx
import msgspec

from ragu_client._core import (
    FAILURES,
    Files,
    RetryPolicy,
    SseParser,
    SyncToken,
    decode,
    event_of,
    no_answer,
    policy,
    prepared,
    problem,
    token_sync,
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


class Service:
    """A session with one service at ``base_url`` (``https://ragu.example/kappi`` or ``.../chonkit``): the caller's
    token on every request, retries by :class:`RetryPolicy`, every failure a
    :class:`~ragu_client.errors.RaguError`. Use it as a context manager, or close it."""

    def __init__(
        self,
        base_url: str,
        token: SyncToken,
        *,
        timeout: float | httpx.Timeout = 30.0,
        retries: RetryPolicy | int = 2,
        headers: Mapping[str, str] | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self._token = token
        self.retries = policy(retries)
        self._headers = dict(headers or {})
        self._http = httpx.Client(base_url=base_url, timeout=timeout, transport=transport)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()

    # the routes both services serve

    def health(self) -> Health:
        """Alive (no dependency checked)."""
        return self._call("GET", "/health", Health)

    def ready(self) -> Health:
        """Ready to serve: its database answers (503 ``not_ready`` otherwise)."""
        return self._call("GET", "/ready", Health)

    def metrics(self) -> str:
        """Prometheus metrics, as text."""
        response = self._request("GET", "/metrics")
        return response.text

    def schemas(self) -> list[str]:
        """The names of the contract's JSON Schemas."""
        return self._call("GET", "/schemas", list[str])

    def schema(self, name: str) -> dict[str, Any]:
        """One of the contract's JSON Schemas (``identity``, ``text-payload``)."""
        return self._call("GET", f"/schemas/{_seg(name)}", dict[str, Any])

    # the transport

    def _call(
        self, method: str, path: str, answer: type[T], *, json: Any = None, params: dict[str, Any] | None = None
    ) -> T:
        response = self._request(method, path, json=json, params=params)
        return decode(response.content, answer, response.status_code)

    def _request(
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
        return self._send(method, path, json, params, files, stream=False)

    def _events(self, method: str, path: str, *, json: Any = None) -> Generator[tuple[str, bytes], None, None]:
        """(event name, data) of a Server-Sent Events answer, as each arrives; an ``error`` event raises
        :class:`~ragu_client.errors.StreamError`. Closing the generator closes the connection."""
        with self._opened(method, path, json=json) as response:
            parser = SseParser()
            try:
                for line in response.iter_lines():
                    event = event_of(response.status_code, parser.line(line))
                    if event is not None:
                        yield event
            except FAILURES as exc:
                raise no_answer(exc) from None
            event = event_of(response.status_code, parser.end())
            if event is not None:
                yield event

    @contextlib.contextmanager
    def _opened(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: dict[str, Any] | None = None,
        files: Files | None = None,
    ) -> Iterator[httpx.Response]:
        response = self._send(method, path, json, params, files, stream=True)
        try:
            yield response
        finally:
            response.close()

    def _send(
        self, method: str, path: str, json: Any, params: dict[str, Any] | None, files: Files | None, *, stream: bool
    ) -> httpx.Response:
        """The first answer that is not an error (``stream``: its body not read yet); or the error, after the
        retries."""
        retry = 0
        while True:
            content, headers = prepared(json, token_sync(self._token), self._headers)
            try:
                request = self._http.build_request(
                    method, path, content=content, params=params, files=files, headers=headers
                )
                response = self._http.send(request, stream=stream)
            except FAILURES as exc:
                wait = self.retries.after_failure(retry, method, exc)
                if wait is None:
                    raise no_answer(exc) from None
            else:
                if not response.is_error:
                    return response
                wait = self.retries.after_answer(retry, method, response)
                try:
                    response.read()
                except FAILURES as exc:
                    raise no_answer(exc) from None
                finally:
                    response.close()
                if wait is None:
                    raise problem(response)
            time.sleep(wait)
            retry += 1


class KappiClient(Service):
    """Kappi: the agents a user may use, questions (stateless, retrieval only, or in a chat, streamed) and their
    chats; with an admin's token, the agents themselves. Everything answers as the token's user."""

    # the user API

    def agents(self) -> list[UserAgent]:
        """The active agents the token's groups may use."""
        return self._call("GET", "/agents", list[UserAgent])

    def agent(self, agent_id: Id) -> UserAgent:
        return self._call("GET", f"/agents/{_seg(agent_id)}", UserAgent)

    def query(self, agent_id: Id, content: str, *, filters: RetrievalFilters | None = UNSET) -> QueryAnswer:
        """Ask once, without a chat: the answer with its citations; nothing is stored. ``filters`` narrow the
        documents searched by tag or label."""
        body = QueryRequest(content=content, filters=filters)
        return self._call("POST", f"/agents/{_seg(agent_id)}/query", QueryAnswer, json=body)

    def retrieve(
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
        return self._call("POST", f"/agents/{_seg(agent_id)}/retrieve", Retrieved, json=body)

    def create_chat(self, agent_id: Id, title: str | None = UNSET) -> Chat:
        body = ChatCreate(agent_id=_uuid(agent_id), title=title)
        return self._call("POST", "/chats", Chat, json=body)

    def chats(self, limit: int | None = None, offset: int | None = None) -> list[Chat]:
        """The token's user's chats, the most recently active first."""
        return self._call("GET", "/chats", list[Chat], params=_query(limit=limit, offset=offset))

    def chat(self, chat_id: Id) -> ChatDetail:
        return self._call("GET", f"/chats/{_seg(chat_id)}", ChatDetail)

    def rename_chat(self, chat_id: Id, title: str) -> Chat:
        return self._call("PATCH", f"/chats/{_seg(chat_id)}", Chat, json=ChatRename(title=title))

    def delete_chat(self, chat_id: Id) -> None:
        self._request("DELETE", f"/chats/{_seg(chat_id)}")

    def ask(self, chat_id: Id, content: str) -> Answer:
        """A question in a chat, answered as a whole (the chat's recent turns go with it)."""
        return self._call("POST", f"/chats/{_seg(chat_id)}/messages", Answer, json=Question(content=content))

    def ask_streamed(self, chat_id: Id, content: str) -> Generator[AnswerEvent, None, None]:
        """:class:`Sources`, then (when a model answers) one :class:`Preliminary` quote, then :class:`AnswerToken`\\ s,
        then :class:`Done`; a failed answer raises :class:`~ragu_client.errors.StreamError` with its code. Closing
        the iterator (``contextlib.closing``) closes the connection at once, which stops an answer still being
        written."""
        events = self._events("POST", f"/chats/{_seg(chat_id)}/messages/stream", json=Question(content=content))
        with contextlib.closing(events):
            for name, data in events:
                kind = _ANSWER_EVENTS.get(name)
                if kind is not None:  # an event kind added later is skipped, not an error
                    yield decode(data, kind, 200)

    # the admin API (an admin's token)

    def admin_agents(self) -> list[Agent]:
        """Every agent, active or not, with its configuration and collections."""
        return self._call("GET", "/admin/agents", list[Agent])

    def admin_agent(self, agent_id: Id) -> Agent:
        return self._call("GET", f"/admin/agents/{_seg(agent_id)}", Agent)

    def create_agent(self, agent: AgentCreate) -> Agent:
        return self._call("POST", "/admin/agents", Agent, json=agent)

    def update_agent(self, agent_id: Id, changes: AgentUpdate) -> Agent:
        """A change of its configuration makes a new version; questions under way keep theirs."""
        return self._call("PATCH", f"/admin/agents/{_seg(agent_id)}", Agent, json=changes)

    def delete_agent(self, agent_id: Id) -> None:
        self._request("DELETE", f"/admin/agents/{_seg(agent_id)}")

    def activate_agent(self, agent_id: Id) -> Agent:
        return self._call("POST", f"/admin/agents/{_seg(agent_id)}/activate", Agent)

    def deactivate_agent(self, agent_id: Id) -> Agent:
        return self._call("POST", f"/admin/agents/{_seg(agent_id)}/deactivate", Agent)

    def agent_versions(self, agent_id: Id) -> list[AgentVersion]:
        return self._call("GET", f"/admin/agents/{_seg(agent_id)}/versions", list[AgentVersion])

    def assign_collections(self, agent_id: Id, changes: AssignmentChanges) -> AssignmentReport:
        """Add and remove the agent's collections; each has its own result (``ok``, or a ``code``)."""
        return self._call("PUT", f"/admin/agents/{_seg(agent_id)}/collections", AssignmentReport, json=changes)

    def explain_access(self, agent_id: Id, who: AccessQuery) -> AccessExplanation:
        """What a user with these groups (or this token) would see of the agent, and why."""
        return self._call("POST", f"/admin/agents/{_seg(agent_id)}/access", AccessExplanation, json=who)

    def llms(self) -> LlmCatalog:
        """The LLM providers and models agents may use."""
        return self._call("GET", "/admin/llms", LlmCatalog)


class ChonkitClient(Service):
    """Chonkit, the admin API (an admin's token): documents, collections, embedding jobs, sources and search."""

    # documents

    def upload(self, files: Sequence[tuple[str, bytes]]) -> UploadResponse:
        """(file name, bytes) pairs. Each file has its own result (``created``, ``duplicate`` or ``rejected``);
        when every file is rejected the call raises, its ``body["results"]`` holding each file's reason."""
        sent = [("files", file) for file in files]
        response = self._request("POST", "/documents", files=sent)
        return decode(response.content, UploadResponse, response.status_code)

    def documents(
        self, *, limit: int | None = None, offset: int | None = None, sort: str | None = None, q: str | None = None
    ) -> DocumentPage:
        """A page of documents; ``sort`` a field, ``-`` first for descending (``-created_at``), ``q`` a name filter."""
        params = _query(limit=limit, offset=offset, sort=sort, q=q)
        return self._call("GET", "/documents", DocumentPage, params=params)

    def document(self, document_id: Id) -> Document:
        return self._call("GET", f"/documents/{_seg(document_id)}", Document)

    def update_document(self, document_id: Id, changes: DocumentPatch) -> Document:
        """Rename it, or set its label and tags (which its chunks carry for filters)."""
        return self._call("PATCH", f"/documents/{_seg(document_id)}", Document, json=changes)

    def delete_document(self, document_id: Id) -> None:
        self._request("DELETE", f"/documents/{_seg(document_id)}")

    def download(self, document_id: Id) -> bytes:
        """The document's bytes as uploaded."""
        response = self._request("GET", f"/documents/{_seg(document_id)}/content")
        return response.content

    def document_config(self, document_id: Id) -> DocumentConfig:
        return self._call("GET", f"/documents/{_seg(document_id)}/config", DocumentConfig)

    def set_document_config(self, document_id: Id, config: DocumentConfig) -> DocumentConfig:
        """How the document is parsed and chunked from its next embedding on."""
        return self._call("PUT", f"/documents/{_seg(document_id)}/config", DocumentConfig, json=config)

    def preview_parse(self, document_id: Id, request: ParsePreviewRequest | None = None) -> ParsePreview:
        body = request or ParsePreviewRequest()
        return self._call("POST", f"/documents/{_seg(document_id)}/preview/parse", ParsePreview, json=body)

    def preview_chunks(self, document_id: Id, request: ChunkPreviewRequest | None = None) -> ChunkPreview:
        body = request or ChunkPreviewRequest()
        return self._call("POST", f"/documents/{_seg(document_id)}/preview/chunks", ChunkPreview, json=body)

    # collections

    def collections(self) -> list[Collection]:
        return self._call("GET", "/collections", list[Collection])

    def collection(self, collection_id: Id) -> CollectionDetail:
        return self._call("GET", f"/collections/{_seg(collection_id)}", CollectionDetail)

    def create_collection(
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
        return self._call("POST", "/collections", Collection, json=body)

    def delete_collection(self, collection_id: Id) -> None:
        self._request("DELETE", f"/collections/{_seg(collection_id)}")

    def set_groups(self, collection_id: Id, groups: Sequence[str]) -> Collection:
        """Replace who may read the collection (empty: everyone); applies to the chunks before it returns."""
        body = GroupsUpdate(groups=list(groups))
        return self._call("PUT", f"/collections/{_seg(collection_id)}/groups", Collection, json=body)

    def collection_documents(self, collection_id: Id) -> list[CollectionDocument]:
        return self._call("GET", f"/collections/{_seg(collection_id)}/documents", list[CollectionDocument])

    def add_documents(self, collection_id: Id, document_ids: Sequence[Id]) -> JobCreated:
        """Queue the documents' embedding; follow the job with :meth:`follow_job` or :meth:`wait_for_job`."""
        body = DocumentIds(document_ids=_listed(document_ids, _uuid))
        return self._call("POST", f"/collections/{_seg(collection_id)}/documents", JobCreated, json=body)

    def remove_documents(self, collection_id: Id, document_ids: Sequence[Id]) -> JobCreated:
        """Queue the removal of the documents' chunks from the collection."""
        body = DocumentIds(document_ids=_listed(document_ids, _uuid))
        return self._call("POST", f"/collections/{_seg(collection_id)}/documents/remove", JobCreated, json=body)

    def embedding_model(self, collection_id: Id) -> CollectionModel:
        return self._call("GET", f"/collections/{_seg(collection_id)}/embedding", CollectionModel)

    def change_embedding(self, collection_id: Id, change: EmbeddingChange) -> MigrationStatus:
        """Re-embed the collection with another model, in the background; questions switch when it is complete."""
        return self._call("PUT", f"/collections/{_seg(collection_id)}/embedding", MigrationStatus, json=change)

    def reports(self, collection_id: Id) -> list[EmbeddingReport]:
        return self._call("GET", f"/collections/{_seg(collection_id)}/reports", list[EmbeddingReport])

    def search(
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
        return self._call("POST", f"/collections/{_seg(collection_id)}/search", SearchResponse, json=body)

    def providers(self) -> Providers:
        """The embedding and vector providers this deployment offers."""
        return self._call("GET", "/providers", Providers)

    # jobs

    def jobs(self, *, collection_id: Id | None = None, limit: int | None = None) -> list[Job]:
        """The latest jobs, of one collection or all."""
        return self._call("GET", "/jobs", list[Job], params=_query(collection_id=collection_id, limit=limit))

    def job(
        self, job_id: Id, *, limit: int | None = None, offset: int | None = None, stage: Stage | None = None
    ) -> Job:
        """The job with a page of its items (``stage``: only items in that stage)."""
        params = _query(limit=limit, offset=offset, stage=stage)
        return self._call("GET", f"/jobs/{_seg(job_id)}", Job, params=params)

    def cancel_job(self, job_id: Id) -> Job:
        return self._call("POST", f"/jobs/{_seg(job_id)}/cancel", Job)

    def retry_job(self, job_id: Id) -> Job:
        return self._call("POST", f"/jobs/{_seg(job_id)}/retry", Job)

    def follow_job(self, job_id: Id) -> Generator[Job, None, None]:
        """The job's events as they happen: first its counts, then each change (``items``: the items that
        changed), ending when the job finishes."""
        with contextlib.closing(self._events("GET", f"/jobs/{_seg(job_id)}/events")) as events:
            for name, data in events:
                if name == "job":
                    yield decode(data, Job, 200)

    def wait_for_job(self, job_id: Id) -> Job:
        """Follow the job until it finishes, then the whole job (its status may be ``failed``: check it)."""
        with contextlib.closing(self.follow_job(job_id)) as updates:  # closes the stream at once
            for update in updates:
                if update.finished:
                    break
        return self.job(job_id)

    # sources

    def sources(self, collection_id: Id) -> list[Source]:
        return self._call("GET", f"/collections/{_seg(collection_id)}/sources", list[Source])

    def source(self, collection_id: Id, source_id: Id) -> Source:
        return self._call("GET", f"/collections/{_seg(collection_id)}/sources/{_seg(source_id)}", Source)

    def create_source(self, collection_id: Id, source: SourceCreate) -> Source:
        """A folder on the server or a web site the collection follows."""
        return self._call("POST", f"/collections/{_seg(collection_id)}/sources", Source, json=source)

    def update_source(self, collection_id: Id, source_id: Id, changes: SourceUpdate) -> Source:
        path = f"/collections/{_seg(collection_id)}/sources/{_seg(source_id)}"
        return self._call("PATCH", path, Source, json=changes)

    def delete_source(self, collection_id: Id, source_id: Id) -> None:
        self._request("DELETE", f"/collections/{_seg(collection_id)}/sources/{_seg(source_id)}")

    def sync_source(self, collection_id: Id, source_id: Id) -> Run:
        """Start a sync now: the run embeds what is new or changed and removes what is gone."""
        return self._call("POST", f"/collections/{_seg(collection_id)}/sources/{_seg(source_id)}/sync", Run)

    def runs(self, collection_id: Id, source_id: Id, *, limit: int | None = None) -> list[Run]:
        path = f"/collections/{_seg(collection_id)}/sources/{_seg(source_id)}/runs"
        return self._call("GET", path, list[Run], params=_query(limit=limit))

    def run(self, collection_id: Id, source_id: Id, run_id: Id) -> Run:
        return self._call(
            "GET", f"/collections/{_seg(collection_id)}/sources/{_seg(source_id)}/runs/{_seg(run_id)}", Run
        )

    def cancel_run(self, collection_id: Id, source_id: Id, run_id: Id) -> Run:
        path = f"/collections/{_seg(collection_id)}/sources/{_seg(source_id)}/runs/{_seg(run_id)}/cancel"
        return self._call("POST", path, Run)

    def retry_run(self, collection_id: Id, source_id: Id, run_id: Id) -> Run:
        path = f"/collections/{_seg(collection_id)}/sources/{_seg(source_id)}/runs/{_seg(run_id)}/retry"
        return self._call("POST", path, Run)

    def follow_run(self, collection_id: Id, source_id: Id, run_id: Id) -> Generator[Run, None, None]:
        """The run now, then whenever its status, report or job progress changes, ending when it finishes."""
        path = f"/collections/{_seg(collection_id)}/sources/{_seg(source_id)}/runs/{_seg(run_id)}/events"
        with contextlib.closing(self._events("GET", path)) as events:
            for name, data in events:
                if name == "run":
                    yield decode(data, Run, 200)
