"""Choose the next token the way TensorRT-LLM's sampling layers do, on one logits row.

Order: penalties and bans on the raw logits (repetition over prompt + output, presence and
frequency over the output, ``min_tokens`` hides ``end_id``, bad word sequences are blocked), then
greedy argmax when the request is greedy, else temperature -> top-k -> top-p -> a draw from a
``torch.Generator`` seeded with the request's seed (so a seed replays exactly on CPU).
Stopping (EOS, stop words, max_tokens) is the step loop's job, not this module's.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import torch

from server_repo.reference_kit.request import GenerationRequest


class Sampler:
    """Per-request token chooser; holds the seeded generator and the ban lists."""

    def __init__(
        self,
        request: GenerationRequest,
        end_id: int,
        prompt_ids: Sequence[int],
        bad_words: Sequence[Sequence[int]],
        device: torch.device,
    ) -> None:
        self.request = request
        self.end_id = end_id
        self.prompt_ids = list(prompt_ids)
        self.bad_words = [list(word) for word in bad_words if word]
        self.generator: torch.Generator | None = None
        if not request.greedy:
            self.generator = torch.Generator(device=device)
            self.generator.manual_seed(int(request.seed) & 0xFFFF_FFFF_FFFF_FFFF)

    def choose(self, logits: torch.Tensor, generated: Sequence[int]) -> int:
        """The next token id for a ``[vocab]`` logits row given the tokens generated so far."""
        logits = self._adjust(logits.float().clone(), generated)
        if self.generator is None:
            return int(torch.argmax(logits).item())
        probs = self._filtered_probs(logits / self.request.temperature)
        return int(torch.multinomial(probs, 1, generator=self.generator).item())

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
