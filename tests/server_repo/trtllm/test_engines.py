"""Engine config.json reading across TensorRT-LLM spellings."""

from __future__ import annotations

from pathlib import Path

import pytest

from server_repo.trtllm.engines import LlmEngine, VisualEngine
from server_repo.trtllm.errors import EngineError
from tests.server_repo.trtllm import fakes


def test_reads_the_fields_trtllm_build_writes(tmp_path: Path) -> None:
    engine = LlmEngine.load(fakes.write_engine(tmp_path, fakes.llm_config()))
    assert engine.dtype == "float16" and engine.architecture == "LlamaForCausalLM"
    assert engine.max_batch_size == 8 and engine.world_size == 1
    assert engine.budget("max_prompt_embedding_table_size") == (
        "build_config.max_prompt_embedding_table_size",
        4608,
    )
    assert engine.paged_kv_cache and engine.paged_context_fmha
    assert engine.tokens_per_block == 64


def test_older_layouts(tmp_path: Path) -> None:
    config = fakes.llm_config()
    build = config["build_config"]
    del build["kv_cache_type"]
    config["plugin_config"] = build.pop("plugin_config") | {"paged_kv_cache": False}
    config["pretrained_config"]["mapping"] = {"tp_size": 2, "pp_size": 2}
    engine = LlmEngine.load(fakes.write_engine(tmp_path, config))
    assert engine.world_size == 4
    assert not engine.paged_kv_cache and engine.paged_context_fmha


def test_visual_engine(tmp_path: Path) -> None:
    visual = VisualEngine.load(fakes.write_engine(tmp_path, fakes.visual_config("vila", 32)))
    assert (visual.model_type, visual.max_batch_size) == ("vila", 32)
    with pytest.raises(EngineError, match="no build_config"):
        LlmEngine.load(tmp_path)


def test_unreadable_config(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(EngineError, match="unreadable"):
        LlmEngine.load(tmp_path)
