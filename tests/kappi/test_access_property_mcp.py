"""The access property through kappi's MCP tools: ``search`` and ``ask`` never return a chunk of a collection
outside the caller's groups, with each check switched off in turn.

The scenarios, stores and checks are ``tests/kappi/test_access_property.py``'s (its ``World`` in each of its stores:
Qdrant in local mode, pgvector in SQL, pgvector in this process's memory); here the question goes through the MCP server
(:func:`kappi.mcp_server.tools.build_server`) over the SDK's in-process client, as a tool call with JSON arguments,
to the chat service it calls, built on a retriever with a check disabled. The caller is given to the server
directly, as the HTTP endpoint gives it after checking the token (``tests/kappi/test_mcp_live.py`` covers that).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema.protocols import Validator
from mcp import Client, ClientSession

from common.auth import Principal
from common.vectors.base import RETRIEVAL_MODES, RetrievalMode
from kappi.access.identities import IdentityReader
from kappi.agent.cache import AgentCache
from kappi.agent.models import Agent
from kappi.chat.service import ChatService
from kappi.llm.registry import default_llm_registry
from kappi.mcp_server.tools import build_server
from kappi.retrieval.service import QueryVectors, Retriever
from tests.kappi.test_access_property import (
    CHECKS,
    CHUNKS_PER_COLLECTION,
    COLLECTIONS,
    QUESTION,
    World,
    _assignments,
    _kept_by,
    _NoDatabase,
    extractive_agent,
    scenarios,
    world,
)

__all__ = ["world"]


@pytest.fixture(autouse=True, scope="module")
def output_validators_shared_by_sessions() -> Iterator[None]:
    """The SDK's client checks and compiles each tool's output schema once per session (42 ms for ``search`` and
    ``ask`` together here), and this module opens a session per example; so its sessions share the compiled
    validators, as one long-lived client's calls would. Every result is still validated against its tool's schema.
    """
    compiled: dict[str, Validator] = {}
    own = ClientSession._output_schema_validator

    def shared(session: ClientSession, name: str, output_schema: dict[str, Any]) -> Validator:
        key = msgspec.json.encode(output_schema, order="sorted").decode()
        if key not in compiled:
            compiled[key] = own(session, name, output_schema)
        return compiled[key]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ClientSession, "_output_schema_validator", shared)
        yield


EVERY_CHUNK = CHUNKS_PER_COLLECTION * len(COLLECTIONS)
"""A ``search`` asking for this many passages searches each collection that deep: nothing allowed is cut."""


class _OneAgent(AgentCache):
    """The stateless tools read their agent from the agent cache; here it holds the scenario's agent only."""

    def __init__(self, agent: Agent) -> None:
        super().__init__(_NoDatabase(), ttl_seconds=0)  # type: ignore[arg-type]
        self.agent = agent

    async def get(self, agent_id: uuid.UUID) -> Agent | None:
        return self.agent if agent_id == self.agent.id else None


def _agent(world: World, names: list[str], mode: RetrievalMode, tags: list[str] | None) -> Agent:
    return extractive_agent([msgspec.structs.replace(a, tags=tags) for a in _assignments(world, names, mode)])


def _through_mcp(
    world: World,
    agent: Agent,
    user_groups: frozenset[str],
    *,
    check_identity_groups: bool,
    filter_chunks: bool,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """``search`` and ``ask`` as MCP tool calls, structured results, for a user in ``user_groups``."""
    retriever = Retriever(
        IdentityReader(world.vectors, ttl_seconds=0),
        world.vectors,
        QueryVectors(world.embedders),
        check_identity_groups=check_identity_groups,
        filter_chunks=filter_chunks,
    )
    chats = ChatService(_NoDatabase(), retriever, default_llm_registry(), _OneAgent(agent))  # type: ignore[arg-type]
    caller = Principal(subject="u", name=None, groups=user_groups, roles=frozenset(), is_admin=False)
    server = build_server(chats, principal_of=lambda _: caller)

    async def call() -> tuple[dict[str, Any], dict[str, Any]]:
        async with Client(server, mode="legacy") as client:
            search = await client.call_tool(
                "search", {"agent_id": str(agent.id), "query": QUESTION, "top_k": EVERY_CHUNK}
            )
            ask = await client.call_tool("ask", {"agent_id": str(agent.id), "question": QUESTION})
        assert not search.is_error, search.content
        assert not ask.is_error, ask.content
        return search.structured_content, ask.structured_content

    return world.run(call())


def _forbidden_text(allowed: set[str]) -> list[str]:
    """What only a forbidden collection's chunks say (chunk 0 of each is the question itself, the same in all)."""
    return [f"{name} chunk" for name in COLLECTIONS if name not in allowed]


@pytest.mark.parametrize("mode", RETRIEVAL_MODES)
@pytest.mark.parametrize(("check_identity_groups", "filter_chunks"), CHECKS)
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(scenario=scenarios)
def test_no_chunk_from_a_collection_outside_the_users_groups_through_mcp(
    world: World,
    check_identity_groups: bool,
    filter_chunks: bool,
    mode: RetrievalMode,
    scenario: dict[str, Any],
) -> None:
    groups: dict[str, list[str]] = scenario["collection_groups"]
    for name, collection_groups in groups.items():
        world.run(world.store.set_groups(name, collection_groups))
    world.settle()
    user_groups: frozenset[str] = scenario["user_groups"]
    agent = _agent(world, scenario["assigned"], mode, scenario["tags"])

    searched, answered = _through_mcp(
        world, agent, user_groups, check_identity_groups=check_identity_groups, filter_chunks=filter_chunks
    )

    if world.kind == "pgvector":
        assert world.in_memory() >= set(scenario["assigned"])  # the copies were in service
    allowed = {n for n in scenario["assigned"] if not groups[n] or user_groups.intersection(groups[n])}
    found = [c["collection"] for c in searched["citations"]]
    assert set(found) <= allowed
    # and nothing allowed is lost: every allowed collection returns all the chunks its filter keeps
    assert sorted(found) == sorted(n for n in allowed for _ in range(_kept_by(scenario["tags"])))
    given_to_answer = [*answered["citations"], *answered["also_retrieved"]]
    assert {c["collection"] for c in given_to_answer} <= allowed
    for text in _forbidden_text(allowed):
        assert text not in answered["answer"]
        assert text not in msgspec.json.encode(searched).decode()


@pytest.mark.parametrize("mode", ["lexical", "hybrid"])
@pytest.mark.parametrize(("check_identity_groups", "filter_chunks"), CHECKS)
def test_a_restricted_chunk_that_is_the_question_word_for_word_never_comes_back_through_mcp(
    world: World,
    check_identity_groups: bool,
    filter_chunks: bool,
    mode: RetrievalMode,
) -> None:
    """The lexical leg's best possible match, in a collection the user may not read, beside a public one."""
    restricted, public = COLLECTIONS[0], COLLECTIONS[1]
    for name in COLLECTIONS:
        world.run(world.store.set_groups(name, ["exec"] if name == restricted else []))
    world.settle()
    agent = _agent(world, [restricted, public], mode, None)

    searched, answered = _through_mcp(
        world, agent, frozenset({"hr"}), check_identity_groups=check_identity_groups, filter_chunks=filter_chunks
    )

    assert [c["collection"] for c in searched["citations"]] == [public] * CHUNKS_PER_COLLECTION
    assert {c["collection"] for c in [*answered["citations"], *answered["also_retrieved"]]} <= {public}


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(user_groups=st.lists(st.sampled_from(["hr", "legal", "exec"]), unique=True, max_size=2).map(frozenset))
def test_an_agent_for_other_groups_is_not_found_through_mcp(
    world: World,
    user_groups: frozenset[str],
) -> None:
    """The agent check comes before either access check: an agent for ``eng`` is not found for anyone else."""
    agent = msgspec.structs.replace(_agent(world, list(COLLECTIONS), "dense", None), groups=["eng"])
    retriever = Retriever(IdentityReader(world.vectors, ttl_seconds=0), world.vectors, QueryVectors(world.embedders))
    chats = ChatService(_NoDatabase(), retriever, default_llm_registry(), _OneAgent(agent))  # type: ignore[arg-type]
    caller = Principal(subject="u", name=None, groups=user_groups, roles=frozenset(), is_admin=False)

    async def call() -> list[str]:
        async with Client(build_server(chats, principal_of=lambda _: caller), mode="legacy") as client:
            results = [
                await client.call_tool("search", {"agent_id": str(agent.id), "query": QUESTION}),
                await client.call_tool("ask", {"agent_id": str(agent.id), "question": QUESTION}),
            ]
        assert all(r.is_error for r in results)
        return [msgspec.json.decode(r.content[0].text)["code"] for r in results]

    assert world.run(call()) == ["agent_not_found", "agent_not_found"]
