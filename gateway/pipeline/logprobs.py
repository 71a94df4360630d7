"""OpenAI's log probabilities on TensorRT-LLM: what a deployment must declare, and which
tokens a text piece holds.

TensorRT-LLM reports each generated token's log probability (``return_log_probs`` ->
``output_log_probs``) and, for engines built with ``--gather_generation_logits``, the raw
logits it was chosen from (``return_generation_logits`` -> ``generation_logits``), from which
the top alternatives come. The ensembles return no token ids: a streamed response is one token,
its text is the token's text. So log probabilities need a decoupled (streaming) deployment, and
alternatives need the engine's tokenizer to name them. What cannot be given is a 400 that says
which input, output or setting is missing (docs/triton-contract.md section 8).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

import numpy as np

from gateway.errors import InvalidRequest, UpstreamFailed
from gateway.families.calls import Scored, TokenLogprob
from gateway.families.vocabulary import Vocabulary
from gateway.served import ServedRuntime
from gateway.triton.contract import ModelContract

LOG_PROBS_FLAG = "return_log_probs"
LOGITS_FLAG = "return_generation_logits"


@dataclass(frozen=True)
class LogprobsAsked:
    """What a request asked for: ``top`` alternatives per token; ``with_chosen``: the chosen
    token is always among them (legacy completions, where OpenAI returns up to logprobs + 1)."""

    top: int
    with_chosen: bool = False
    vocabulary: Vocabulary | None = None

    @property
    def flags(self) -> tuple[str, ...]:
        return (LOG_PROBS_FLAG, LOGITS_FLAG) if self.top else (LOG_PROBS_FLAG,)

    def token(
        self, text: str, log_prob: float | None, logits: np.ndarray[Any, Any] | None
    ) -> TokenLogprob:
        """One streamed token, from what its response carried."""
        if log_prob is None:
            raise UpstreamFailed("Triton was asked for output_log_probs and returned none")
        top: tuple[tuple[str, float], ...] = ()
        if self.top and self.vocabulary is not None:
            if logits is None:
                raise UpstreamFailed("Triton was asked for generation_logits and returned none")
            top = self.vocabulary.top(logits, self.top)
        if self.with_chosen and all(name != text for name, _ in top):
            top = (*top, (text, log_prob))
        return TokenLogprob(text, log_prob, top)


async def logprobs_asked(
    served: ServedRuntime,
    contract: ModelContract,
    top: int | None,
    param: str,
    with_chosen: bool = False,
) -> LogprobsAsked | None:
    """None when not asked (``top`` None); otherwise what the deployment will be asked for,
    after checking it can answer. ``param`` names the request field in the errors."""
    if top is None:
        return None
    model = served.config.id
    missing = _missing(contract, LOG_PROBS_FLAG, "output_log_probs")
    if missing:
        raise _refusal(f"model '{model}''s Triton deployment does not declare {missing}", param)
    if not contract.decoupled:
        raise _refusal(
            f"model '{model}' is not served by a decoupled (streaming) Triton deployment: each "
            "token's log probability needs one response per token",
            param,
        )
    if not top:
        return LogprobsAsked(0, with_chosen)
    missing = _missing(contract, LOGITS_FLAG, "generation_logits")
    if missing:
        raise _refusal(
            f"top alternatives need generation logits: model '{model}''s Triton deployment does "
            f"not declare {missing} (an engine built with --gather_generation_logits)",
            param,
        )
    vocabulary = await served.vocabulary()
    if vocabulary is None:
        raise _refusal(
            f"top alternatives are named by the engine's tokenizer: model '{model}' has none "
            "(set 'tokenizer' in its [[models]] entry)",
            param,
        )
    return LogprobsAsked(top, with_chosen, vocabulary)


def _missing(contract: ModelContract, flag: str, output: str) -> str:
    names = [f"the input '{flag}'"] if not contract.declares(flag) else []
    names += [f"the output '{output}'"] if output not in contract.outputs else []
    return " or ".join(names)


def _refusal(message: str, param: str) -> InvalidRequest:
    return InvalidRequest(message, param=param, code="unsupported_parameter")


class ScoredText:
    """Pairs the text that leaves the relay with the tokens that wrote it.

    Tokens come in the order Triton streamed them, each with its text (``add``); the text
    that is let out (``emit``) is always a prefix of theirs joined: the stop-string matcher
    only holds text back or cuts it. A token goes out with the piece that lets out its first
    character; one cut off entirely by a stop string never goes out, and neither do empty
    tokens (an end-of-sequence token) after the last text.
    """

    def __init__(self) -> None:
        self._pending: deque[tuple[int, TokenLogprob]] = deque()
        self._written = 0  # characters of token text seen
        self._emitted = 0  # characters let out

    def add(self, token: TokenLogprob) -> None:
        self._pending.append((self._written, token))
        self._written += len(token.token)

    def emit(self, text: str) -> Scored:
        self._emitted += len(text)
        tokens = []
        while self._pending and self._pending[0][0] < self._emitted:
            tokens.append(self._pending.popleft()[1])
        return Scored(text, tuple(tokens))

    def end(self, text: str) -> Scored:
        """The last piece, with the tokens it lets out; whatever is still held (tokens a
        stop string cut off, empty ones after the last text) is dropped."""
        last = self.emit(text)
        self._pending.clear()
        return last
