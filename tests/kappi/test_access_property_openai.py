"""The access property through the OpenAI-compatible endpoint's own path: what ``POST /v1/chat/completions`` calls
(:func:`kappi.openai_api.service.complete` and :func:`~kappi.openai_api.service.stream`), whole and streamed, with
each check switched off in turn, in every retrieval mode, on every store of ``test_access_property`` (whose world,
scenarios and checks this module imports unchanged).

The answer pipeline runs whole (the agent check, retrieval, the relevance floor, the extractive LLM, grounding), so
the property is about what reaches the caller: no citation, passage or word of a collection outside their groups.
A chunk of a collection holds its name (``Prop_3 chunk 1 says...``), so a forbidden name anywhere in the answer is a
leak. The world's chunks have random vectors, which the relevance floor rightly declines; so each collection gets
one more chunk (:func:`answerable`) at the question's own embedding that answers it, naming its collection: every
readable collection then has something to answer from, and the property is not vacuous (checked).

Earlier turns are part of the path (a follow-up is searched with the question before it), so some scenarios ask one
that names a forbidden collection's chunk first. The agent comes from a cache whose loader returns it (the agent's
row is not what is checked here); everything else is the real thing.
"""

from __future__ import annotations

import uuid
from typing import Any
from uuid import UUID

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from common.errors import NotFound
from common.vectors.base import RETRIEVAL_MODES, RetrievalMode, VectorRecord
from kappi.access.identities import IdentityReader
from kappi.agent.cache import AgentCache
from kappi.agent.models import Agent
from kappi.chat.service import ChatService
from kappi.llm.registry import default_llm_registry
from kappi.openai_api import service
from kappi.openai_api.models import CompletionRequest, InputMessage
from kappi.retrieval.service import QueryVectors, Retriever
from tests.kappi.conftest import principal
from tests.kappi.test_access_property import (
    CHECKS,
    COLLECTIONS,
    QUESTION,
    World,
    _assignments,
    _NoDatabase,
    extractive_agent,
    scenarios,
    world,
)

__all__ = ["world"]

CONVERSATIONS = [
    (QUESTION,),
    ("Prop_0 chunk 1", "I cannot say.", "and those vacation days?"),
    ("what does Prop_4 say?", "Nothing I may quote.", QUESTION),
]
"""The turns of a request, the last one the question; the follow-up of the second leans on a turn naming a chunk."""


ANSWER_TAGS = ["policy"]
"""The answering chunk's tags: kept by every tag filter of the scenarios but the empty one."""


@pytest.fixture(scope="module")
def answerable(world: World) -> World:
    """The world, each of its collections holding a chunk that answers the question, at its embedding."""
    world.run(_add_answers(world))
    return world


async def _add_answers(world: World) -> None:
    vector = await world.embedders.get("local", "all-MiniLM-L6-v2").embed_query(QUESTION)
    for name in COLLECTIONS:
        payload = {
            **world.identity(name, []).to_dict(),
            "content": f"The documents of {name} say that employees get 25 vacation days per year.",
            "document_id": str(uuid.uuid4()),
            "tags": ANSWER_TAGS,
        }
        await world.store.upsert(name, [VectorRecord(id=str(uuid.uuid4()), vector=vector, payload=payload)])


class _Stored(AgentCache):
    """The agent cache kappi uses, whose loader finds this one agent (as if stored) and no other."""

    def __init__(self, agent: Agent) -> None:
        super().__init__(_NoDatabase(), ttl_seconds=60)
        self.agent = agent

    async def _load(self, agent_id: UUID) -> Agent | None:
        return self.agent if agent_id == self.agent.id else None


def _agent(world: World, assigned: list[str], mode: RetrievalMode, tags: list[str] | None) -> Agent:
    return extractive_agent([msgspec.structs.replace(a, tags=tags) for a in _assignments(world, assigned, mode)])


def _chats(world: World, agent: Agent, *, check_identity_groups: bool, filter_chunks: bool) -> ChatService:
    """Kappi's chat service as the app builds it, its retriever with the checks this run keeps."""
    retriever = Retriever(
        IdentityReader(world.vectors, ttl_seconds=0),
        world.vectors,
        QueryVectors(world.embedders),
        check_identity_groups=check_identity_groups,
        filter_chunks=filter_chunks,
    )
    return ChatService(_NoDatabase(), retriever, default_llm_registry(), _Stored(agent))  # type: ignore[arg-type]


def _request(agent: Agent, turns: tuple[str, ...], *, stream: bool) -> CompletionRequest:
    roles = ("user", "assistant")
    messages = [InputMessage(role=roles[n % 2], content=text) for n, text in enumerate(turns)]
    return CompletionRequest(model=str(agent.id), messages=messages, stream=stream)


def ask(world: World, chats: ChatService, agent: Agent, groups: frozenset[str], turns: tuple[str, ...]) -> list[Any]:
    """The endpoint's answers, whole and streamed, as an OpenAI client decodes them: the completion, then each
    chunk of the stream."""
    user = principal("u", *groups)
    whole = world.run(service.complete(chats, _request(agent, turns, stream=False), user))

    async def streamed() -> list[Any]:
        chunks = await service.stream(chats, _request(agent, turns, stream=True), user)
        return [data async for data in chunks]

    datas = world.run(streamed())
    assert datas[-1] == service.DONE
    return [msgspec.to_builtins(whole), *(msgspec.json.decode(d) for d in datas[:-1])]


def given_collections(answers: list[Any]) -> set[str]:
    """The collections of every passage the answers carry (cited or also retrieved), whole or in a last chunk."""
    found = set()
    for answer in answers:
        for choice in answer.get("choices", []):
            part = choice.get("message") or choice.get("delta") or {}
            for citation in [*(part.get("ragu_citations") or []), *(part.get("ragu_also_retrieved") or [])]:
                found.add(citation["collection"])
    return found


def _allowed(groups: dict[str, list[str]], assigned: list[str], user_groups: frozenset[str]) -> set[str]:
    return {n for n in assigned if not groups[n] or user_groups.intersection(groups[n])}


@pytest.mark.parametrize(("check_identity_groups", "filter_chunks"), CHECKS)
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    scenario=scenarios,
    mode=st.sampled_from(RETRIEVAL_MODES),
    turns=st.sampled_from(CONVERSATIONS),
)
def test_no_answer_carries_a_collection_outside_the_users_groups(
    answerable: World,
    check_identity_groups: bool,
    filter_chunks: bool,
    scenario: dict[str, Any],
    mode: RetrievalMode,
    turns: tuple[str, ...],
) -> None:
    world = answerable
    groups: dict[str, list[str]] = scenario["collection_groups"]
    for name, collection_groups in groups.items():
        world.run(world.store.set_groups(name, collection_groups))
    world.settle()
    user_groups: frozenset[str] = scenario["user_groups"]
    agent = _agent(world, scenario["assigned"], mode, scenario["tags"])
    chats = _chats(world, agent, check_identity_groups=check_identity_groups, filter_chunks=filter_chunks)

    answers = ask(world, chats, agent, user_groups, turns)

    allowed = _allowed(groups, scenario["assigned"], user_groups)
    given_ = given_collections(answers)
    assert given_ <= allowed
    if allowed and scenario["tags"] != [] and turns[-1] == QUESTION:  # (a follow-up naming a chunk may decline)
        assert given_  # something readable answers: the property is not vacuous
    text = msgspec.json.encode(answers).decode()  # the request's turns are not in it: a name there is a leak
    for name in set(COLLECTIONS) - allowed:
        assert name not in text, name


@pytest.mark.parametrize("mode", ["lexical", "hybrid"])
@pytest.mark.parametrize(("check_identity_groups", "filter_chunks"), [*CHECKS, pytest.param(False, False, id="none")])
def test_a_restricted_chunk_that_is_the_question_word_for_word_is_never_answered_from(
    answerable: World, check_identity_groups: bool, filter_chunks: bool, mode: RetrievalMode
) -> None:
    """The keyword leg's best possible match in a collection the user may not read, beside a public one: the public
    one answers (the property is not vacuous), the restricted one is in no answer. With both checks off it is:
    the control that shows this test sees a leak."""
    world = answerable
    restricted, public = COLLECTIONS[0], COLLECTIONS[1]
    for name in COLLECTIONS:
        world.run(world.store.set_groups(name, ["exec"] if name == restricted else []))
    world.settle()
    agent = _agent(world, [restricted, public], mode, None)
    chats = _chats(world, agent, check_identity_groups=check_identity_groups, filter_chunks=filter_chunks)

    answers = ask(world, chats, agent, frozenset({"hr"}), (QUESTION,))

    found = given_collections(answers)
    if check_identity_groups or filter_chunks:
        assert found == {public}
        assert restricted not in msgspec.json.encode(answers).decode()
    else:
        assert restricted in found


def test_an_agent_the_user_may_not_use_is_refused_before_any_search(world: World) -> None:
    """The agent check comes first on this path too: its refusal is the unknown model's, and nothing is searched."""
    agent = msgspec.structs.replace(_agent(world, list(COLLECTIONS), "hybrid", None), groups=["exec"])
    chats = _chats(world, agent, check_identity_groups=False, filter_chunks=False)
    for model in (str(agent.id), str(uuid.uuid4())):
        request = CompletionRequest(model=model, messages=[InputMessage(role="user", content=QUESTION)])
        for call in (service.complete, service.stream):
            with pytest.raises(NotFound, match="does not exist or you do not have access") as refused:
                world.run(call(chats, request, principal("u", "hr")))
            assert refused.value.code == "model_not_found"
