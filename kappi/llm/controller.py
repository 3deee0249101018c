"""What the agent form offers: the LLM providers and models this kappi has, and the default for a new agent."""

from __future__ import annotations

from litestar import Controller, get
from litestar.di import NamedDependency

from kappi.llm.registry import LlmCatalog, LlmRegistry


class LlmAdminController(Controller):
    path = "/admin/llms"
    tags = ["admin"]

    @get("/", summary="LLM providers and models agents may use")
    async def catalog(self, llms: NamedDependency[LlmRegistry]) -> LlmCatalog:
        """Every provider with its models (empty: the server accepts any name) and its status (the embedded
        ``local`` model is ``starting`` while it loads, ``stopped`` if its process is down), and the provider and
        model a new agent gets when it names none."""
        return llms.catalog()
