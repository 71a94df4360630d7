"""Tiny checkpoints of the family architectures: seeded, byte-identical, small and quick."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from transformers import AutoConfig, AutoTokenizer

from server_repo.reference_kit.archs import get_arch
from server_repo.reference_kit.weights import write_tiny_checkpoint
from tests.server_repo.family_samples import FAMILIES


@pytest.mark.parametrize("family", FAMILIES)
def test_generation_is_deterministic_small_and_loadable(family: str, tmp_path: Path) -> None:
    arch = get_arch(family)
    started = time.monotonic()
    write_tiny_checkpoint(arch, tmp_path / "a")
    elapsed = time.monotonic() - started
    write_tiny_checkpoint(arch, tmp_path / "b")
    names = sorted(p.name for p in (tmp_path / "a").iterdir())
    assert names == sorted(p.name for p in (tmp_path / "b").iterdir())
    for name in names:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
    assert elapsed < 10
    assert sum(p.stat().st_size for p in (tmp_path / "a").iterdir()) < 4_000_000
    config = AutoConfig.from_pretrained(tmp_path / "a")
    assert config.architectures == [arch.model_class.__name__]
    assert len(AutoTokenizer.from_pretrained(tmp_path / "a")) < 700
