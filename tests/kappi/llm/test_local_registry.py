"""The ``local`` provider in the registry: the default for new agents while it runs, and ``extractive`` with the
reason whenever it cannot answer (not installed, refused, loading, down)."""

from __future__ import annotations

import pytest

from common.errors import InvalidInput
from kappi.llm.extractive import ExtractiveProvider
from kappi.llm.openai_compatible import OpenAICompatibleProvider
from kappi.llm.registry import EXTRACTIVE, LOCAL_PROVIDER, LlmFallback, default_llm_registry


class Endpoint:
    """What ``ragu.local_llm.LocalLlmServer`` shows kappi, in a state the test sets."""

    def __init__(self, status: str) -> None:
        self.base_url = "http://127.0.0.1:9/v1"
        self.model = "qwen2.5-coder-0.5b-instruct-q4_k_m"
        self.api_key = "key"
        self.capacity = 3
        self.state = status

    def status(self) -> str:
        return self.state


async def test_a_running_local_model_is_the_default_and_answers_through_the_openai_compatible_provider() -> None:
    endpoint = Endpoint("ready")
    registry = default_llm_registry(local=endpoint)
    try:
        assert registry.default_choice() == (LOCAL_PROVIDER, endpoint.model)
        provider, fallback = registry.resolve(LOCAL_PROVIDER)
        assert isinstance(provider, OpenAICompatibleProvider)
        assert (provider.name, provider.models(), fallback) == (LOCAL_PROVIDER, [endpoint.model], None)
        registry.check_model(LOCAL_PROVIDER, endpoint.model)
        with pytest.raises(InvalidInput):
            registry.check_model(LOCAL_PROVIDER, "llama3")
    finally:
        await registry.aclose()


@pytest.mark.parametrize(
    ("status", "reason", "default"),
    [
        ("starting", "local_llm_starting", LOCAL_PROVIDER),  # it will answer soon: still new agents' default
        ("stopped", "local_llm_down", EXTRACTIVE),
    ],
)
async def test_a_local_model_that_is_not_serving_falls_back_to_extractive(
    status: str, reason: str, default: str
) -> None:
    endpoint = Endpoint(status)
    registry = default_llm_registry(local=endpoint)
    try:
        provider, fallback = registry.resolve(LOCAL_PROVIDER)
        assert isinstance(provider, ExtractiveProvider)
        assert fallback is not None
        assert (fallback.provider, fallback.reason) == (EXTRACTIVE, reason)
        assert registry.default_choice()[0] == default
        endpoint.state = "ready"  # loaded (or restarted): answers come from it again
        assert registry.resolve(LOCAL_PROVIDER)[1] is None
    finally:
        await registry.aclose()


async def test_without_a_local_model_its_agents_fall_back_and_say_why() -> None:
    refused = default_llm_registry(local_refused="local model x refused: its SHA-256 is ab.., expected cd..")
    absent = default_llm_registry()
    try:
        assert refused.resolve(LOCAL_PROVIDER)[1] == LlmFallback(
            provider=EXTRACTIVE,
            reason="local_llm_refused",
            detail="local model x refused: its SHA-256 is ab.., expected cd..",
        )
        fallback = absent.resolve(LOCAL_PROVIDER)[1]
        assert fallback is not None
        assert fallback.reason == "local_llm_not_installed"
        assert absent.default_choice() == (EXTRACTIVE, EXTRACTIVE)
        with pytest.raises(InvalidInput):  # a new agent cannot choose a model that is not here
            absent.check_model(LOCAL_PROVIDER, "anything")
        assert absent.resolve(EXTRACTIVE)[1] is None
    finally:
        await refused.aclose()
        await absent.aclose()


async def test_the_catalog_offers_each_provider_with_its_models_and_status() -> None:
    registry = default_llm_registry(local=Endpoint("starting"), openai_base_url="http://localhost:11434/v1")
    try:
        catalog = registry.catalog()
        assert (catalog.default_provider, catalog.default_model) == (LOCAL_PROVIDER, Endpoint("x").model)
        offers = {offer.provider: (offer.models, offer.status) for offer in catalog.providers}
        assert offers == {
            EXTRACTIVE: ([EXTRACTIVE], "ready"),
            LOCAL_PROVIDER: ([Endpoint("x").model], "starting"),
            "openai": ([], "ready"),
        }
    finally:
        await registry.aclose()


@pytest.mark.parametrize(("configured", "budget"), [(600, 600), (250, 250), (0, None)])
async def test_only_the_local_model_reads_passages_under_the_configured_budget(
    configured: int, budget: int | None
) -> None:
    """``RAGU_LOCAL_LLM_PASSAGE_TOKENS`` sizes the local model's passages; 0 gives it whole passages, and a
    provider on a server always reads them whole."""
    registry = default_llm_registry(local=Endpoint("ready"), local_passage_tokens=configured)
    try:
        assert registry.passage_budget(LOCAL_PROVIDER) == budget
        assert registry.passage_budget(EXTRACTIVE) is None
    finally:
        await registry.aclose()
