"""Every family's tiny reference model answers as Hugging Face ``generate`` does on the same
checkpoint, and its answer depends on the image: the contract each ``test_arch_*`` file's
family-specific checks build on. A new family is covered by adding it to ``family_samples``."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from server_repo.reference_kit import ReferenceEngine
from tests.server_repo.family_samples import FAMILIES, family_media
from tests.server_repo.reference_kit.hf_oracle import hf_greedy, kit_greedy


@pytest.mark.parametrize("family", FAMILIES)
def test_greedy_matches_hf_generate_and_follows_the_image(
    family_engine: Callable[[str], ReferenceEngine], family: str
) -> None:
    engine = family_engine(family)
    answers = []
    for seed in (0, 1):
        request = family_media(family, seed).request(family)
        answers.append(kit_greedy(engine, request))
        assert answers[-1] == hf_greedy(engine, request)
    assert answers[0] != answers[1]
