"""Kappi's agent layer alone: versions are made by configuration changes only, bad input is refused and changes
nothing, the agent cache hears of every committed write and of nothing else, assignments report item by item, and
access is explained from identities as they are now. On the test's database and real stores."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import pytest

from common.auth import Authenticator, mint_dev_token
from common.config import Settings
from common.db import SingleConnectionDatabase
from common.db.database import Connection
from common.errors import AppError, InvalidInput, NotFound
from common.rerankers import default_rerankers
from common.vectors.base import DEFAULT_DENSE_WEIGHT
from common.vectors.registry import VectorRegistry
from kappi.agent.models import (
    DEFAULT_SYSTEM_PROMPT,
    AccessQuery,
    AgentCreate,
    AgentUpdate,
    AssignmentChanges,
    AssignmentSpec,
    CollectionRef,
)
from kappi.agent.service import AgentService, llm_defaults
from kappi.app import Kappi
from kappi.llm.registry import LlmRegistry, default_llm_registry
from tests.kappi.conftest import Shelf, principal

ADMIN = principal("root", admin=True)


class RecordingDatabase:
    """The test's database, noting each transaction that commits, so a test sees what happened after which."""

    def __init__(self, db: SingleConnectionDatabase, log: list[str]) -> None:
        self.db = db
        self.log = log

    def transaction(self) -> AbstractAsyncContextManager[Connection]:
        return self._transaction()

    @asynccontextmanager
    async def _transaction(self) -> AsyncIterator[Connection]:
        async with self.db.transaction() as conn:
            yield conn
        self.log.append("committed")

    async def ping(self) -> None:
        await self.db.ping()

    async def aclose(self) -> None:
        """The test's connection is closed by its fixture."""


@pytest.fixture
async def llms() -> AsyncIterator[LlmRegistry]:
    """``extractive``, and an OpenAI-compatible provider that is configured but never called: saving an agent only
    checks its model names."""
    registry = default_llm_registry(openai_base_url="http://127.0.0.1:9/v1", openai_models=["small", "large"])
    yield registry
    await registry.aclose()


@pytest.fixture
def log() -> list[str]:
    return []


@pytest.fixture
def agents(
    db: SingleConnectionDatabase, services: Kappi, llms: LlmRegistry, settings: Settings, log: list[str]
) -> AgentService:
    """The agent service as Kappi builds it (its identities cached 60 s), its ``changed`` noted in ``log``."""
    return AgentService(
        RecordingDatabase(db, log),
        services.identities,
        services.retriever,
        llms.check_model,
        Authenticator(settings),
        changed=lambda: log.append("changed"),
        default_llm=llm_defaults(llms),
        check_reranker=default_rerankers(cohere_api_key="configured-never-called").resolve,
    )


async def test_create_writes_version_one_with_the_configuration_asked_for(agents: AgentService) -> None:
    agent = await agents.create(
        AgentCreate(name="Helper", description="HR questions", groups=["hr", "eng", "hr"], temperature=0.3), ADMIN
    )

    assert (agent.name, agent.description, agent.groups, agent.active) == (
        "Helper",
        "HR questions",
        ["eng", "hr"],
        True,
    )
    assert (agent.current_version, agent.config.version, agent.config.created_by) == (1, 1, "root")
    config = agent.config
    assert (config.llm_provider, config.llm_model, config.system_prompt) == (
        "extractive",
        "extractive",
        DEFAULT_SYSTEM_PROMPT,
    )
    assert (config.context_template, config.temperature, config.max_tokens) == (None, 0.3, 800)
    assert await agents.versions(agent.id) == [config]
    assert await agents.get(agent.id) == agent


async def test_name_description_and_groups_change_in_place_without_a_new_version(agents: AgentService) -> None:
    agent = await agents.create(AgentCreate(name="Helper"), ADMIN)

    updated = await agents.update(
        agent.id, AgentUpdate(name="Board", description="For the board", groups=["exec"]), ADMIN
    )

    assert (updated.name, updated.description, updated.groups) == ("Board", "For the board", ["exec"])
    assert (updated.current_version, updated.config) == (1, agent.config)
    assert await agents.versions(agent.id) == [agent.config]


@pytest.mark.parametrize(
    ("created", "change"),
    [
        pytest.param({}, {"llm_provider": "openai", "llm_model": "small"}, id="llm_provider"),
        pytest.param({"llm_provider": "openai", "llm_model": "small"}, {"llm_model": "large"}, id="llm_model"),
        pytest.param({}, {"system_prompt": "Be brief."}, id="system_prompt"),
        pytest.param({}, {"context_template": "Sources:\n{context}"}, id="context_template"),
        pytest.param({"context_template": "Sources:\n{context}"}, {"context_template": None}, id="template_removed"),
        pytest.param({}, {"temperature": 0.9}, id="temperature"),
        pytest.param({}, {"max_tokens": 50}, id="max_tokens"),
        pytest.param({}, {"reranker": "cohere", "rerank_model": "rerank-v3.5"}, id="reranker"),
        pytest.param({"reranker": "cohere"}, {"rerank_model": "rerank-english-v3.0"}, id="rerank_model"),
        pytest.param({"reranker": "cohere"}, {"reranker": None, "rerank_model": None}, id="reranker_removed"),
    ],
)
async def test_a_configuration_change_makes_the_next_version_and_keeps_the_one_before(
    agents: AgentService, created: dict[str, Any], change: dict[str, Any]
) -> None:
    agent = await agents.create(AgentCreate(name="Helper", **created), ADMIN)

    updated = await agents.update(agent.id, AgentUpdate(name="Renamed", **change), ADMIN)

    assert (updated.name, updated.current_version, updated.config.version) == ("Renamed", 2, 2)
    for field, value in change.items():
        assert getattr(updated.config, field) == value
    unchanged = {"version", "created_at", *change}
    for field in set(agent.config.__struct_fields__) - unchanged:
        assert getattr(updated.config, field) == getattr(agent.config, field), field
    assert await agents.versions(agent.id) == [updated.config, agent.config]
    again = await agents.update(agent.id, AgentUpdate(**change), ADMIN)  # the same values again are no change
    assert again.current_version == 2


@pytest.mark.parametrize(
    ("change", "code"),
    [
        pytest.param(AgentUpdate(name="Renamed", llm_model="gpt-17"), "unknown_llm_model", id="unknown-model"),
        pytest.param(AgentUpdate(name="Renamed", llm_provider="skynet"), "unknown_llm_provider", id="unknown-provider"),
        pytest.param(
            AgentUpdate(name="Renamed", context_template="no place for sources"),
            "invalid_context_template",
            id="template-without-context",
        ),
        pytest.param(AgentUpdate(name="Renamed", groups=["hr "]), "invalid_group", id="group-with-a-space"),
        pytest.param(AgentUpdate(system_prompt="Be brief.", groups=["a\tb"]), "invalid_group", id="group-with-a-tab"),
        pytest.param(AgentUpdate(reranker="jina"), "unknown_reranker", id="unknown-reranker"),
        pytest.param(AgentUpdate(rerank_model="rerank-v9"), "reranker_required", id="rerank-model-alone"),
        pytest.param(
            AgentUpdate(reranker="cohere", rerank_model="rerank-v9"), "unknown_rerank_model", id="unknown-rerank-model"
        ),
    ],
)
async def test_a_refused_update_changes_nothing(agents: AgentService, change: AgentUpdate, code: str) -> None:
    agent = await agents.create(AgentCreate(name="Helper", groups=["hr"]), ADMIN)

    with pytest.raises(InvalidInput) as raised:
        await agents.update(agent.id, change, ADMIN)

    assert raised.value.code == code
    assert await agents.get(agent.id) == agent
    assert await agents.versions(agent.id) == [agent.config]


@pytest.mark.parametrize("groups", [[" hr"], ["hr\n"], [""], ["x" * 256]])
async def test_a_new_agent_with_an_invalid_group_is_refused_with_invalid_group(
    agents: AgentService, groups: list[str]
) -> None:
    before = await agents.all()
    with pytest.raises(InvalidInput) as raised:
        await agents.create(AgentCreate(name="Helper", groups=groups), ADMIN)
    assert raised.value.code == "invalid_group"
    assert await agents.all() == before


async def test_changed_follows_each_committed_write_and_never_a_read_or_a_refused_write(
    agents: AgentService, shelf: Shelf, log: list[str]
) -> None:
    handbook = await shelf.collection()
    agent = await agents.create(AgentCreate(name="Helper"), ADMIN)
    assert log == ["committed", "changed"]
    agent_id, nobody = agent.id, uuid.uuid4()
    write, read, refused = ["committed", "changed"], ["committed"], list[str]()
    steps: list[tuple[str, Callable[[], Awaitable[object]], list[str]]] = [
        ("get", lambda: agents.get(agent_id), read),
        ("all", agents.all, read),
        ("versions", lambda: agents.versions(agent_id), read),
        ("explain", lambda: agents.explain(agent_id, AccessQuery(groups=["hr"])), read),
        ("rename", lambda: agents.update(agent_id, AgentUpdate(name="Renamed"), ADMIN), write),
        ("new version", lambda: agents.update(agent_id, AgentUpdate(system_prompt="Be brief."), ADMIN), write),
        ("bad model", lambda: agents.update(agent_id, AgentUpdate(llm_model="gpt-17"), ADMIN), refused),
        ("update nobody", lambda: agents.update(nobody, AgentUpdate(name="X"), ADMIN), refused),
        ("bad group", lambda: agents.create(AgentCreate(name="X", groups=[" hr"]), ADMIN), refused),
        ("bad provider", lambda: agents.create(AgentCreate(name="X", llm_provider="skynet"), ADMIN), refused),
        ("deactivate", lambda: agents.set_active(agent_id, False), write),
        ("deactivate nobody", lambda: agents.set_active(nobody, False), refused),
        (
            "assign",
            lambda: agents.assign(
                agent_id, AssignmentChanges(add=[AssignmentSpec(vector_provider="qdrant", name=handbook.name)])
            ),
            write,
        ),
        ("assign to nobody", lambda: agents.assign(nobody, AssignmentChanges()), refused),
        ("delete", lambda: agents.delete(agent_id), write),
        ("delete again", lambda: agents.delete(agent_id), refused),
    ]
    for name, step, expected in steps:
        log.clear()
        try:
            await step()
        except AppError:
            assert expected == refused, f"{name} was refused"
        else:
            assert expected != refused, f"{name} was not refused"
        assert log == expected, name


async def test_assign_reports_each_collection_on_its_own(agents: AgentService, shelf: Shelf) -> None:
    handbook = await shelf.collection(name=f"Handbook_{uuid.uuid4().hex[:8]}")
    agent = await agents.create(AgentCreate(name="Helper"), ADMIN)
    wrong_case = handbook.name.upper()

    report = await agents.assign(
        agent.id,
        AssignmentChanges(
            add=[
                AssignmentSpec(vector_provider="qdrant", name=wrong_case),
                AssignmentSpec(vector_provider="qdrant", name="Nowhere_To_Be_Found"),
                AssignmentSpec(vector_provider="weaviate", name=handbook.name),
                AssignmentSpec(vector_provider="qdrant", name=handbook.name, top_k=3, instruction="the handbook"),
            ]
        ),
    )

    assert [(r.name, r.action, r.ok, r.code) for r in report.results] == [
        (wrong_case, "add", False, "collection_not_found"),
        ("Nowhere_To_Be_Found", "add", False, "collection_not_found"),
        (handbook.name, "add", False, "provider_unavailable"),
        (handbook.name, "added", True, None),
    ]
    details = [r.detail for r in report.results]
    assert details[0] == (
        f"There is no collection named {wrong_case!r} in qdrant. Did you mean {handbook.name!r}? "
        "Names are case-sensitive."
    )
    assert details[1] == "There is no collection named 'Nowhere_To_Be_Found' in qdrant."
    assert "weaviate" in (details[2] or "")
    assert [(a.vector_provider, a.name, a.collection_id, a.top_k, a.instruction) for a in report.collections] == [
        ("qdrant", handbook.name, handbook.collection_id, 3, "the handbook")
    ]

    again = await agents.assign(
        agent.id,
        AssignmentChanges(
            add=[AssignmentSpec(vector_provider="qdrant", name=handbook.name, top_k=7)],
            remove=[CollectionRef(vector_provider="qdrant", name="Nowhere_To_Be_Found")],
        ),
    )
    assert [(r.name, r.action, r.ok, r.code) for r in again.results] == [
        ("Nowhere_To_Be_Found", "removed", False, "not_assigned"),
        (handbook.name, "updated", True, None),
    ]
    assert [a.top_k for a in again.collections] == [7]

    removed = await agents.assign(
        agent.id, AssignmentChanges(remove=[CollectionRef(vector_provider="qdrant", name=handbook.name)])
    )
    assert [(r.action, r.ok, r.code) for r in removed.results] == [("removed", True, None)]
    assert removed.collections == (await agents.get(agent.id)).collections == []
    with pytest.raises(NotFound) as raised:
        await agents.assign(uuid.uuid4(), AssignmentChanges())
    assert raised.value.code == "agent_not_found"


async def test_explain_reads_identities_as_they_are_now_not_as_cached(
    agents: AgentService, services: Kappi, shelf: Shelf, vectors: VectorRegistry
) -> None:
    restricted = await shelf.collection(groups=["hr"])
    agent = await agents.create(AgentCreate(name="Helper"), ADMIN)
    spec = AssignmentSpec(vector_provider="qdrant", name=restricted.name)
    await agents.assign(agent.id, AssignmentChanges(add=[spec]))  # reads the identity, cached for 60 s
    before = await agents.explain(agent.id, AccessQuery(groups=["hr"]))
    assert [(v.reason, v.searchable, v.matched_groups) for v in before.collections] == [("member", True, ["hr"])]

    await vectors.get("qdrant").set_groups(restricted.name, ["finance"])

    after = await agents.explain(agent.id, AccessQuery(groups=["hr"]))
    assert [(v.reason, v.searchable, v.collection_groups) for v in after.collections] == [
        ("not_a_member", False, ["finance"])
    ]
    cached = await services.identities.read("qdrant", restricted.name)
    assert cached.identity is not None
    assert cached.identity.groups == ["hr"]  # what a cached read would have explained


async def test_explain_takes_groups_or_a_token_and_says_whether_the_agent_is_visible(
    agents: AgentService, settings: Settings
) -> None:
    agent = await agents.create(AgentCreate(name="Board", groups=["exec"]), ADMIN)
    token = mint_dev_token(settings, subject="erin", groups=["exec"])

    by_token = await agents.explain(agent.id, AccessQuery(token=token, groups=["hr"]))
    assert (by_token.subject, by_token.groups, by_token.agent_visible) == ("erin", ["exec"], True)
    by_groups = await agents.explain(agent.id, AccessQuery(groups=["hr", "hr"]))
    assert (by_groups.subject, by_groups.groups, by_groups.agent_visible) == (None, ["hr"], False)
    await agents.set_active(agent.id, False)
    assert not (await agents.explain(agent.id, AccessQuery(groups=["exec"]))).agent_visible
    with pytest.raises(InvalidInput) as raised:
        await agents.explain(agent.id, AccessQuery())
    assert raised.value.code == "groups_or_token_required"


async def test_explain_says_an_agent_whose_every_collection_is_for_other_groups_searches_nothing(
    agents: AgentService, shelf: Shelf
) -> None:
    """Issue #29 item 3: the access check said the agent was visible (so fine) above a table of collections that
    were all "no" for the user; an agent with no collections at all is a plain assistant, searching nothing by design.
    """
    hr, legal = await shelf.collection(groups=["hr"]), await shelf.collection(groups=["legal", "hr"])
    public = await shelf.collection()
    agent = await agents.create(AgentCreate(name="HR helper"), ADMIN)
    plain = await agents.create(AgentCreate(name="Plain assistant"), ADMIN)
    specs = [AssignmentSpec(vector_provider="qdrant", name=c.name) for c in (hr, legal)]
    await agents.assign(agent.id, AssignmentChanges(add=specs))

    outsider = await agents.explain(agent.id, AccessQuery(groups=["sales"]))
    assert (outsider.agent_visible, outsider.searches_nothing) == (True, True)
    assert not any(v.searchable for v in outsider.collections)
    assert (await agents.explain(agent.id, AccessQuery(groups=[]))).searches_nothing
    assert not (await agents.explain(agent.id, AccessQuery(groups=["legal"]))).searches_nothing
    assert not (await agents.explain(plain.id, AccessQuery(groups=["sales"]))).searches_nothing

    await agents.assign(agent.id, AssignmentChanges(add=[AssignmentSpec(vector_provider="qdrant", name=public.name)]))
    assert not (await agents.explain(agent.id, AccessQuery(groups=["sales"]))).searches_nothing


async def test_a_new_agent_names_no_llm_and_gets_the_registrys_default_choice(
    agents: AgentService, llms: LlmRegistry
) -> None:
    assert llms.default_choice() == ("extractive", "extractive")
    config = (await agents.create(AgentCreate(name="Helper"), ADMIN)).config
    assert (config.llm_provider, config.llm_model) == llms.default_choice()
    named = (await agents.create(AgentCreate(name="Helper", llm_provider="openai"), ADMIN)).config
    assert (named.llm_provider, named.llm_model) == ("openai", "small")  # that provider's first model
    model_only = (await agents.create(AgentCreate(name="Helper", llm_model="extractive"), ADMIN)).config
    assert (model_only.llm_provider, model_only.llm_model) == ("extractive", "extractive")


async def test_the_default_choice_is_the_registrys_not_a_constant(
    db: SingleConnectionDatabase, services: Kappi, settings: Settings
) -> None:
    """With another default (F's embedded model, when it runs), a new agent gets that one."""
    registry = default_llm_registry(openai_base_url="http://127.0.0.1:9/v1", openai_models=["small", "large"])
    registry.default_choice = lambda: ("openai", "large")  # type: ignore[method-assign]
    agents = AgentService(
        db, services.identities, services.retriever, registry.check_model, Authenticator(settings),
        default_llm=llm_defaults(registry),
    )  # fmt: skip
    config = (await agents.create(AgentCreate(name="Helper"), ADMIN)).config
    assert (config.llm_provider, config.llm_model) == ("openai", "large")
    await registry.aclose()


@pytest.mark.parametrize(
    ("request_", "code"),
    [
        pytest.param(AgentCreate(name="X", llm_provider="skynet"), "unknown_llm_provider", id="unknown-provider"),
        pytest.param(AgentCreate(name="X", reranker="jina"), "unknown_reranker", id="unknown-reranker"),
        pytest.param(AgentCreate(name="X", rerank_model="rerank-v3.5"), "reranker_required", id="model-alone"),
        pytest.param(
            AgentCreate(name="X", reranker="cohere", rerank_model="rerank-v9"), "unknown_rerank_model", id="bad-model"
        ),
    ],
)
async def test_a_refused_new_agent_is_invalid_input_and_stores_nothing(
    agents: AgentService, request_: AgentCreate, code: str
) -> None:
    before = await agents.all()
    with pytest.raises(InvalidInput) as raised:
        await agents.create(request_, ADMIN)
    assert (raised.value.code, raised.value.status) == (code, 422)
    assert await agents.all() == before


async def test_a_reranker_named_without_a_model_gets_its_default_and_is_versioned(agents: AgentService) -> None:
    agent = await agents.create(AgentCreate(name="Helper", reranker="cohere"), ADMIN)
    assert (agent.config.reranker, agent.config.rerank_model) == ("cohere", "rerank-v3.5")
    plain = await agents.create(AgentCreate(name="Plain"), ADMIN)
    assert (plain.config.reranker, plain.config.rerank_model) == (None, None)


async def test_assignments_keep_their_retrieval_settings_new_ones_are_hybrid(
    agents: AgentService, shelf: Shelf
) -> None:
    handbook, policies = await shelf.collection(), await shelf.collection()
    agent = await agents.create(AgentCreate(name="Helper"), ADMIN)

    report = await agents.assign(
        agent.id,
        AssignmentChanges(
            add=[
                AssignmentSpec(vector_provider="qdrant", name=handbook.name),
                AssignmentSpec(
                    vector_provider="qdrant",
                    name=policies.name,
                    mode="dense",
                    dense_weight=0.8,
                    tags=["policy", "hr", "policy"],
                    labels=["final"],
                ),
            ]
        ),
    )
    settings = {a.name: (a.mode, a.dense_weight, a.tags, a.labels) for a in report.collections}
    assert settings == {
        handbook.name: ("hybrid", DEFAULT_DENSE_WEIGHT, None, None),
        policies.name: ("dense", 0.8, ["hr", "policy"], ["final"]),
    }

    # an update that leaves them out keeps them (nobody's answers change unasked); one that sends them changes them
    again = await agents.assign(
        agent.id,
        AssignmentChanges(
            add=[
                AssignmentSpec(vector_provider="qdrant", name=policies.name, top_k=9),
                AssignmentSpec(vector_provider="qdrant", name=handbook.name, mode="lexical", tags=["faq"]),
            ]
        ),
    )
    settings = {a.name: (a.top_k, a.mode, a.dense_weight, a.tags, a.labels) for a in again.collections}
    assert settings == {
        handbook.name: (5, "lexical", DEFAULT_DENSE_WEIGHT, ["faq"], None),
        policies.name: (9, "dense", 0.8, ["hr", "policy"], ["final"]),
    }
    cleared = await agents.assign(
        agent.id, AssignmentChanges(add=[AssignmentSpec(vector_provider="qdrant", name=policies.name, tags=None)])
    )
    assert {a.name: a.tags for a in cleared.collections}[policies.name] is None
    assert (await agents.get(agent.id)).collections == cleared.collections
