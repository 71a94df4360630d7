"""``mmgw trtllm-repo`` end to end over fake engines and NVIDIA-shaped templates: every written
config parses as Triton's ``ModelConfig`` and carries the values that must agree."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2

from gateway.config import load_settings
from tests.server_repo.trtllm.conftest import Runner, Workspace

MULTIMODAL_MODELS = {
    "ensemble",
    "preprocessing",
    "postprocessing",
    "tensorrt_llm",
    "tensorrt_llm_bls",
    "multimodal_encoders",
}


def parse(repo: Path, model: str) -> model_config_pb2.ModelConfig:
    text = (repo / model / "config.pbtxt").read_text()
    assert "${triton_max_batch_size}" not in text
    return text_format.Parse(text, model_config_pb2.ModelConfig())


def param(config: model_config_pb2.ModelConfig, key: str) -> str:
    return config.parameters[key].string_value


def dtype_of(tensors: object, name: str) -> str:
    for tensor in tensors:  # type: ignore[attr-defined]
        if tensor.name == name:
            return model_config_pb2.DataType.Name(tensor.data_type)
    raise AssertionError(f"no tensor {name}")


def launch_argv(stdout: str) -> list[str]:
    line = next(line for line in stdout.splitlines() if "launch_triton_server.py" in line)
    return shlex.split(line)


@pytest.mark.parametrize("family", ["llava", "llava_onevision", "mllama"])
def test_multimodal_repository_parses_and_agrees(
    family: str, workspace: Workspace, run_tool: Runner
) -> None:
    code, _, err = run_tool(*workspace.args(family), "--streaming", "--kv-cache-reuse")
    assert code == 0, err
    repo = workspace.root / "repo" / family
    assert {p.name for p in repo.iterdir()} == MULTIMODAL_MODELS
    configs = {name: parse(repo, name) for name in MULTIMODAL_MODELS}
    batch = 1 if family == "llava_onevision" else 8
    assert {c.max_batch_size for c in configs.values()} == {batch}
    assert {name: c.name for name, c in configs.items()} == {n: n for n in MULTIMODAL_MODELS}
    llm = configs["tensorrt_llm"]
    assert llm.backend == "tensorrtllm"
    assert llm.model_transaction_policy.decoupled is True
    assert configs["tensorrt_llm_bls"].model_transaction_policy.decoupled is True
    assert param(llm, "exclude_input_in_output") == "True"
    assert param(llm, "enable_kv_cache_reuse") == "True"
    assert param(llm, "normalize_log_probs") == "False"  # OpenAI's logprobs: the model's own
    assert param(llm, "gpt_model_path") == str(getattr(workspace, f"{family_key(family)}_llm"))
    features = "TYPE_BF16" if family == "mllama" else "TYPE_FP16"
    assert dtype_of(llm.input, "encoder_input_features") == features
    assert dtype_of(configs["multimodal_encoders"].output, "ENCODER_INPUT_FEATURES") == features
    assert dtype_of(llm.output, "context_logits") == "TYPE_FP32"
    cross = param(llm, "cross_kv_cache_fraction")
    assert cross == ("0.5" if family == "mllama" else "${cross_kv_cache_fraction}")
    pre = configs["preprocessing"]
    assert param(pre, "tokenizer_dir") == str(workspace.hf)
    assert param(pre, "max_num_images") == "1"
    assert param(configs["multimodal_encoders"], "visual_model_path") == str(
        getattr(workspace, f"{family_key(family)}_visual")
    )
    steps = [s.model_name for s in configs["ensemble"].ensemble_scheduling.step]
    assert steps == ["preprocessing", "multimodal_encoders", "tensorrt_llm", "postprocessing"]


def family_key(family: str) -> str:
    return {"llava_onevision": "onevision"}.get(family, family)


def test_launch_command_and_gateway_config(workspace: Workspace, run_tool: Runner) -> None:
    code, out, err = run_tool(*workspace.args("llava_onevision"), "--model-id", "ov-7b")
    assert code == 0, err
    argv = launch_argv(out)
    assert argv[0] == "python3"
    assert argv[argv.index("--world_size") + 1] == "1"
    assert argv[argv.index("--tensorrt_llm_model_name") + 1] == "tensorrt_llm,multimodal_encoders"
    assert argv[argv.index("--multimodal_gpu0_cuda_mem_pool_bytes") + 1] == "300000000"
    assert f"--model_repo={workspace.root / 'repo' / 'llava_onevision'}" in argv
    settings = load_settings(workspace.root / "repo" / "gateway.toml")
    (model,) = settings.models
    assert (model.id, model.family, model.triton_model) == ("ov-7b", "llava_onevision", "ensemble")
    # Triton where the printed launch command serves it: this machine (compose: below).
    assert (model.triton_url, model.max_images, model.kv_tokens_per_block) == (
        "localhost:8001",
        1,
        64,
    )
    assert "triton_url = 'localhost:8001'" in out
    assert model.end_id == 151645
    assert model.tokenizer == workspace.hf  # names the top_logprobs alternatives
    assert settings.media.max_images_per_request == 1
    assert not settings.needs_embedded


def test_whisper_repository(workspace: Workspace, run_tool: Runner) -> None:
    code, out, err = run_tool(*workspace.args("whisper"), "--max-batch", "8")
    assert code == 0, err
    repo = workspace.root / "repo" / "whisper"
    assert {p.name for p in repo.iterdir()} == {"tensorrt_llm", "whisper_bls"}
    llm, bls = parse(repo, "tensorrt_llm"), parse(repo, "whisper_bls")
    assert llm.max_batch_size == bls.max_batch_size == 8
    assert param(llm, "gpt_model_path") == str(workspace.whisper_decoder)
    assert param(llm, "encoder_model_path") == str(workspace.whisper_encoder)
    assert param(llm, "cross_kv_cache_fraction") == "0.5"
    assert param(llm, "exclude_input_in_output") == "True"
    assert param(bls, "engine_dir") == str(workspace.whisper_encoder)
    assert param(bls, "n_mels") == "128"
    assert bls.model_transaction_policy.decoupled is False
    assert (repo / "whisper_bls" / "1" / "multilingual.tiktoken").is_file()
    assert (repo / "whisper_bls" / "1" / "mel_filters.npz").is_file()
    argv = launch_argv(out)
    assert argv[argv.index("--tensorrt_llm_model_name") + 1] == "tensorrt_llm,whisper_bls"
    (model,) = load_settings(workspace.root / "repo" / "gateway.toml").models
    assert (model.id, model.family, model.triton_model) == ("whisper", "whisper", "whisper_bls")


def test_path_map_writes_server_paths_and_env_file(workspace: Workspace, run_tool: Runner) -> None:
    env_file = workspace.root / "compose.env"
    code, out, err = run_tool(
        *workspace.args("llava"),
        "--path-map",
        f"{workspace.root}=/srv",
        "--launch-script",
        "/app/scripts/launch_triton_server.py",
        "--env-file",
        str(env_file),
        "--world-size",
        "1",
    )
    assert code == 0, err
    llm = parse(workspace.root / "repo" / "llava", "tensorrt_llm")
    assert param(llm, "gpt_model_path") == "/srv/engines/llava/llm"
    argv = launch_argv(out)
    assert argv[1] == "/app/scripts/launch_triton_server.py"
    assert "--model_repo=/srv/repo/llava" in argv
    env = dict(line.split("=", 1) for line in env_file.read_text().splitlines())
    assert env["TRITON_MODEL_REPO"] == "/srv/repo/llava"
    assert env["TRITON_LLM_MODEL_NAMES"] == "tensorrt_llm,multimodal_encoders"
    assert env["MODELS_DIR"] == "/srv"  # repository, engines and tokenizer share it
    assert env["GATEWAY_CONFIG"] == str(workspace.root / "repo" / "gateway.toml")
    # The compose flow: the gateway container reaches Triton by its service name.
    (model,) = load_settings(workspace.root / "repo" / "gateway.toml").models
    assert model.triton_url == "triton:8001"


def test_existing_output_needs_force(workspace: Workspace, run_tool: Runner) -> None:
    assert run_tool(*workspace.args("llava"))[0] == 0
    code, _, err = run_tool(*workspace.args("llava"))
    assert code == 2 and "--force" in err
    assert run_tool(*workspace.args("llava"), "--force", "--streaming")[0] == 0
    llm = parse(workspace.root / "repo" / "llava", "tensorrt_llm")
    assert llm.model_transaction_policy.decoupled is True


def test_templates_found_in_a_tensorrt_llm_checkout(workspace: Workspace, run_tool: Runner) -> None:
    nested = workspace.root / "TensorRT-LLM" / "triton_backend"
    nested.parent.mkdir()
    workspace.backend.rename(nested)
    args = workspace.args("llava")
    args[args.index("--templates") + 1] = str(workspace.root / "TensorRT-LLM")
    code, _, err = run_tool(*args)
    assert code == 0, err


def test_a_second_model_does_not_silently_replace_the_first_ones_config(
    workspace: Workspace, run_tool: Runner
) -> None:
    assert run_tool(*workspace.args("llava"), "--model-id", "first")[0] == 0
    config = workspace.root / "repo" / "gateway.toml"
    (first,) = load_settings(config).models
    code, _, err = run_tool(*workspace.args("whisper"))  # same folder, so same gateway.toml
    assert code == 2 and f"{config} exists" in err and "--gateway-config" in err
    assert load_settings(config).models == [first]
    assert not (workspace.root / "repo" / "whisper").exists()  # refused before writing
    other = workspace.root / "repo" / "whisper.toml"
    code, _, err = run_tool(*workspace.args("whisper"), "--gateway-config", str(other))
    assert code == 0, err
    assert load_settings(config).models == [first]
    assert load_settings(other).models[0].family == "whisper"


def test_an_existing_env_file_needs_force(workspace: Workspace, run_tool: Runner) -> None:
    env_file = workspace.root / ".env"
    env_file.write_text("MODELS_DIR=/models/other\n")
    code, _, err = run_tool(*workspace.args("llava"), "--env-file", str(env_file))
    assert code == 2 and f"{env_file} exists" in err
    assert env_file.read_text() == "MODELS_DIR=/models/other\n"
    code, _, err = run_tool(*workspace.args("llava"), "--env-file", str(env_file), "--force")
    assert code == 0, err
    assert "TRITON_MODEL_REPO=" in env_file.read_text()
