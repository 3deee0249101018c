"""``ragu_client`` against a running ``ragu serve``: the admin calls build the world (upload, collections, embed
and follow the job, search, make an agent and assign its collections), then users with different groups retrieve,
ask (streamed too, with the async and the sync client) and fail through the client.

One embedded PostgreSQL and one server serve the module; the default ``extractive`` LLM answers.
"""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest

from common.auth import mint_dev_token
from common.config import Settings, load_settings
from ragu_client import (
    AsyncChonkitClient,
    AsyncKappiClient,
    AuthenticationError,
    BadRequestError,
    ChonkitClient,
    Document,
    KappiClient,
    KappiRetriever,
    NotFoundError,
    RagInputFilter,
    RaguError,
)
from ragu_client.models import (
    Agent,
    AgentCreate,
    AnswerToken,
    AssignmentChanges,
    AssignmentSpec,
    Collection,
    Done,
    Job,
    SearchResponse,
    Sources,
    UploadResponse,
)
from tests.hardening.live_stack import REPO, RaguServer, eventually, served

SECRET = "live-client-hs256-secret-0123456789abcdef"
QUESTION = "How many vacation days do employees get?"
TRIALS = 10
TEXTS = {
    "hr": b"Vacation: employees get 25 vacation days per year. Sick leave needs a note after three days.",
    "legal": b"Contracts: vacation days are not part of contracts. NDAs last two years.",
    "ops": b"Vacation requests for the night shift go to the duty manager.",
}


@dataclass
class Live:
    server: RaguServer
    settings: Settings
    collections: dict[str, Collection]
    uploaded: UploadResponse
    jobs: list[Job]
    search: SearchResponse
    agent: Agent
    agent_id: str

    def token(self, subject: str, *groups: str, admin: bool = False) -> str:
        roles = [self.settings.auth.admin_role] if admin else []
        return mint_dev_token(self.settings, subject=subject, groups=groups, roles=roles)

    def kappi(self, subject: str, *groups: str) -> AsyncKappiClient:
        return AsyncKappiClient(f"{self.server.base_url}/kappi", self.token(subject, *groups))


@pytest.fixture(scope="module")
async def live() -> AsyncIterator[Live]:
    async with served("ragu-live-client-", SECRET, RAGU_WORKER_HEARTBEAT_SECONDS="0.3") as running:
        yield await _world(running.server, running.settings)


async def _world(server: RaguServer, settings: Settings) -> Live:
    """Three collections (``hr``, ``legal``, ``ops``), each with one document, and one agent over all three, all
    built through the client's admin calls."""
    token = mint_dev_token(settings, subject="admin", roles=[settings.auth.admin_role])
    suffix = uuid.uuid4().hex[:6]
    async with AsyncChonkitClient(f"{server.base_url}/chonkit", token) as chonkit:
        uploaded = await chonkit.upload([(f"{key}.txt", text) for key, text in TEXTS.items()])
        documents = {r.filename.removesuffix(".txt"): r.document for r in uploaded.results}
        collections, jobs = {}, []
        for key, document in documents.items():
            assert document is not None
            collection = await chonkit.create_collection(f"{key.capitalize()}_{suffix}", groups=[key])
            queued = await chonkit.add_documents(collection.id, [document.id])
            assert queued.job is not None
            jobs.append(await chonkit.wait_for_job(queued.job.id))
            collections[key] = collection
        search = await chonkit.search(collections["hr"].id, QUESTION, limit=3)
    async with AsyncKappiClient(f"{server.base_url}/kappi", token) as admin:
        agent = await admin.create_agent(AgentCreate(name="Helper"))
        specs = [
            AssignmentSpec(vector_provider="pgvector", name=c.name, instruction="policies")
            for c in collections.values()
        ]
        report = await admin.assign_collections(agent.id, AssignmentChanges(add=specs))
        assert all(r.ok for r in report.results), report
        agent = await admin.admin_agent(agent.id)
    return Live(
        server=server,
        settings=settings,
        collections=collections,
        uploaded=uploaded,
        jobs=jobs,
        search=search,
        agent=agent,
        agent_id=str(agent.id),
    )


async def test_the_admin_calls_upload_create_embed_follow_and_search(live: Live) -> None:
    assert [r.status for r in live.uploaded.results] == ["created"] * 3
    assert [(j.status, j.progress.get("done"), j.total) for j in live.jobs] == [("done", 1, 1)] * 3
    assert all(j.items[0].chunks for j in live.jobs)
    assert live.search.hits
    assert "25 vacation days" in live.search.hits[0].content
    assert live.agent.name == "Helper"
    assert {a.name for a in live.agent.collections} == {c.name for c in live.collections.values()}
    async with AsyncChonkitClient(f"{live.server.base_url}/chonkit", live.token("admin", admin=True)) as chonkit:
        again = await chonkit.upload([("hr.txt", TEXTS["hr"])])
        assert [r.status for r in again.results] == ["duplicate"]
        listed = {c.name: c for c in await chonkit.collections()}
        assert {c.name for c in live.collections.values()} <= set(listed)
        assert listed[live.collections["hr"].name].document_count == 1


async def test_two_users_with_different_groups_retrieve_only_their_collections_passages(live: Live) -> None:
    async with live.kappi("alice", "hr") as alice, live.kappi("bob", "legal") as bob:
        found = {
            who: await KappiRetriever(live.agent_id, client).retrieve(QUESTION, top_k=5)
            for who, client in (("alice", alice), ("bob", bob))
        }
    assert {d.metadata["collection"] for d in found["alice"]} == {live.collections["hr"].name}
    assert {d.metadata["collection"] for d in found["bob"]} == {live.collections["legal"].name}
    passage = found["alice"][0]
    assert "25 vacation days" in passage.content
    assert passage.score is not None
    assert passage.score == passage.metadata["score"]
    assert passage.metadata["document_name"] == "hr.txt"
    hr_document = next(r.document for r in live.uploaded.results if r.filename == "hr.txt")
    assert hr_document is not None
    assert passage.metadata["document_id"] == str(hr_document.id)
    assert set(passage.metadata) >= {"collection", "document_id", "document_name", "page_start", "page_end", "score"}
    assert not any("NDAs" in d.content for d in found["alice"])


async def test_a_revoked_group_is_excluded_on_the_very_next_retrieve(live: Live) -> None:
    """A grant may take kappi's identity cache (0.5 s) to arrive, so it is awaited; a revocation must not: the
    chunks' own groups change before chonkit's ``PUT`` returns. Checked ``TRIALS`` times, so a race shows."""
    ops = live.collections["ops"]
    shown_after_revoke = []
    async with (
        live.kappi("carol", "ops") as carol,
        AsyncChonkitClient(f"{live.server.base_url}/chonkit", live.token("admin", admin=True)) as chonkit,
    ):
        retriever = KappiRetriever(live.agent_id, carol)

        async def sees_ops() -> bool | None:
            return (
                True if any(d.metadata["collection"] == ops.name for d in await retriever.retrieve(QUESTION)) else None
            )

        for _ in range(TRIALS):
            await chonkit.set_groups(ops.id, ["ops"])
            await eventually(sees_ops, within=5, what="ops's passages after the grant")
            await chonkit.set_groups(ops.id, ["night"])
            after = await retriever.retrieve(QUESTION)
            if any(d.metadata["collection"] == ops.name for d in after):
                shown_after_revoke.append(after)
    assert shown_after_revoke == [], f"{len(shown_after_revoke)} of {TRIALS} retrieves right after the revoke saw it"


async def test_errors_raise_the_clients_exception_with_the_servers_code(live: Live) -> None:
    async with live.kappi("alice", "hr") as alice:
        with pytest.raises(RaguError) as unknown:
            await KappiRetriever(str(uuid.uuid4()), alice).retrieve(QUESTION)
        with pytest.raises(RaguError) as too_many:
            await alice.retrieve(live.agent_id, QUESTION, top_k=201)
        with pytest.raises(BadRequestError) as named:
            await alice.create_chat("Helper")  # a name where an id belongs: the service's code, not a ValueError
    assert named.value.code == "invalid_id"
    assert (unknown.value.status, unknown.value.code) == (404, "agent_not_found")
    assert isinstance(unknown.value, NotFoundError)
    assert (too_many.value.status, too_many.value.code) == (400, "invalid_request")
    assert isinstance(too_many.value, BadRequestError)
    forged = mint_dev_token(load_settings({}, auth_hs256_secret="another-secret-0123456789abcdef-xyz"), subject="eve")
    async with AsyncKappiClient(f"{live.server.base_url}/kappi", forged) as eve:
        with pytest.raises(AuthenticationError) as refused:
            await eve.agents()
    assert (refused.value.status, refused.value.code) == (401, "invalid_signature")
    assert refused.value.detail


async def test_a_token_callable_is_asked_before_every_request(live: Live) -> None:
    asked: list[str] = []

    async def fresh() -> str:
        asked.append("token")
        return live.token("alice", "hr")

    async with AsyncKappiClient(f"{live.server.base_url}/kappi", fresh) as alice:
        assert [a.id.hex for a in await alice.agents()] == [uuid.UUID(live.agent_id).hex]
        await alice.agent(live.agent_id)
    assert len(asked) == 2


async def test_ask_streamed_parses_the_sse_into_typed_events(live: Live) -> None:
    async with live.kappi("alice", "hr") as alice:
        chat = await alice.create_chat(live.agent_id)
        events = [e async for e in alice.ask_streamed(chat.id, QUESTION)]
        detail = await alice.chat(chat.id)
    assert isinstance(events[0], Sources)
    assert {c.collection for c in events[0].citations} == {live.collections["hr"].name}
    assert isinstance(events[-1], Done)
    tokens = [e.text for e in events if isinstance(e, AnswerToken)]
    assert len(tokens) == len(events) - 2
    answer = detail.messages[-1]
    assert (answer.id, answer.content, answer.status) == (events[-1].message_id, "".join(tokens), "complete")
    assert events[-1].sources_used == len(events[0].citations)


async def test_the_sync_clients_stream_an_answer_and_follow_a_job_as_iterators(live: Live) -> None:
    """The same calls without ``await``: the answer's events and the job's updates are plain iterators (run in a
    thread, so the test's event loop stays free)."""

    def ask() -> tuple[list[object], str]:
        with KappiClient(f"{live.server.base_url}/kappi", live.token("alice", "hr")) as alice:
            chat = alice.create_chat(live.agent_id)
            events = list(alice.ask_streamed(chat.id, QUESTION))
            return events, alice.chat(chat.id).messages[-1].content

    def embed_again() -> list[Job]:
        with ChonkitClient(f"{live.server.base_url}/chonkit", live.token("admin", admin=True)) as chonkit:
            ops = live.collections["ops"]
            document = next(d for d in chonkit.collection(ops.id).documents)
            removed = chonkit.remove_documents(ops.id, [document.document_id])
            assert removed.job is not None
            updates = list(chonkit.follow_job(removed.job.id))
            queued = chonkit.add_documents(ops.id, [document.document_id])
            assert queued.job is not None
            return [*updates, chonkit.wait_for_job(queued.job.id)]

    events, stored = await asyncio.to_thread(ask)
    assert isinstance(events[0], Sources)
    assert {c.collection for c in events[0].citations} == {live.collections["hr"].name}
    assert isinstance(events[-1], Done)
    assert "".join(e.text for e in events if isinstance(e, AnswerToken)) == stored
    jobs = await asyncio.to_thread(embed_again)
    assert jobs[-2].finished
    assert jobs[-2].kind == "remove"
    assert (jobs[-1].status, jobs[-1].progress.get("done")) == ("done", 1)


async def test_a_stateless_query_and_a_chat_answer_through_the_client(live: Live) -> None:
    async with live.kappi("bob", "legal") as bob:
        answered = await bob.query(live.agent_id, QUESTION)
        chat = await bob.create_chat(live.agent_id, title="Contracts")
        asked = await bob.ask(chat.id, QUESTION)
        mine = await bob.chats()
        await bob.delete_chat(chat.id)
        with pytest.raises(RaguError) as gone:
            await bob.chat(chat.id)
    assert {c.collection for c in answered.citations} == {live.collections["legal"].name}
    assert "[1]" in answered.answer
    assert asked.answer.status == "complete"
    assert asked.answer.citations
    assert [c.title for c in mine] == ["Contracts"]
    assert (gone.value.status, gone.value.code) == (404, "chat_not_found")


async def test_the_input_filter_puts_the_users_passages_before_the_system_prompt(live: Live) -> None:
    async with live.kappi("alice", "hr") as alice:
        rag = RagInputFilter(KappiRetriever(live.agent_id, alice), top_k=3)
        messages: list[dict[str, Any]] = [
            {"role": "user", "content": "Hello"},
            {"role": "assistant", "content": "Hi"},
            {"role": "user", "content": QUESTION},
        ]
        kept, system = await rag.filter(messages, "Answer briefly.")
        passages: list[Document] = await rag.retriever.retrieve(QUESTION, top_k=3)
    assert kept is messages
    assert system == "<context>\n" + "\n\n".join(d.content for d in passages) + "\n</context>\nAnswer briefly."
    assert "25 vacation days" in system
    assert "NDAs" not in system


def _docs_example(defines: str) -> dict[str, Any]:
    """The namespace of docs/clients.md's python block that defines ``defines``."""
    page = (REPO / "docs" / "clients.md").read_text()
    blocks = [b for b in re.findall(r"```python\n(.*?)```", page, re.DOTALL) if f"def {defines}(" in b]
    assert len(blocks) == 1, f"docs/clients.md has one python block defining {defines}"
    namespace: dict[str, Any] = {}
    exec(compile(blocks[0], "docs/clients.md", "exec"), namespace)  # noqa: S102 -- our own docs
    return namespace


async def test_the_docs_example_runs_as_written(live: Live) -> None:
    grounded = _docs_example("grounded")["grounded"]
    kappi_url, token = f"{live.server.base_url}/kappi", live.token("alice", "hr")
    system = await grounded(kappi_url, token, live.agent_id, "How many vacation days do we get?")
    assert system.startswith("<context>\nVacation: employees get 25 vacation days per year.")
    assert system.endswith("\n</context>\nAnswer from the context only.")


async def test_the_docs_sync_example_builds_an_agent_and_streams_its_answer(live: Live) -> None:
    handbook_agent = _docs_example("handbook_agent")["handbook_agent"]
    files = [("handbook.txt", b"Vacation: every employee of the handbook gets 30 vacation days per year.")]
    answer = await asyncio.to_thread(
        handbook_agent, live.server.base_url, live.token("admin", admin=True), live.token("dana", "hr"), files
    )
    assert "30 vacation days" in answer
