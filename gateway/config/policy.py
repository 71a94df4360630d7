"""What one served model's requests may ask for and how long they wait on Triton: the
``[generation]`` and ``[upstream]`` tables met with the model's ``[[models]]`` entry, once.

The pipeline reads a request's limits from ``ServedRuntime.policy`` (bound when the runtime
takes its models), not from the whole settings at request time: a request's preparation sees
only what it may need, and a test builds the policy it means without a ``Settings``.
"""

from __future__ import annotations

from dataclasses import dataclass

from gateway.config.limits import GenerationSettings, UpstreamSettings
from gateway.config.models import ServedModel

__all__ = ["GenerationPolicy", "Timeouts"]


@dataclass(frozen=True)
class Timeouts:
    """How long a call waits on Triton: for its first token, between tokens, in all."""

    first_token_s: float
    token_s: float
    request_s: float

    @classmethod
    def of(cls, upstream: UpstreamSettings) -> Timeouts:
        return cls(upstream.first_token_timeout_s, upstream.token_timeout_s,
                   upstream.request_timeout_s)  # fmt: skip


@dataclass(frozen=True)
class GenerationPolicy:
    """One served model's generation limits, fixed when it is bound."""

    max_tokens: int  # the largest max_tokens a request may ask ([generation] max_tokens)
    # max_tokens when a request names none: [[models]] default_max_tokens within the cap;
    # None: the engine's max_seq_len, else the cap.
    default_max_tokens: int | None
    max_prompt_chars: int  # [generation]; the model's max_input_tokens may bound it further
    max_total_prompt_chars: int
    timeouts: Timeouts  # [upstream]: what every call of this model waits on Triton
    log_prompts: bool = False  # [observability] log_bodies: the rendered prompt is logged

    @classmethod
    def of(
        cls,
        model: ServedModel,
        generation: GenerationSettings | None = None,
        upstream: UpstreamSettings | None = None,
        log_prompts: bool = False,
    ) -> GenerationPolicy:
        """``model``'s policy under these tables (None: their defaults)."""
        generation = generation or GenerationSettings()
        default = model.default_max_tokens
        return cls(
            max_tokens=generation.max_tokens,
            default_max_tokens=None if default is None else min(default, generation.max_tokens),
            max_prompt_chars=generation.max_prompt_chars,
            max_total_prompt_chars=generation.max_total_prompt_chars,
            timeouts=Timeouts.of(upstream or UpstreamSettings()),
            log_prompts=log_prompts,
        )
