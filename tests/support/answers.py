"""What tests of a model's answers share."""

from __future__ import annotations

import msgspec

from kappi.chat.answering import DECLINED_FALLBACK, UNSUPPORTED_FALLBACK

QUOTED_INSTEAD = tuple(msgspec.to_builtins(f) for f in (UNSUPPORTED_FALLBACK, DECLINED_FALLBACK))
"""The two ``llm_fallback`` values, as the wire carries them, of an answer where the agent's own model answered
and a quote of the passage that answers took its place."""
