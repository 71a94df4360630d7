"""Choose the next token the way TensorRT-LLM's sampling layers do, on one logits row.

Order: penalties and bans on the raw logits (repetition over prompt + output, presence and
frequency over the output, ``min_tokens`` hides ``end_id``, bad word sequences are blocked), then
greedy argmax when the request is greedy, else temperature -> top-k -> top-p -> a draw from a
``torch.Generator`` seeded with the request's seed (so a seed replays exactly on CPU).
Stopping (EOS, stop words, max_tokens) is the step loop's job, not this module's.
With guided decoding (``guided.GuidedMask``) the tokens the grammar forbids are set to -inf
first, on the model's logits, as TensorRT-LLM's ``GuidedDecoder::execute`` does before its
decoder's penalty and sampling layers run (-inf stays -inf through every penalty); the chosen
token then advances the grammar. Should ``min_tokens`` ban the only token a complete grammar
allows (``end_id``), the grammar wins and generation ends.
(TensorRT-LLM's penalty kernel, ``penaltyKernels.cu`` @249d93d5, scales by the temperature
*before* the repetition, presence and frequency penalties and counts prompt tokens for all
three; the two orders agree unless penalties meet a temperature other than 1.)

Log probabilities (``return_log_probs``) are those of TensorRT-LLM's decoder, which scores the
token under the *processed* distribution ``q = softmax(processed logits)`` over the whole
vocabulary, the processed logits being the adjusted ones above multiplied by
``1 / (temperature + 1e-6)`` (its penalty kernel; skipped at temperature 1, applied for greedy
too, so temperature 0 gives log probs of about 0). Its top-k kernel (every ``top_k > 0``, and
greedy ``top_k 0, top_p 0``, which it runs as ``top_k 1``) reports ``log q[token]``, minus
``log`` of the top-k mass when ``normalize_log_probs`` is on (so greedy gives exactly 0); its
top-p kernel (``top_k 0``) reports ``log q[token]``. ``cum_log_probs`` always sums the
unnormalized ``log q[token]``. ``generation_logits`` are the raw model logits, before any of it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from server_repo.reference_kit.guided import GuidedMask
from server_repo.reference_kit.request import GenerationRequest

# TensorRT-LLM's penalty kernel scales by ``1 / (temperature + 1e-6)`` unless the temperature is
# within 1e-9 of 1.
TEMPERATURE_EPSILON = 1e-6


def inverse_temperature(temperature: float) -> float:
    """The factor TensorRT-LLM multiplies the logits by for ``temperature``."""
    if abs(temperature - 1.0) < 1e-9:
        return 1.0
    return 1.0 / (temperature + TEMPERATURE_EPSILON)


@dataclass(frozen=True)
class Sampled:
    """A chosen token and, when the request asked, what TensorRT-LLM reports along with it.

    ``log_prob``: the ``output_log_probs`` entry; ``full_log_prob``: the unnormalized
    ``log q[token]`` that ``cum_log_probs`` adds; ``logits``: a float32 copy of the raw row.
    """

    token: int
    log_prob: float | None = None
    full_log_prob: float | None = None
    logits: torch.Tensor | None = None


class Sampler:
    """Per-request token chooser; holds the seeded generator and the ban lists."""

    def __init__(
        self,
        request: GenerationRequest,
        end_id: int,
        prompt_ids: Sequence[int],
        bad_words: Sequence[Sequence[int]],
        device: torch.device,
        normalize_log_probs: bool = False,
        guide: GuidedMask | None = None,
    ) -> None:
        self.request = request
        self.guide = guide
        self.normalize_log_probs = normalize_log_probs
        self.inverse_temperature = inverse_temperature(request.temperature)
        self.end_id = end_id
        self.prompt_ids = list(prompt_ids)
        self.bad_words = [list(word) for word in bad_words if word]
        self.generator: torch.Generator | None = None
        if not request.greedy:
            self.generator = torch.Generator(device=device)
            self.generator.manual_seed(int(request.seed) & 0xFFFF_FFFF_FFFF_FFFF)

    def choose(self, logits: torch.Tensor, generated: Sequence[int]) -> int:
        """The next token id for a ``[vocab]`` logits row given the tokens generated so far."""
        return self.sample(logits, generated).token

    def sample(self, logits: torch.Tensor, generated: Sequence[int]) -> Sampled:
        """``choose``, plus the log probs and raw logits the request asked for (only those)."""
        request = self.request
        adjusted = logits.float().clone()
        if self.guide is not None:
            self.guide.apply(adjusted)
            masked = adjusted.clone()
            adjusted = self._adjust(adjusted, generated)
            if not bool(torch.isfinite(adjusted).any()):
                adjusted = masked  # min_tokens banned the grammar's only way out
        else:
            adjusted = self._adjust(adjusted, generated)
        scaled: torch.Tensor | None = None
        if self.generator is None:
            token = int(torch.argmax(adjusted).item())
        else:
            scaled = adjusted * self.inverse_temperature
            probs = self._filtered_probs(scaled)
            token = int(torch.multinomial(probs, 1, generator=self.generator).item())
        if self.guide is not None:
            self.guide.accept(token)
        if not (request.return_log_probs or request.return_generation_logits):
            return Sampled(token)
        log_prob = full_log_prob = None
        if request.return_log_probs:
            if scaled is None:
                scaled = adjusted * self.inverse_temperature
            log_prob, full_log_prob = self._log_probs(scaled, token)
        raw = None
        if request.return_generation_logits:
            raw = logits.detach().to("cpu", torch.float32, copy=True)
        return Sampled(token, log_prob, full_log_prob, raw)

    def _top_k_kernel_k(self) -> int:
        """The k TensorRT-LLM's top-k kernel runs with; 0 means its top-p kernel does."""
        top_k, top_p = self.request.top_k, self.request.top_p
        return 1 if top_k == 0 and top_p == 0 else top_k

    def _log_probs(self, scaled: torch.Tensor, token: int) -> tuple[float, float]:
        """(reported, unnormalized) log prob of ``token`` under the processed distribution."""
        log_q = torch.log_softmax(scaled, dim=-1)
        full = float(log_q[token])
        k = self._top_k_kernel_k()
        if not self.normalize_log_probs or k == 0:
            return full, full
        top = torch.topk(log_q, min(k, log_q.numel())).values
        return full - float(torch.logsumexp(top, dim=-1)), full

    def _adjust(self, logits: torch.Tensor, generated: Sequence[int]) -> torch.Tensor:
        request = self.request
        if request.repetition_penalty != 1.0:
            seen = torch.tensor(sorted(set(self.prompt_ids) | set(generated)), dtype=torch.long)
            seen = seen[seen < logits.numel()].to(logits.device)
            picked = logits[seen]
            scaled = torch.where(
                picked > 0, picked / request.repetition_penalty, picked * request.repetition_penalty
            )
            logits[seen] = scaled
        if generated and (request.presence_penalty or request.frequency_penalty):
            for token, count in Counter(generated).items():
                logits[token] -= request.presence_penalty + request.frequency_penalty * count
        if len(generated) < request.min_tokens and 0 <= self.end_id < logits.numel():
            logits[self.end_id] = float("-inf")
        for word in self.bad_words:
            prefix = word[:-1]
            if not prefix or list(generated[-len(prefix) :]) == prefix:
                logits[word[-1]] = float("-inf")
        return logits

    def _filtered_probs(self, logits: torch.Tensor) -> torch.Tensor:
        """Softmax after top-k then top-p truncation (TRT-LLM applies them in this order)."""
        top_k, top_p = self.request.top_k, self.request.top_p
        if top_k > 0:
            kth = torch.topk(logits, min(top_k, logits.numel())).values[-1]
            logits = logits.masked_fill(logits < kth, float("-inf"))
        probs = torch.softmax(logits, dim=-1)
        if 0.0 < top_p < 1.0:
            sorted_probs, order = torch.sort(probs, descending=True)
            cumulative = torch.cumsum(sorted_probs, dim=-1)
            drop = cumulative - sorted_probs >= top_p
            sorted_probs = sorted_probs.masked_fill(drop, 0.0)
            probs = torch.zeros_like(probs).scatter(0, order, sorted_probs)
        return probs / probs.sum()
