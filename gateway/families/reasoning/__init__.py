"""Reasoning formats: how a reasoning model's output splits into its reasoning and its answer.

One small pure module per format (``deepseek_r1``, ``qwen3``), each a ``ReasoningFormat`` that
makes a streaming ``ThinkSplitter`` per choice; ``REASONING_PARSERS`` names them as vLLM's
``--reasoning-parser`` does, for a served model's ``reasoning_parser`` in ``[[models]]``.
"""

from __future__ import annotations

from gateway.families.reasoning.base import ReasoningFormat, Split, ThinkSplitter
from gateway.families.reasoning.deepseek_r1 import DEEPSEEK_R1
from gateway.families.reasoning.qwen3 import QWEN3

REASONING_PARSERS: dict[str, ReasoningFormat] = {
    DEEPSEEK_R1.name: DEEPSEEK_R1,
    QWEN3.name: QWEN3,
}

__all__ = ["REASONING_PARSERS", "ReasoningFormat", "Split", "ThinkSplitter"]
