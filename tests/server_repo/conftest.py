"""Fixtures for the reference models: in-process engines over the session's tiny checkpoints.

They load from the same ``reference_cache`` folder as the session's tritonserver, so in-process
answers can be compared with Triton's. ``fresh_engine`` shares the loaded weights but starts
with an empty prefix cache, for tests that count reused blocks.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from server_repo.reference_kit import ReferenceEngine, load_engine
from server_repo.reference_kit.whisper import WhisperEngine, load_whisper_engine


@pytest.fixture(scope="session")
def llava_engine(reference_cache: Path) -> ReferenceEngine:
    return load_engine("llava", cache_dir=reference_cache, device="cpu")


@pytest.fixture(scope="session")
def onevision_engine(reference_cache: Path) -> ReferenceEngine:
    return load_engine("llava_onevision", cache_dir=reference_cache, device="cpu")


@pytest.fixture(scope="session")
def whisper_engine(reference_cache: Path) -> WhisperEngine:
    return load_whisper_engine(cache_dir=reference_cache, device="cpu")


@pytest.fixture
def fresh_engine(
    llava_engine: ReferenceEngine, onevision_engine: ReferenceEngine
) -> Callable[..., ReferenceEngine]:
    def make(family: str, tokens_per_block: int = 16, max_cached_tokens: int = 65536):
        base = llava_engine if family == "llava" else onevision_engine
        return ReferenceEngine(base.arch, base.assets, tokens_per_block, max_cached_tokens)

    return make


@pytest.fixture(scope="session")
def family_engine(reference_cache: Path) -> Callable[[str], ReferenceEngine]:
    """In-process engines for the other reference families, loaded once each on first use."""
    engines: dict[str, ReferenceEngine] = {}

    def get(family: str) -> ReferenceEngine:
        if family not in engines:
            engines[family] = load_engine(family, cache_dir=reference_cache, device="cpu")
        return engines[family]

    return get
