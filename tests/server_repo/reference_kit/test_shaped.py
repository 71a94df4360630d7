"""Shaped checkpoints: the real model's dimensions (counted on ``meta``), the tiny shape served
by the reference engine from its folder, reuse of a current folder, and the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from server_repo.reference_kit import GenerationRequest, load_engine
from server_repo.reference_kit.archs import LlavaArch
from server_repo.reference_kit.shaped import (
    build_model,
    is_current,
    main,
    parameter_count,
    shaped_checkpoint,
    text_token_ids,
    write_shaped_checkpoint,
)
from server_repo.reference_kit.weights import MARKER_FILE, load_assets


def test_llava_1_5_7b_has_the_real_checkpoints_dimensions() -> None:
    model, tokenizer = build_model("llava-1.5-7b", torch.device("meta"), torch.float16)
    vision, text = model.config.vision_config, model.config.text_config
    assert (vision.hidden_size, vision.intermediate_size) == (1024, 4096)
    assert (vision.num_hidden_layers, vision.num_attention_heads) == (24, 16)
    assert (vision.image_size, vision.patch_size) == (336, 14)
    assert (text.hidden_size, text.intermediate_size, text.num_hidden_layers) == (4096, 11008, 32)
    assert (text.num_attention_heads, text.num_key_value_heads) == (32, 32)
    assert (text.max_position_embeddings, text.vocab_size) == (4096, 32064)
    assert model.config.image_seq_length == 576 and model.config.vision_feature_layer == -2
    assert model.config.image_token_index == tokenizer.convert_tokens_to_ids("<image>")
    assert {p.dtype for p in model.parameters()} == {torch.float16}
    assert {p.device.type for p in model.parameters()} == {"meta"}
    # llava-hf/llava-1.5-7b-hf: 7.06e9 parameters (the vocabulary padded to 32064 included).
    assert abs(parameter_count("llava-1.5-7b") - 7.06e9) < 0.005e9


def test_seven_billion_parameters_are_not_initialised_on_a_cpu(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="generated on a GPU"):
        write_shaped_checkpoint("llava-1.5-7b", tmp_path, torch.device("cpu"))
    assert list(tmp_path.iterdir()) == []


def test_tiny_shape_loads_and_answers_in_text_at_every_step(tmp_path: Path) -> None:
    folder, generated = shaped_checkpoint("tiny", tmp_path / "tiny", "cpu")
    assert generated and folder == (tmp_path / "tiny").resolve()
    assets = load_assets(LlavaArch(), checkpoint=str(folder), device="cpu")
    assert not assets.tiny and assets.model.config.text_config.vocab_size == 1024
    head = assets.model.get_output_embeddings().weight
    muted = torch.ones(1024, dtype=torch.bool)
    muted[text_token_ids(assets.tokenizer)] = False
    assert muted.sum() > 1024 - len(assets.tokenizer)  # the padding and the special tokens
    assert torch.all(head[muted] == 0) and torch.all(head[~muted].abs().sum(dim=1) > 0)
    engine = load_engine("llava", checkpoint=str(folder), device="cpu")
    pixels = np.random.default_rng(0).normal(size=(1, 3, 336, 336)).astype(np.float16)
    completion = engine.complete(GenerationRequest("What is this?", max_tokens=8, images=pixels))
    assert len(completion.steps) == 8 and completion.stats.finish_reason == "length"
    assert all(step.text for step in completion.steps)  # never an id without text


def test_a_current_folder_is_reused_and_a_stale_one_regenerated(tmp_path: Path) -> None:
    folder, _ = shaped_checkpoint("tiny", tmp_path / "ck", "cpu")
    stamp = (folder / "model.safetensors").stat().st_mtime_ns
    assert shaped_checkpoint("tiny", folder, "cpu") == (folder, False)
    assert (folder / "model.safetensors").stat().st_mtime_ns == stamp
    marker = json.loads((folder / MARKER_FILE).read_text())
    (folder / MARKER_FILE).write_text(json.dumps(marker | {"fingerprint": "other sizes"}))
    assert not is_current("tiny", folder) and not is_current("llava-1.5-7b", folder)
    assert shaped_checkpoint("tiny", folder, "cpu") == (folder, True)
    assert is_current("tiny", folder)
    assert [p.name for p in tmp_path.iterdir()] == ["ck"]  # no staging folder left
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    with pytest.raises(ValueError, match="not replaced"):
        shaped_checkpoint("tiny", mine, "cpu")
    assert [p.name for p in mine.iterdir()] == ["notes.txt"]


def test_the_command_line_generates_then_reuses(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["tiny", str(tmp_path / "out"), "--device", "cpu"]) == 0
    assert "generated in" in capsys.readouterr().out
    assert main(["tiny", str(tmp_path / "out"), "--device", "cpu"]) == 0
    assert "already there (reused)" in capsys.readouterr().out
    assert main(["llava-1.5-7b", str(tmp_path / "big"), "--device", "cpu"]) == 2
    assert "generated on a GPU" in capsys.readouterr().err


def test_sharded_weights_load_as_they_were_built(tmp_path: Path) -> None:
    """The 7B shape is written in 5 GB shards; the same code at a tiny shard size."""
    write_shaped_checkpoint("tiny", tmp_path, torch.device("cpu"), max_shard_size="300KB")
    assert len(list(tmp_path.glob("model-*-of-*.safetensors"))) > 1
    loaded = load_assets(LlavaArch(), checkpoint=str(tmp_path), device="cpu").model.state_dict()
    built, _ = build_model("tiny", torch.device("cpu"), torch.float32)
    assert loaded.keys() == built.state_dict().keys()
    assert all(torch.equal(loaded[k], v) for k, v in built.state_dict().items())
