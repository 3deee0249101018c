"""The LLM providers a kappi process offers, keyed by the name an agent records (``"extractive"``, ``"cohere"`` ...)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from common.errors import InvalidInput
from common.registry import Registry
from kappi.llm.base import LlmProvider
from kappi.llm.cohere_chat import COHERE_CHAT_MODELS, CohereChatProvider
from kappi.llm.extractive import ExtractiveProvider
from kappi.llm.openai_compatible import OpenAICompatibleProvider

EXTRACTIVE = "extractive"
LOCAL_PROVIDER = "local"
"""The registry name of the embedded llama.cpp server that ``ragu serve`` starts when a local model is installed."""


class LlmRegistry:
    """Looks providers up by name and validates model names; owns the providers and closes them."""

    def __init__(self, providers: Iterable[LlmProvider]) -> None:
        self._providers = Registry.of_named(providers, kind="LLM provider", code="unknown_llm_provider")

    def providers(self) -> list[str]:
        return self._providers.names()

    def default_choice(self) -> tuple[str, str]:
        """The ``(provider, model)`` a new agent gets when it names none: the embedded local model when one is
        running (it gives generated answers offline), else ``("extractive", "extractive")``."""
        if LOCAL_PROVIDER in self._providers.names():
            models = self._providers.get(LOCAL_PROVIDER).models()
            if models:
                return LOCAL_PROVIDER, models[0]
        return EXTRACTIVE, EXTRACTIVE

    def get(self, provider: str) -> LlmProvider:
        """The provider called ``provider``.

        Raises:
            InvalidInput: ``unknown_llm_provider``, listing the valid names.
        """
        return self._providers.get(provider)

    def check_model(self, provider: str, model: str) -> None:
        """Refuse a model the provider does not offer (check it when an agent is saved, not per message).

        A provider that lists no models (an OpenAI-compatible server configured without a list) accepts any
        name and leaves the verdict to its server.

        Raises:
            InvalidInput: ``unknown_llm_provider``, or ``unknown_llm_model`` listing the valid models.
        """
        valid = self.get(provider).models()
        if valid and model not in valid:
            raise InvalidInput(
                f"unknown model {model!r} for LLM provider {provider!r}; valid models: {', '.join(valid)}",
                code="unknown_llm_model",
                extra={"provider": provider, "model": model, "valid_models": valid},
            )

    async def aclose(self) -> None:
        for provider in self._providers:
            await provider.aclose()


def default_llm_registry(
    *,
    cohere_api_key: str | None = None,
    cohere_base_url: str | None = None,
    cohere_models: Sequence[str] = COHERE_CHAT_MODELS,
    openai_base_url: str | None = None,
    openai_api_key: str | None = None,
    openai_models: Sequence[str] = (),
    timeout_seconds: float = 60.0,
) -> LlmRegistry:
    """The one place that lists LLM providers: ``extractive`` always, the others when configured.

    Building it opens nothing; HTTP connections are made on first use.

    Args:
        cohere_api_key: Enables ``cohere``.
        cohere_base_url: Another Cohere API address (a proxy, a stand-in).
        cohere_models: The Cohere chat models to offer.
        openai_base_url: Enables ``openai`` against this server, e.g. ``http://localhost:11434/v1`` (Ollama).
        openai_api_key: Bearer key for that server, if it needs one.
        openai_models: The models it offers; empty lets any name through to the server.
        timeout_seconds: Longest wait for an upstream's response and for each streamed event.
    """
    providers: list[LlmProvider] = [ExtractiveProvider()]
    if cohere_api_key:
        providers.append(
            CohereChatProvider(
                api_key=cohere_api_key,
                base_url=cohere_base_url,
                models=cohere_models,
                timeout=timeout_seconds,
            )
        )
    if openai_base_url:
        providers.append(
            OpenAICompatibleProvider(
                base_url=openai_base_url,
                api_key=openai_api_key,
                models=openai_models,
                timeout=timeout_seconds,
            )
        )
    return LlmRegistry(providers)
