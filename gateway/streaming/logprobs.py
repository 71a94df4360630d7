"""Token log probabilities in OpenAI's two shapes: chat's ``logprobs.content`` entries and the
legacy completions' parallel lists (``tokens``, ``token_logprobs``, ``top_logprobs``,
``text_offset``). JSON has no infinity: a token with no probability at all is reported as
-9999.0, as vLLM does."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gateway.families.calls import TokenLogprob

FLOOR = -9999.0


def _value(logprob: float) -> float:
    return logprob if logprob > FLOOR else FLOOR  # also maps NaN to the floor


def _alternative(token: str, logprob: float) -> dict[str, Any]:
    return {"token": token, "logprob": _value(logprob), "bytes": list(token.encode("utf-8"))}


def chat_logprobs(tokens: Sequence[TokenLogprob]) -> dict[str, Any]:
    """A chat choice's (or chunk's) ``logprobs`` object."""
    content = [
        {
            **_alternative(token.token, token.logprob),
            "top_logprobs": [_alternative(name, value) for name, value in token.top],
        }
        for token in tokens
    ]
    return {"content": content, "refusal": None}


class CompletionLogprobs:
    """A legacy completion choice's ``logprobs``; ``text_offset`` counts characters from the
    start of the choice's text (its echoed prompt included), across the chunks of a stream."""

    def __init__(self, offset: int = 0) -> None:
        self.offset = offset

    def __call__(self, tokens: Sequence[TokenLogprob]) -> dict[str, Any]:
        offsets = []
        for token in tokens:
            offsets.append(self.offset)
            self.offset += len(token.token)
        return {
            "tokens": [token.token for token in tokens],
            "token_logprobs": [_value(token.logprob) for token in tokens],
            "top_logprobs": [
                {name: _value(value) for name, value in token.top} for token in tokens
            ],
            "text_offset": offsets,
        }
