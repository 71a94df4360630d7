"""The stack ``bench real-shape`` measures: its model folder, the variables its Triton gets."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.shaped_stack import (
    REFERENCE_REPOSITORY,
    TRITON_MODEL,
    model_repository,
    triton_environment,
    with_parameters,
)


def test_a_config_parameter_is_replaced_or_the_bench_fails() -> None:
    config = (REFERENCE_REPOSITORY / TRITON_MODEL / "config.pbtxt").read_text()
    changed = with_parameters(config, {"max_cached_tokens": "0"})
    assert 'key: "max_cached_tokens"\n  value: { string_value: "0" }' in changed
    assert changed.replace('string_value: "0" }', 'string_value: "65536" }', 1) == config
    with pytest.raises(ValueError, match="no parameter 'renamed'"):
        with_parameters(config, {"renamed": "0"})


def test_the_repository_copy_turns_the_prefix_cache_off_unless_asked(tmp_path: Path) -> None:
    off = model_repository(tmp_path / "off", kv_reuse=False) / TRITON_MODEL
    on = model_repository(tmp_path / "on", kv_reuse=True) / TRITON_MODEL
    assert 'string_value: "0" }' in (off / "config.pbtxt").read_text()
    original = (REFERENCE_REPOSITORY / TRITON_MODEL / "config.pbtxt").read_text()
    assert (on / "config.pbtxt").read_text() == original
    assert (off / "1" / "model.py").read_text() == (on / "1" / "model.py").read_text()


def test_triton_gets_the_checkpoint_as_mmgw_serve_would_give_it(tmp_path: Path) -> None:
    env = triton_environment("cuda", tmp_path / "ck", tmp_path / "cache")
    # The reference model reads MMGW_REFERENCE_<FAMILY>_CHECKPOINT (reference_kit/weights.py).
    assert env["MMGW_REFERENCE_LLAVA_CHECKPOINT"] == str(tmp_path / "ck")
    assert env["MMGW_REFERENCE_DEVICE"] == "cuda"
    assert env["MMGW_REFERENCE_TOKENIZERS"] == str(tmp_path / "cache" / "tokenizers")
