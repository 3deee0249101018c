"""Follow-up questions, condensed with the conversation before retrieval.

"And the maximum?" or "How do I change it?" retrieve nothing useful alone: their subject is in an earlier turn.
An LLM rewrite ("standalone question") costs seconds of a small local model on two cores before retrieval can
even start, so the condensation is deterministic: a question that leans on the conversation (it is short in
content words, or it refers back with a pronoun) is searched together with the user's previous question. The
model still answers the question as asked, with the conversation as history; only retrieval reads the
condensed text.
"""

from __future__ import annotations

from collections.abc import Sequence

from kappi.llm.base import ChatMessage
from kappi.llm.words import question_stems

SELF_CONTAINED_STEMS = 4
"""A question with at least this many content words (and no word referring back) is searched as it is."""
_REFERRING_TEXT = """
    it its it's this that these those they them their there he she his her such former latter one ones same
    also too else other another above previous
"""
REFERRING = frozenset(_REFERRING_TEXT.split())
"""Words by which a question points at something said before."""


def refers_back(question: str) -> bool:
    """Whether the question leans on the conversation for its subject."""
    words = {w.strip(".,;:!?\"'()").lower() for w in question.split()}
    return bool(words & REFERRING) or len(question_stems(question)) < SELF_CONTAINED_STEMS


def condensed_question(question: str, history: Sequence[ChatMessage]) -> str:
    """What retrieval searches for: the question, preceded by the previous user question when it refers back."""
    previous = next((m.content for m in reversed(history) if m.role == "user" and m.content.strip()), None)
    if previous is None or not refers_back(question):
        return question
    return f"{previous.strip()}\n{question.strip()}"
