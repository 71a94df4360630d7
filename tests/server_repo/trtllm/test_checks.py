"""Inconsistent input is refused before anything is written, with a message naming the values
that disagree and where each came from."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.server_repo.trtllm import fakes
from tests.server_repo.trtllm.conftest import Runner, Workspace


def refused(run_tool: Runner, workspace: Workspace, family: str, *extra: str) -> str:
    code, out, err = run_tool(*workspace.args(family), *extra)
    assert code == 2, out
    assert not (workspace.root / "repo" / family).exists(), "a refused run wrote something"
    return err


def rewrite(engine: Path, edit: dict) -> None:
    config = json.loads((engine / "config.json").read_text())
    for dotted, value in edit.items():
        node = config
        *parents, last = dotted.split(".")
        for key in parents:
            node = node[key]
        node[last] = value
    (engine / "config.json").write_text(json.dumps(config))


def test_feature_budget_must_equal_batch_x_features_x_images(
    workspace: Workspace, run_tool: Runner
) -> None:
    err = refused(run_tool, workspace, "llava", "--max-images", "2")
    assert "build_config.max_prompt_embedding_table_size 4608" in err
    assert "max_batch_size 8 x 576 features x 2 images = 9216" in err
    assert str(workspace.llava_llm / "config.json") in err


def test_feature_budget_under_the_max_multimodal_len_spelling(
    workspace: Workspace, run_tool: Runner
) -> None:
    config = json.loads((workspace.llava_llm / "config.json").read_text())
    config["build_config"]["max_multimodal_len"] = config["build_config"].pop(
        "max_prompt_embedding_table_size"
    )
    (workspace.llava_llm / "config.json").write_text(json.dumps(config))
    err = refused(run_tool, workspace, "llava", "--features-per-image", "2880")
    assert "build_config.max_multimodal_len 4608" in err and "= 23040" in err


def test_features_override_for_a_bigger_encoder(workspace: Workspace, run_tool: Runner) -> None:
    rewrite(workspace.llava_llm, {"build_config.max_prompt_embedding_table_size": 8 * 2880})
    code, _, err = run_tool(*workspace.args("llava"), "--features-per-image", "2880")
    assert code == 0, err


def test_mllama_budget_is_per_request_encoder_input(workspace: Workspace, run_tool: Runner) -> None:
    err = refused(run_tool, workspace, "mllama", "--max-images", "2")
    assert "build_config.max_encoder_input_len 6404" in err
    assert "6404 features x 2 images = 12808" in err
    assert "max_batch_size" not in err


def test_mllama_needs_a_bfloat16_engine(workspace: Workspace, run_tool: Runner) -> None:
    rewrite(workspace.mllama_llm, {"pretrained_config.dtype": "float16"})
    err = refused(run_tool, workspace, "mllama")
    assert "TYPE_BF16" in err and "bfloat16" in err
    assert "pretrained_config.dtype is float16" in err


def test_llava_needs_a_float16_engine(workspace: Workspace, run_tool: Runner) -> None:
    rewrite(workspace.llava_llm, {"pretrained_config.dtype": "bfloat16"})
    err = refused(run_tool, workspace, "llava")
    assert "TYPE_FP16" in err and "pretrained_config.dtype is bfloat16" in err


def test_kv_reuse_needs_paged_context_fmha(workspace: Workspace, run_tool: Runner) -> None:
    rewrite(workspace.llava_llm, {"build_config.plugin_config.use_paged_context_fmha": False})
    assert run_tool(*workspace.args("llava"))[0] == 0  # fine without reuse
    code, _, err = run_tool(*workspace.args("llava"), "--force", "--kv-cache-reuse")
    assert code == 2
    assert "--use_paged_context_fmha enable" in err
    assert "build_config.plugin_config.use_paged_context_fmha is False" in err


def test_cross_kv_fraction_only_for_encoder_decoder(workspace: Workspace, run_tool: Runner) -> None:
    err = refused(run_tool, workspace, "llava", "--cross-kv-cache-fraction", "0.3")
    assert "--cross-kv-cache-fraction 0.3 is only for encoder-decoder" in err
    err = refused(run_tool, workspace, "whisper", "--cross-kv-cache-fraction", "1.5")
    assert "cross_kv_cache_fraction 1.5 must be in (0, 1)" in err


def test_batch_and_world_size_must_match_the_engine(workspace: Workspace, run_tool: Runner) -> None:
    err = refused(run_tool, workspace, "llava", "--max-batch", "16", "--world-size", "2")
    assert "--max-batch 16 exceeds the engine's build_config.max_batch_size 8" in err
    assert "--world-size 2 != the engine's pretrained_config.mapping world size 1" in err


def test_visual_engine_of_another_family(workspace: Workspace, run_tool: Runner) -> None:
    args = workspace.args("llava")
    args[args.index("--visual-engine") + 1] = str(workspace.onevision_visual)
    code, _, err = run_tool(*args)
    assert code == 2
    assert "builder_config.model_type 'llava_onevision'" in err and "not a llava encoder" in err


def test_bls_entry_only_for_image_input_families(workspace: Workspace, run_tool: Runner) -> None:
    err = refused(run_tool, workspace, "llava_onevision", "--entry", "bls")
    assert "tensorrt_llm_bls takes only image_input" in err
    code, _, err = run_tool(*workspace.args("llava"), "--entry", "bls")
    assert code == 0, err
    toml = (workspace.root / "repo" / "gateway.toml").read_text()
    assert 'triton_model = "tensorrt_llm_bls"' in toml


def test_whisper_encoder_must_take_a_30_second_window(
    workspace: Workspace, run_tool: Runner
) -> None:
    rewrite(workspace.whisper_encoder, {"build_config.max_input_len": 1500})
    err = refused(run_tool, workspace, "whisper")
    assert "max_input_len 1500" in err and "3000 mel frames" in err


def test_every_problem_is_listed_at_once(workspace: Workspace, run_tool: Runner) -> None:
    rewrite(workspace.llava_llm, {"build_config.plugin_config.use_paged_context_fmha": False})
    err = refused(run_tool, workspace, "llava", "--max-images", "3", "--kv-cache-reuse")
    assert err.count("\n  - ") == 2


@pytest.mark.parametrize(
    ("option", "message"),
    [
        ("--llm-engine", "no config.json"),
        ("--visual-engine", "no builder_config"),
    ],
)
def test_wrong_engine_directories(
    workspace: Workspace, run_tool: Runner, option: str, message: str
) -> None:
    args = workspace.args("llava")
    wrong = {"--llm-engine": workspace.hf, "--visual-engine": workspace.llava_llm}[option]
    args[args.index(option) + 1] = str(wrong)
    code, _, err = run_tool(*args)
    assert code == 2 and message in err


def test_missing_engine_option(workspace: Workspace, run_tool: Runner) -> None:
    args = workspace.args("whisper")
    del args[args.index("--encoder-engine") : args.index("--encoder-engine") + 2]
    code, _, err = run_tool(*args)
    assert code == 2 and "family whisper needs --encoder-engine" in err


def test_unknown_bare_placeholder_in_a_newer_template(
    workspace: Workspace, run_tool: Runner
) -> None:
    newer = fakes.ENSEMBLE.replace("TYPE_UINT8", "${image_bytes_data_type}")
    fakes.write_templates(workspace.backend, {"multimodal/ensemble": newer})
    code, _, err = run_tool(*workspace.args("llava"))
    assert code == 2
    assert "${image_bytes_data_type} sit outside quotes" in err and "ensemble" in err


def test_template_without_exclude_input_in_output(workspace: Workspace, run_tool: Runner) -> None:
    old = fakes.TENSORRT_LLM.replace('key: "exclude_input_in_output"', 'key: "something_else"')
    fakes.write_templates(workspace.backend, {"inflight_batcher_llm/tensorrt_llm": old})
    code, _, err = run_tool(*workspace.args("llava"))
    assert code == 2 and "no parameter 'exclude_input_in_output'" in err


def test_no_templates_found(workspace: Workspace, run_tool: Runner) -> None:
    args = workspace.args("llava")
    args[args.index("--templates") + 1] = str(workspace.root / "nowhere")
    code, _, err = run_tool(*args)
    assert code == 2 and "no Triton TensorRT-LLM templates" in err
    # Both places NVIDIA keeps them: current TensorRT-LLM and the old backend repository.
    assert "a TensorRT-LLM checkout, in triton_backend/all_models/" in err
    assert "a tensorrtllm_backend checkout, in all_models/" in err
