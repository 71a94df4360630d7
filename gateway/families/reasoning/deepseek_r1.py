"""DeepSeek-R1's format: generation starts inside the reasoning; ``</think>`` ends it.

DeepSeek-R1's chat template ends the prompt with ``<think>\\n`` (its earlier templates let the
model write the ``<think>`` itself; one at the very start is taken as markup either way), so
everything up to the first ``</think>`` is reasoning and the rest is the answer. An output
that never closes its reasoning (cut by ``max_tokens``) is all reasoning, as vLLM's
``deepseek_r1`` parser reads it. Use this format too for templates that open the reasoning
block in the prompt (Qwen3 "thinking" checkpoints whose template writes ``<think>``).
"""

from __future__ import annotations

from gateway.families.reasoning.base import ReasoningFormat

DEEPSEEK_R1 = ReasoningFormat(name="deepseek_r1", starts_in_reasoning=True)
