"""The client's LangChain and LlamaIndex retrievers against a real ``ragu serve``: sync and async, each returns the
passages the client's ``retrieve`` returns for the same user (same order, same text, same citation), a user outside
a restricted collection's group gets none of its passages, and failures are the client's ``RaguError``\\ s with the
service's code. Importing ``ragu_client`` imports neither framework.

The world is test_live_client's (collections ``hr``, ``legal`` and ``ops``, each restricted to its group, and an agent
over the three, searched ``hybrid``), plus an agent over the same collections searched ``dense``, whose passages
rank by their cosine similarity alone.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
from langchain_core.documents import Document
from llama_index.core.schema import NodeWithScore
from pydantic import ValidationError

from common.auth import mint_dev_token
from common.config import load_settings
from ragu_client import (
    AsyncKappiClient,
    AuthenticationError,
    BadRequestError,
    KappiClient,
    NotFoundError,
    RaguError,
)
from ragu_client.langchain import KappiLangChainRetriever
from ragu_client.llama_index import KappiLlamaIndexRetriever
from ragu_client.models import AgentCreate, AssignmentChanges, AssignmentSpec, Citation
from tests.hardening.live_stack import REPO, served
from tests.ragu_client.test_live_client import QUESTION, SECRET, Live, _docs_example, _world

USERS = {"alice": ("hr",), "bob": ("legal",), "nobody": ()}
"""``nobody``'s token has no groups at all."""
TOP_K = 20
KEYS = {
    "collection",
    "vector_provider",
    "document_id",
    "document_name",
    "page_start",
    "page_end",
    "rank",
    "score",
    "kappi_score",
    "rerank_score",
    "document_hits",
    "ocr",
    "chunk_index",
}


@dataclass
class World:
    live: Live
    agents: dict[str, str]
    """The agent searching its collections in each mode: ``hybrid`` (test_live_client's, the default) and ``dense``."""

    def url(self) -> str:
        return f"{self.live.server.base_url}/kappi"

    def token(self, user: str) -> str:
        return self.live.token(user, *USERS[user])


@pytest.fixture(scope="module")
async def world() -> AsyncIterator[World]:
    async with served("ragu-live-frameworks-", SECRET, RAGU_WORKER_HEARTBEAT_SECONDS="0.3") as running:
        live = await _world(running.server, running.settings)
        async with AsyncKappiClient(f"{live.server.base_url}/kappi", live.token("admin", admin=True)) as admin:
            dense = await admin.create_agent(AgentCreate(name="Dense helper"))
            specs = [
                AssignmentSpec(vector_provider="pgvector", name=c.name, mode="dense") for c in live.collections.values()
            ]
            report = await admin.assign_collections(dense.id, AssignmentChanges(add=specs))
            assert all(r.ok for r in report.results), report
        yield World(live=live, agents={"hybrid": live.agent_id, "dense": str(dense.id)})


def _cited(citation: Citation) -> tuple[object, ...]:
    return (
        citation.text,
        citation.collection,
        citation.vector_provider,
        citation.document_id,
        citation.document_name,
        citation.page_start,
        citation.page_end,
        citation.citation,
    )


def _from_metadata(text: str, metadata: dict[str, Any]) -> tuple[object, ...]:
    keys = ("collection", "vector_provider", "document_id", "document_name", "page_start", "page_end", "rank")
    return (text, *(metadata[key] for key in keys))


def _langchain(documents: list[Document]) -> list[tuple[object, ...]]:
    assert all(set(d.metadata) == KEYS for d in documents)
    return [_from_metadata(d.page_content, d.metadata) for d in documents]


def _llama_index(nodes: list[NodeWithScore]) -> list[tuple[object, ...]]:
    assert all(set(n.node.metadata) == KEYS for n in nodes)
    assert all(n.score == n.node.metadata["score"] for n in nodes)
    assert all(n.node.ref_doc_id == n.node.metadata["document_id"] for n in nodes)
    return [_from_metadata(n.node.get_content(), n.node.metadata) for n in nodes]


async def _through_every_retriever(world: World, user: str, agent_id: str) -> dict[str, list[Any]]:
    """What the client's ``retrieve`` and each retriever, sync (in a thread) and async, find for the question."""
    url, token = world.url(), world.token(user)
    with KappiClient(url, token) as sync:
        async with AsyncKappiClient(url, token) as client:
            chain = KappiLangChainRetriever(agent_id=agent_id, client=sync, async_client=client, top_k=TOP_K)
            index = KappiLlamaIndexRetriever(agent_id, sync, client, top_k=TOP_K)
            return {
                "retrieve": (await client.retrieve(agent_id, QUESTION, top_k=TOP_K)).citations,
                "langchain": await asyncio.to_thread(chain.invoke, QUESTION),
                "langchain async": await chain.ainvoke(QUESTION),
                "llama_index": await asyncio.to_thread(index.retrieve, QUESTION),
                "llama_index async": await index.aretrieve(QUESTION),
            }


@pytest.mark.parametrize("mode", ["hybrid", "dense"])
@pytest.mark.parametrize("user", USERS)
async def test_both_retrievers_sync_and_async_return_what_retrieve_returns(world: World, user: str, mode: str) -> None:
    found = await _through_every_retriever(world, user, world.agents[mode])
    expected = [_cited(c) for c in found["retrieve"]]

    assert _langchain(found["langchain"]) == expected
    assert _langchain(found["langchain async"]) == expected
    assert _llama_index(found["llama_index"]) == expected
    assert _llama_index(found["llama_index async"]) == expected
    if user != "nobody":
        assert expected, f"{user} finds passages through the {mode} agent"


@pytest.mark.parametrize("user", USERS)
async def test_a_user_outside_a_restricted_collections_group_gets_none_of_its_passages(world: World, user: str) -> None:
    readable = {world.live.collections[group].name for group in USERS[user]}
    for agent_id in world.agents.values():
        found = await _through_every_retriever(world, user, agent_id)
        seen = {
            "langchain": {d.metadata["collection"] for d in found["langchain"] + found["langchain async"]},
            "llama_index": {n.node.metadata["collection"] for n in found["llama_index"] + found["llama_index async"]},
        }
        assert seen == {"langchain": readable, "llama_index": readable}
        texts = [d.page_content for d in found["langchain"]] + [n.node.get_content() for n in found["llama_index"]]
        assert any("25 vacation days" in t for t in texts) == (user == "alice")  # hr's document
        assert any("NDAs" in t for t in texts) == (user == "bob")  # legal's


async def test_the_score_is_the_cosine_similarity_in_every_mode(world: World) -> None:
    """Every passage carries its cosine similarity (``1 - distance``) as ``score``: a dense passage's equals kappi's
    own score, a hybrid one's is not the fused rank score kappi ranks it by; ``kappi_score`` and ``rank`` keep what
    kappi said. Before, hybrid passages carried ``None``."""
    dense = await _through_every_retriever(world, "alice", world.agents["dense"])
    hybrid = await _through_every_retriever(world, "alice", world.agents["hybrid"])

    for found, similar in ((dense, True), (hybrid, False)):
        citations = found["retrieve"]
        assert citations
        assert [c.legs is None for c in citations] == [similar] * len(citations)
        assert all(c.distance is not None for c in citations)
        expected_scores = [round(1.0 - c.distance, 6) for c in citations if c.distance is not None]
        if similar:
            assert expected_scores == pytest.approx([c.score for c in citations], abs=1e-5)
        for documents in (found["langchain"], found["langchain async"]):
            assert [d.metadata["score"] for d in documents] == expected_scores
            assert [d.metadata["kappi_score"] for d in documents] == [c.score for c in citations]
            assert [d.metadata["rank"] for d in documents] == list(range(1, len(citations) + 1))
        for nodes in (found["llama_index"], found["llama_index async"]):
            assert [n.score for n in nodes] == expected_scores
    best = dense["langchain"][0]
    assert "25 vacation days" in best.page_content
    assert 0.3 < best.metadata["score"] <= 1.0
    assert hybrid["langchain"][0].metadata["kappi_score"] < 0.05  # the fused rank score no caller can read
    assert 0.3 < hybrid["langchain"][0].metadata["score"] <= 1.0


ERRORS = {
    "an unknown agent": (NotFoundError, 404, "agent_not_found"),
    "top_k over 200": (BadRequestError, 400, "invalid_request"),
    "a forged token": (AuthenticationError, 401, "invalid_signature"),
}


@pytest.mark.parametrize("case", ERRORS)
async def test_errors_raise_the_clients_exception_with_the_servers_code(world: World, case: str) -> None:
    error, status, code = ERRORS[case]
    forged = mint_dev_token(load_settings({}, auth_hs256_secret="another-secret-0123456789abcdef-xyz"), subject="eve")
    token = forged if case == "a forged token" else world.token("alice")
    agent_id = str(uuid.uuid4()) if case == "an unknown agent" else world.agents["hybrid"]
    top_k = 201 if case == "top_k over 200" else None
    url = world.url()
    with KappiClient(url, token, retries=0) as sync:
        async with AsyncKappiClient(url, token, retries=0) as client:
            chain = KappiLangChainRetriever(agent_id=agent_id, client=sync, async_client=client, top_k=top_k)
            index = KappiLlamaIndexRetriever(agent_id, sync, client, top_k=top_k)
            calls = {
                "langchain": lambda: asyncio.to_thread(chain.invoke, QUESTION),
                "langchain async": lambda: chain.ainvoke(QUESTION),
                "llama_index": lambda: asyncio.to_thread(index.retrieve, QUESTION),
                "llama_index async": lambda: index.aretrieve(QUESTION),
            }
            for name, call in calls.items():
                with pytest.raises(RaguError) as raised:
                    await call()
                assert type(raised.value) is error, name
                assert (raised.value.status, raised.value.code) == (status, code), name


async def test_one_client_serves_both_ways_when_it_is_sync_and_one_way_when_it_is_async(world: World) -> None:
    """A sync client alone serves the async call too (in a thread); an async client alone refuses the sync call,
    saying how to make it; no client at all is refused when the retriever is made."""
    agent_id, url, token = world.agents["hybrid"], world.url(), world.token("alice")
    with KappiClient(url, token) as sync:
        expected = [_cited(c) for c in (await asyncio.to_thread(sync.retrieve, agent_id, QUESTION)).citations]
        chain = KappiLangChainRetriever(agent_id=agent_id, client=sync)
        index = KappiLlamaIndexRetriever(agent_id, client=sync)
        assert _langchain(await chain.ainvoke(QUESTION)) == expected
        assert _llama_index(await index.aretrieve(QUESTION)) == expected
    async with AsyncKappiClient(url, token) as client:
        with pytest.raises(RuntimeError, match="use ainvoke"):
            KappiLangChainRetriever(agent_id=agent_id, async_client=client).invoke(QUESTION)
        with pytest.raises(RuntimeError, match="use aretrieve"):
            KappiLlamaIndexRetriever(agent_id, async_client=client).retrieve(QUESTION)
    with pytest.raises(ValidationError, match="give client="):
        KappiLangChainRetriever(agent_id=agent_id)
    with pytest.raises(ValueError, match="give client="):
        KappiLlamaIndexRetriever(agent_id)


def _python(script: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # noqa: S603 -- our own interpreter
        [sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, check=False, timeout=120
    )


def test_importing_ragu_client_imports_neither_framework() -> None:
    script = (
        "import sys, ragu_client, ragu_client.models, ragu_client.retriever\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in {'langchain_core', 'llama_index', 'pydantic'}))"
    )
    done = _python(script)

    assert (done.returncode, done.stdout.strip(), done.stderr) == (0, "[]", "")


@pytest.mark.parametrize(
    ("module", "framework", "extra"),
    [("langchain", "langchain_core", "langchain"), ("llama_index", "llama_index", "llama-index")],
)
def test_a_framework_module_without_its_framework_names_the_extra_to_install(
    module: str, framework: str, extra: str
) -> None:
    done = _python(f"import sys; sys.modules[{framework!r}] = None; import ragu_client.{module}")

    assert done.returncode == 1
    assert f"pip install 'ragu-client[{extra}]'" in done.stderr


async def test_the_docs_langchain_example_runs_as_written(world: World) -> None:
    langchain_passages = _docs_example("langchain_passages")["langchain_passages"]
    passages = await asyncio.to_thread(
        langchain_passages, world.url(), world.token("alice"), world.agents["hybrid"], QUESTION
    )
    assert passages
    assert "25 vacation days" in passages[0][0]
    assert passages[0][1] == "hr.txt"
    assert 0.3 < passages[0][2] <= 1.0  # a hybrid agent's passage: its cosine similarity, not the fused score


async def test_the_docs_llama_index_example_runs_as_written(world: World) -> None:
    llama_index_passages = _docs_example("llama_index_passages")["llama_index_passages"]
    passages = await llama_index_passages(world.url(), world.token("alice"), world.agents["dense"], QUESTION)
    assert passages
    text, name, score = passages[0]
    assert "25 vacation days" in text
    assert name == "hr.txt"
    assert 0.3 < score <= 1.0
