"""A typed async client for Ragu: kappi's user API, chonkit's admin API, and kappi as a ``Retriever``.

Depends only on httpx and msgspec; tokens are the caller's (a string, or a callable returning a fresh one).
"""

from ragu_client.chonkit import ChonkitClient
from ragu_client.http import RaguError, Token
from ragu_client.kappi import KappiClient
from ragu_client.retriever import Document, KappiRetriever, RagInputFilter, Retriever, with_context

__all__ = [
    "ChonkitClient",
    "Document",
    "KappiClient",
    "KappiRetriever",
    "RagInputFilter",
    "RaguError",
    "Retriever",
    "Token",
    "with_context",
]
