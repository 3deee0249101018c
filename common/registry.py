"""Providers looked up by the name an identity record or an agent stores (``"pgvector"``, ``"local"``, ``"cohere"``).

One small generic registry for vector stores, embedders and LLMs: a name nobody registered is a user's
mistake (a typo in a request, a provider not configured here), answered as ``InvalidInput`` with a stable code
that lists the valid names.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Generic, Protocol, TypeVar

from common.errors import InvalidInput


class Named(Protocol):
    @property
    def name(self) -> str: ...


T = TypeVar("T")
NamedT = TypeVar("NamedT", bound=Named)


class Registry(Generic[T]):
    """``kind`` names the providers in errors ("vector provider"); ``code`` is the error's code."""

    def __init__(self, entries: Mapping[str, T], *, kind: str, code: str) -> None:
        self._entries = dict(entries)
        self.kind = kind
        self.code = code

    @classmethod
    def of_named(cls, providers: Iterable[NamedT], *, kind: str, code: str) -> Registry[NamedT]:
        """Providers that carry their own name; one name twice is a programming error, not a user's."""
        found: dict[str, NamedT] = {}
        for provider in providers:
            if provider.name in found:
                raise ValueError(f"{kind} {provider.name!r} registered twice")
            found[provider.name] = provider
        return Registry(found, kind=kind, code=code)

    def names(self) -> list[str]:
        return sorted(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[T]:
        return iter(self._entries.values())

    def get(self, name: str) -> T:
        """The provider called ``name``.

        Raises:
            InvalidInput: :attr:`code`, listing the valid names.
        """
        if (found := self._entries.get(name)) is None:
            valid = self.names()
            raise InvalidInput(
                f"unknown {self.kind} {name!r}; valid: {', '.join(valid) or 'none configured'}",
                code=self.code,
                extra={"provider": name, "valid_providers": valid},
            )
        return found
