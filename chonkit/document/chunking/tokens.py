"""How chunk sizes are measured: in characters, or in the target embedding model's own tokens."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable


class TokenCounter(Protocol):
    """Counts tokens exactly as the target embedding model will see them.

    Batched because every tokenizer call has a fixed cost and a document has thousands of sentences.
    The production counter wraps the model's HuggingFace ``tokenizers`` tokenizer with special tokens
    excluded and truncation off: a truncating counter would hide the very chunks we must report.
    """

    def count(self, texts: Sequence[str]) -> list[int]:
        """Tokens in each text, in order."""
        ...


@runtime_checkable
class TokenOffsets(TokenCounter, Protocol):
    """A :class:`TokenCounter` that can also say where each token sits in its text (optional).

    With it, windows that do not snap to sentences cut at exact token boundaries; without it they cut
    between words (or proportionally inside a word longer than a whole chunk).
    """

    def offsets(self, texts: Sequence[str]) -> list[list[tuple[int, int]]]:
        """``(start, end)`` character offsets of each token of each text, special tokens excluded."""
        ...


class CharacterCounter:
    """A :class:`TokenCounter` whose tokens are characters, for collections sized in characters."""

    def count(self, texts: Sequence[str]) -> list[int]:
        return [len(text) for text in texts]
