"""Kappi's language-model layer: one port, an offline extractive default, Cohere and OpenAI-compatible servers."""

from kappi.llm.base import ChatMessage, LlmEvent, LlmProvider, LlmRequest, Passage, Token, Usage, complete
from kappi.llm.prompt import (
    DEFAULT_CONTEXT_TEMPLATE,
    build_messages,
    render_context,
    system_prompt_with_context,
    validate_context_template,
)
from kappi.llm.registry import LlmRegistry, default_llm_registry

__all__ = [
    "DEFAULT_CONTEXT_TEMPLATE",
    "ChatMessage",
    "LlmEvent",
    "LlmProvider",
    "LlmRegistry",
    "LlmRequest",
    "Passage",
    "Token",
    "Usage",
    "build_messages",
    "complete",
    "default_llm_registry",
    "render_context",
    "system_prompt_with_context",
    "validate_context_template",
]
