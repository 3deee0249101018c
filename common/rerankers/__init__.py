"""Rerankers behind one port (:mod:`common.rerankers.base`), listed in :func:`default_rerankers`."""

from common.rerankers.base import Ranked, Reranker, RerankerProvider, RerankerRegistry
from common.rerankers.registry import default_rerankers

__all__ = ["Ranked", "Reranker", "RerankerProvider", "RerankerRegistry", "default_rerankers"]
