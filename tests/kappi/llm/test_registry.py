"""Provider look-up by name, model validation, and what each configuration offers."""

from __future__ import annotations

import pytest

from common.errors import InvalidInput
from kappi.llm import LlmRegistry, default_llm_registry
from kappi.llm.cohere_chat import CohereChatProvider
from kappi.llm.extractive import ExtractiveProvider
from kappi.llm.openai_compatible import OpenAICompatibleProvider


async def test_unconfigured_registry_offers_only_the_offline_extractive_provider() -> None:
    registry = default_llm_registry()
    try:
        assert registry.providers() == ["extractive"]
        assert isinstance(registry.get("extractive"), ExtractiveProvider)
        registry.check_model("extractive", "extractive")
    finally:
        await registry.aclose()


async def test_cohere_joins_with_a_key_and_openai_with_a_base_url() -> None:
    registry = default_llm_registry(
        cohere_api_key="co-key",
        openai_base_url="http://localhost:11434/v1",
        openai_models=["llama3.2", "qwen2.5:7b"],
    )
    try:
        assert registry.providers() == ["cohere", "extractive", "openai"]
        assert isinstance(registry.get("cohere"), CohereChatProvider)
        assert isinstance(registry.get("openai"), OpenAICompatibleProvider)
        registry.check_model("cohere", "command-a-03-2025")
        registry.check_model("openai", "qwen2.5:7b")
    finally:
        await registry.aclose()


async def test_unknown_provider_lists_the_valid_ones() -> None:
    registry = default_llm_registry(cohere_api_key="co-key")
    try:
        with pytest.raises(InvalidInput) as caught:
            registry.get("openai")
        assert caught.value.code == "unknown_llm_provider"
        assert "cohere, extractive" in caught.value.detail
        assert caught.value.extra == {"provider": "openai", "valid_providers": ["cohere", "extractive"]}
        with pytest.raises(InvalidInput, match="unknown LLM provider"):
            registry.check_model("anthropic", "claude")
    finally:
        await registry.aclose()


async def test_unknown_model_lists_the_valid_ones() -> None:
    registry = default_llm_registry(openai_base_url="http://vllm:8000/v1", openai_models=["llama3.2"])
    try:
        with pytest.raises(InvalidInput) as caught:
            registry.check_model("extractive", "gpt-4o")
        assert caught.value.code == "unknown_llm_model"
        assert caught.value.extra == {"provider": "extractive", "model": "gpt-4o", "valid_models": ["extractive"]}
        with pytest.raises(InvalidInput, match=r"valid models: llama3\.2") as caught:
            registry.check_model("openai", "mistral")
        assert caught.value.code == "unknown_llm_model"
    finally:
        await registry.aclose()


async def test_an_openai_server_without_a_model_list_lets_its_server_decide() -> None:
    registry = default_llm_registry(openai_base_url="http://localhost:11434/v1")
    try:
        assert registry.get("openai").models() == []
        registry.check_model("openai", "any-model-the-server-has")
    finally:
        await registry.aclose()


def test_a_provider_name_registered_twice_is_refused() -> None:
    with pytest.raises(ValueError, match="registered twice"):
        LlmRegistry([ExtractiveProvider(), ExtractiveProvider()])
