"""Token choice: TRT-LLM's greedy rules, seeded sampling, truncation, penalties and bans."""

from __future__ import annotations

import pytest
import torch

from server_repo.reference_kit.request import GenerationRequest
from server_repo.reference_kit.sampling import Sampler

LOGITS = torch.tensor([0.0, 3.0, 2.9, 1.0, -1.0, 2.0])


def _sampler(**options: object) -> Sampler:
    request = GenerationRequest("q", **options)
    return Sampler(request, end_id=1, prompt_ids=[3], bad_words=[], device=torch.device("cpu"))


@pytest.mark.parametrize(
    ("options", "greedy"),
    [
        ({}, True),  # TRT-LLM defaults: top_k 0, top_p 0
        ({"temperature": 0.0, "top_k": 5}, True),
        ({"top_k": 1, "temperature": 2.0}, True),
        ({"top_k": 5}, False),
        ({"top_p": 0.9}, False),
    ],
)
def test_greedy_rules(options: dict[str, float], greedy: bool) -> None:
    assert GenerationRequest("q", **options).greedy is greedy


def test_greedy_picks_argmax() -> None:
    assert _sampler().choose(LOGITS, []) == 1


def test_seeded_sampling_replays_and_seeds_differ() -> None:
    def draw(seed: int) -> list[int]:
        sampler = _sampler(temperature=5.0, top_k=6, seed=seed)
        return [sampler.choose(LOGITS, []) for _ in range(30)]

    assert draw(3) == draw(3)
    assert draw(3) != draw(4)


def test_top_k_and_top_p_truncate() -> None:
    top_k = _sampler(temperature=100.0, top_k=2, seed=1)
    assert {top_k.choose(LOGITS, []) for _ in range(50)} == {1, 2}
    top_p = _sampler(temperature=1.0, top_k=0, top_p=0.01, seed=1)
    assert {top_p.choose(LOGITS, []) for _ in range(20)} == {1}


def test_min_tokens_hides_end_id_then_releases_it() -> None:
    sampler = _sampler(min_tokens=2)
    assert sampler.choose(LOGITS, [5]) == 2
    assert sampler.choose(LOGITS, [5, 5]) == 1


def test_bad_words_are_blocked_after_their_prefix() -> None:
    request = GenerationRequest("q")
    sampler = Sampler(request, 1, [], bad_words=[[1], [4, 2]], device=torch.device("cpu"))
    assert sampler.choose(LOGITS, []) == 2
    assert sampler.choose(LOGITS, [4]) == 5


def test_penalties() -> None:
    # Repetition covers prompt tokens too: 3 -> 1.0 / 10; presence/frequency cover output only.
    assert _sampler(repetition_penalty=10.0).choose(torch.tensor([0.0, 0.5, 0.0, 1.0]), []) == 1
    frequency = _sampler(frequency_penalty=0.06)
    assert frequency.choose(LOGITS, [1]) == 1
    assert frequency.choose(LOGITS, [1, 1]) == 2
    assert _sampler(presence_penalty=0.2).choose(LOGITS, [1]) == 2
