"""Qwen3's format: an optional ``<think>...</think>`` block at the start of the output.

Qwen3 (and Qwen3-VL) write ``<think>`` first when they reason and nothing of the kind when
thinking is switched off (their template's ``enable_thinking``), so the output is reasoning
only when it opens with ``<think>`` (leading whitespace allowed), up to ``</think>``;
otherwise it is all answer. A ``<think>`` later in the answer is answer text. A block cut by
``max_tokens`` before its ``</think>`` stays reasoning, streamed or not (vLLM's non-streamed
``qwen3`` parser would call it content; its streamed one, reasoning: one reading here).
"""

from __future__ import annotations

from gateway.families.reasoning.base import ReasoningFormat

QWEN3 = ReasoningFormat(name="qwen3", starts_in_reasoning=False)
