"""What a source holds at one moment: the items a sync compares with what the collection holds from it.

Folders and web sources list their items the same way, so the sync does not care where they came from.
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from typing import Protocol

import msgspec


class SourceItem(msgspec.Struct, frozen=True, kw_only=True):
    """One file of a folder or one page of a web source, as fetched now."""

    key: str
    """Stable within its source: a folder file's path relative to the folder, or a page's normalised URL."""
    name: str
    """The document name users see (a file name, or a page's title falling back to its URL)."""
    content: bytes
    media_type: str
    """What the content is (``text/html``, ``application/pdf``, ...), for the parser."""

    @property
    def content_hash(self) -> str:
        return hashlib.sha256(self.content).hexdigest()


class SkippedItem(msgspec.Struct, frozen=True, kw_only=True):
    """Something the source holds but the sync could not take, with why in plain words (for the run's report)."""

    key: str
    code: str
    reason: str


class SourceLister(Protocol):
    """Lists a source's items as they are now; yields :class:`SkippedItem` for what it refuses or cannot read."""

    def items(self) -> AsyncIterator[SourceItem | SkippedItem]: ...
