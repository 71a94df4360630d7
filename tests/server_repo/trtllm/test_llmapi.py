"""``mmgw trtllm-repo --backend llmapi`` over a stand-in TensorRT-LLM checkout: NVIDIA's files
copied as they are, our model.yaml, the gateway entry, the launch command, and the refusals."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
import tomllib
import yaml
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2

from gateway.config import load_settings
from gateway.config.models import ServedModel
from tests.server_repo.nvidia_llmapi import write_llmapi_checkout
from tests.server_repo.trtllm.conftest import Runner

TEMPLATE = Path("triton_backend/all_models/llmapi/tensorrt_llm")


def hf_folder(root: Path, vision: bool = True, chat_template: bool = True) -> Path:
    """A Hugging Face model folder: config.json (a vision tower's settings or not), tokenizer."""
    config: dict[str, object] = {"architectures": ["Qwen2_5_VLForConditionalGeneration"]}
    if vision:
        config["vision_config"] = {"depth": 32}
    root.mkdir(parents=True)
    (root / "config.json").write_text(json.dumps(config))
    (root / "tokenizer.json").write_text("{}")
    template = {"chat_template": "{{ messages }}"} if chat_template else {}
    (root / "tokenizer_config.json").write_text(json.dumps(template))
    return root


def args(tmp_path: Path, *extra: str, model: Path | None = None) -> list[str]:
    model = model or tmp_path / "models" / "Qwen2.5-VL-3B-Instruct"
    return [
        "--backend", "llmapi", "--templates", str(tmp_path / "TensorRT-LLM"),
        "--model", str(model), "--output", str(tmp_path / "models" / "triton_repo"), *extra,
    ]  # fmt: skip


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    hf_folder(tmp_path / "models" / "Qwen2.5-VL-3B-Instruct")
    return write_llmapi_checkout(tmp_path / "TensorRT-LLM")


def test_writes_nvidias_layout_with_our_model_yaml(
    tmp_path: Path, checkout: Path, run_tool: Runner
) -> None:
    code, out, err = run_tool(*args(tmp_path))
    assert code == 0, err
    model = tmp_path / "models" / "triton_repo" / "tensorrt_llm"
    for name in ("config.pbtxt", "1/model.py", "1/helpers.py"):
        assert (model / name).read_bytes() == (checkout / TEMPLATE / name).read_bytes()
    config = text_format.Parse((model / "config.pbtxt").read_text(), model_config_pb2.ModelConfig())
    assert config.name == "tensorrt_llm" and config.max_batch_size == 0
    written = yaml.safe_load((model / "1" / "model.yaml").read_text())
    assert written == {
        "model": str((tmp_path / "models" / "Qwen2.5-VL-3B-Instruct").resolve()),
        "backend": "pytorch",
        "tensor_parallel_size": 1,
        "pipeline_parallel_size": 1,
        "kv_cache_config": {
            "enable_block_reuse": True,
            "free_gpu_memory_fraction": 0.9,
            "tokens_per_block": 32,
        },
        "triton_config": {"max_batch_size": 0, "decoupled": True, "multimodal": True},
    }
    launch = next(line for line in out.splitlines() if "trtllm-llmapi-launch" in line)
    repository = (tmp_path / "models" / "triton_repo").resolve()
    assert shlex.split(launch) == [
        "trtllm-llmapi-launch", "tritonserver", f"--model-repository={repository}",
    ]  # fmt: skip


def test_a_text_model_is_not_multimodal_and_reuse_can_be_turned_off(
    tmp_path: Path, run_tool: Runner
) -> None:
    write_llmapi_checkout(tmp_path / "TensorRT-LLM", image_url=False)
    model = hf_folder(tmp_path / "models" / "Llama-3.1-8B", vision=False)
    code, _, err = run_tool(
        *args(tmp_path, "--no-kv-cache-reuse", "--world-size", "2", model=model)
    )
    assert code == 0, err
    yaml_path = tmp_path / "models" / "triton_repo" / "tensorrt_llm" / "1" / "model.yaml"
    written = yaml.safe_load(yaml_path.read_text())
    assert written["triton_config"]["multimodal"] is False
    assert written["kv_cache_config"]["enable_block_reuse"] is False
    assert written["tensor_parallel_size"] == 2


def test_the_gateway_entry_names_the_model_folder_as_tokenizer(
    tmp_path: Path, checkout: Path, run_tool: Runner
) -> None:
    code, _, err = run_tool(*args(tmp_path, "--model-id", "qwen-vl"))
    assert code == 0, err
    toml_path = tmp_path / "models" / "gateway.toml"
    entry = tomllib.loads(toml_path.read_text())["models"][0]
    assert entry == {
        "id": "qwen-vl",
        "triton_model": "tensorrt_llm",
        "triton_url": "localhost:8001",
        "tokenizer": str((tmp_path / "models" / "Qwen2.5-VL-3B-Instruct").resolve()),
        "kv_tokens_per_block": 32,
    }
    if ServedModel.model_fields["family"].is_required():
        pytest.skip("this branch's gateway still requires a family (llmapi-gateway drops it)")
    served = load_settings(toml_path).models[0]
    assert served.triton_model == "tensorrt_llm" and served.kv_tokens_per_block == 32


def test_path_maps_and_env_file_name_server_paths(
    tmp_path: Path, checkout: Path, run_tool: Runner
) -> None:
    env = tmp_path / ".env"
    local = tmp_path / "models"
    code, _, err = run_tool(
        *args(tmp_path, "--path-map", f"{local}=/srv/models", "--env-file", str(env))
    )
    assert code == 0, err
    yaml_path = local / "triton_repo" / "tensorrt_llm" / "1" / "model.yaml"
    assert yaml.safe_load(yaml_path.read_text())["model"] == "/srv/models/Qwen2.5-VL-3B-Instruct"
    variables = dict(line.split("=", 1) for line in env.read_text().splitlines())
    assert variables["MODELS_DIR"] == "/srv/models"
    assert variables["TRITON_MODEL_REPO"] == "/srv/models/triton_repo"
    assert variables["GATEWAY_CONFIG"] == str((local / "gateway.toml").resolve())
    entry = tomllib.loads((local / "gateway.toml").read_text())["models"][0]
    assert entry["triton_url"] == "triton:8001"  # the compose service


def test_a_vision_model_needs_nvidias_image_input(tmp_path: Path, run_tool: Runner) -> None:
    hf_folder(tmp_path / "models" / "Qwen2.5-VL-3B-Instruct")
    write_llmapi_checkout(tmp_path / "TensorRT-LLM", image_url=False)
    code, _, err = run_tool(*args(tmp_path))
    assert code == 2 and "#18381" in err and "image_url" in err
    assert not (tmp_path / "models" / "triton_repo").exists()
    code, out, err = run_tool(*args(tmp_path, "--no-multimodal"))
    assert code == 0, err
    assert "text only" in out


def test_a_config_that_pins_batching_is_refused(tmp_path: Path, run_tool: Runner) -> None:
    hf_folder(tmp_path / "models" / "Qwen2.5-VL-3B-Instruct")
    write_llmapi_checkout(tmp_path / "TensorRT-LLM", header="max_batch_size: 64\n")
    code, _, err = run_tool(*args(tmp_path))
    assert code == 2 and "model.yaml's triton_config" in err


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--family", "llava"], "--family: engine-path options"),
        (["--llm-engine", "/x"], "--llm-engine: engine-path options"),
    ],
)
def test_engine_options_are_refused(
    tmp_path: Path, checkout: Path, run_tool: Runner, extra: list[str], message: str
) -> None:
    code, _, err = run_tool(*args(tmp_path, *extra))
    assert code == 2 and message in err


def test_what_a_run_needs(tmp_path: Path, checkout: Path, run_tool: Runner) -> None:
    without_model = [a for a in args(tmp_path) if "Qwen" not in a and a != "--model"]
    code, _, err = run_tool(*without_model)
    assert code == 2 and "needs --model" in err
    code, _, err = run_tool(*args(tmp_path, model=tmp_path / "nowhere"))
    assert code == 2 and "not a Hugging Face model folder" in err
    code, _, err = run_tool(*args(tmp_path)[:3], str(tmp_path), *args(tmp_path)[4:])
    assert code == 2 and "no llmapi model under" in err
    engine = ["--templates", str(checkout), "--output", str(tmp_path / "r")]
    code, _, err = run_tool(*engine)
    assert code == 2 and "needs --family" in err


def test_a_model_without_chat_template_is_noted(tmp_path: Path, run_tool: Runner) -> None:
    write_llmapi_checkout(tmp_path / "TensorRT-LLM")
    model = hf_folder(tmp_path / "models" / "base", vision=False, chat_template=False)
    code, out, err = run_tool(*args(tmp_path, model=model))
    assert code == 0, err
    assert "no chat template" in out
