"""Log probabilities and generation logits, as TensorRT-LLM's decoder reports them.

The sampler's arithmetic is pinned on a fixed logits row (processed distribution, the
``normalize_log_probs`` switch, temperature, the top-k/top-p kernels). The engine is then
checked against an independent oracle: Hugging Face ``generate(output_logits=True)`` on the
same checkpoint, whose raw logits must be the kit's ``generation_logits`` and whose
``log_softmax`` at the chosen tokens must be the kit's greedy log probs.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
import torch

from server_repo.reference_kit import GenerationRequest, ReferenceEngine
from server_repo.reference_kit.request import Step
from server_repo.reference_kit.sampling import Sampler
from tests.server_repo.family_samples import family_media
from tests.server_repo.reference_kit.hf_oracle import hf_greedy_logits
from tests.server_repo.samples import llava_pixels

LOGITS = torch.tensor([0.0, 3.0, 2.9, 1.0, -1.0, 2.0])
LOG_Q = torch.log_softmax(LOGITS, dim=-1)


def _sampler(normalize: bool = False, **options: object) -> Sampler:
    request = GenerationRequest("q", return_log_probs=True, **options)
    return Sampler(request, 0, [], [], torch.device("cpu"), normalize_log_probs=normalize)


def test_nothing_is_computed_unless_asked() -> None:
    sampled = Sampler(GenerationRequest("q"), 0, [], [], torch.device("cpu")).sample(LOGITS, [])
    assert (sampled.token, sampled.log_prob, sampled.full_log_prob, sampled.logits) == (
        1, None, None, None,
    )  # fmt: skip


def test_greedy_reports_the_raw_log_softmax_unless_normalized() -> None:
    plain = _sampler().sample(LOGITS, [])
    assert plain.token == 1 and plain.log_prob == pytest.approx(float(LOG_Q[1]))
    # normalize_log_probs divides by the top-k mass: greedy (k = 1) always gives 0, while
    # cum_log_probs still sums the unnormalized value (TensorRT-LLM's topKStage2Sampling).
    normalized = _sampler(normalize=True).sample(LOGITS, [])
    assert normalized.log_prob == 0.0
    assert normalized.full_log_prob == pytest.approx(float(LOG_Q[1]))


def test_temperature_scales_the_scored_distribution_even_when_greedy() -> None:
    warm = _sampler(top_k=1, temperature=0.5).sample(LOGITS, [])
    expected = torch.log_softmax(LOGITS / (0.5 + 1e-6), dim=-1)[1]
    assert warm.token == 1 and warm.log_prob == pytest.approx(float(expected))
    cold = _sampler(temperature=0.0).sample(LOGITS, [])  # logits x 1e6: the argmax takes it all
    assert cold.token == 1 and cold.log_prob == pytest.approx(0.0, abs=1e-3)


def test_top_k_normalizes_over_the_top_k_and_top_p_never() -> None:
    for seed in range(5):
        top_k = _sampler(normalize=True, top_k=3, seed=seed).sample(LOGITS, [])
        assert top_k.token in (1, 2, 5)
        mass = torch.logsumexp(LOG_Q[[1, 2, 5]], dim=0)
        assert top_k.log_prob == pytest.approx(float(LOG_Q[top_k.token] - mass), abs=1e-6)
        assert top_k.full_log_prob == pytest.approx(float(LOG_Q[top_k.token]), abs=1e-6)
        top_p = _sampler(normalize=True, top_p=0.9, seed=seed).sample(LOGITS, [])
        assert top_p.log_prob == top_p.full_log_prob
        assert top_p.log_prob == pytest.approx(float(LOG_Q[top_p.token]), abs=1e-6)


def test_log_probs_follow_the_processed_logits_and_logits_stay_raw() -> None:
    request = GenerationRequest(
        "q", min_tokens=1, return_log_probs=True, return_generation_logits=True
    )
    row = LOGITS.clone()
    sampled = Sampler(request, 1, [], [], torch.device("cpu")).sample(row, [])
    masked = LOGITS.clone()
    masked[1] = float("-inf")  # min_tokens hides end_id 1
    assert sampled.token == 2
    assert sampled.log_prob == pytest.approx(float(torch.log_softmax(masked, dim=-1)[2]))
    assert sampled.logits is not None and torch.equal(sampled.logits, LOGITS)
    row[0] = 99.0
    assert sampled.logits[0] == 0.0  # a copy, not a view of the model's output


def _scored(engine: ReferenceEngine, request: GenerationRequest) -> list[Step]:
    return list(engine.generate(request))


def _check_against_hf(engine: ReferenceEngine, request: GenerationRequest) -> list[Step]:
    steps = _scored(engine, request)
    tokens, hf_logits = hf_greedy_logits(engine, request)
    assert [step.token_id for step in steps] == tokens
    log_q = torch.log_softmax(hf_logits, dim=-1)
    expected = log_q[torch.arange(len(tokens)), torch.tensor(tokens)].numpy()
    np.testing.assert_allclose([step.log_prob for step in steps], expected, atol=1e-4)
    np.testing.assert_allclose(
        [step.cum_log_prob for step in steps], np.cumsum(expected), atol=1e-4
    )
    logits = np.stack([step.logits for step in steps])
    assert logits.dtype == np.float32 and logits.shape == tuple(hf_logits.shape)
    np.testing.assert_allclose(logits, hf_logits.numpy(), atol=1e-4)
    for row, hf_row in zip(logits, log_q, strict=True):  # top_logprobs come from here
        ours = torch.log_softmax(torch.from_numpy(row), dim=-1)
        top = torch.topk(ours, 5)
        hf_top = torch.topk(hf_row, 5)
        assert top.indices.tolist() == hf_top.indices.tolist()
        np.testing.assert_allclose(top.values, hf_top.values, atol=1e-4)
    return steps


def test_llava_greedy_log_probs_and_logits_match_hf(llava_engine: ReferenceEngine) -> None:
    request = GenerationRequest(
        "What is shown here?", 8, images=llava_pixels(3), extra_id=7,
        return_log_probs=True, return_generation_logits=True,
    )  # fmt: skip
    first = _check_against_hf(llava_engine, request)
    again = llava_engine.generate(request)  # its prompt's blocks are cached now (extra_id)
    log_probs = [step.log_prob for step in again]
    assert again.stats.reused_blocks > 0
    np.testing.assert_allclose(log_probs, [step.log_prob for step in first], atol=1e-5)


@pytest.mark.parametrize("family", ["qwen2_vl", "blip2_t5"])
def test_family_greedy_log_probs_match_hf(
    family_engine: Callable[[str], ReferenceEngine], family: str
) -> None:
    """M-RoPE positions (Qwen2-VL) and the encoder-decoder loop (BLIP-2 T5) score the same."""
    request = family_media(family, 0).request(
        family, 6, return_log_probs=True, return_generation_logits=True
    )
    _check_against_hf(family_engine(family), request)


def test_sampled_log_probs_are_the_processed_distribution(llava_engine: ReferenceEngine) -> None:
    """A seeded sampled run scores each token under softmax(raw logits / temperature)."""
    request = GenerationRequest(
        "Tell me more.", 6, temperature=0.7, top_k=20, seed=5,
        return_log_probs=True, return_generation_logits=True,
    )  # fmt: skip
    steps = _scored(llava_engine, request)
    plain = _scored(llava_engine, GenerationRequest("Tell me more.", 6, temperature=0.7,
                                                    top_k=20, seed=5))  # fmt: skip
    assert [s.token_id for s in steps] == [s.token_id for s in plain]  # scoring draws nothing
    assert all(s.log_prob is None and s.logits is None for s in plain)
    for step in steps:
        scaled = torch.from_numpy(step.logits) / (0.7 + 1e-6)
        expected = torch.log_softmax(scaled, dim=-1)[step.token_id]
        assert step.log_prob == pytest.approx(float(expected), abs=1e-4)
