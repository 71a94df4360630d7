"""``mmgw trtllm-repo --backend llmapi``: NVIDIA's PyTorch-backend repository for a HF folder.

NVIDIA's current Triton path for TensorRT-LLM (the only one for Qwen2.5-VL and newer VLMs)
builds no engine: one Python model, ``tensorrt_llm``, from TensorRT-LLM's
``triton_backend/all_models/llmapi/tensorrt_llm/`` (``config.pbtxt``, ``1/model.py``,
``1/helpers.py``, ``1/model.yaml``; read at commit 0a71057313ec0626527e164a8fc0205c5822e2f5
for config.pbtxt), loads the Hugging Face folder named in ``model.yaml`` through the LLM API,
and is started with ``trtllm-llmapi-launch tritonserver --model-repository ...``.

As the engine path does with its templates, this copies the user's own checkout of those
files (their ``config.pbtxt``, ``model.py``, ``helpers.py``: never a copy of ours) and writes
the one file that must differ, ``1/model.yaml``: ``model``, ``backend: pytorch``, the
parallelism, ``kv_cache_config`` (block reuse, its memory share, the block size the gateway
counts cached tokens with) and ``triton_config`` (``max_batch_size: 0``, ``decoupled: true``
so responses stream over gRPC, ``multimodal`` for a vision model: without it NVIDIA's model
ignores ``image_url`` silently). Everything is read back before the repository is published:
the config as Triton's ``ModelConfig`` (it must declare the inputs the gateway sends and
leave batch size and transaction policy to ``model.yaml``, which cannot override them
otherwise), and ``model.yaml`` as YAML.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import tempfile
from pathlib import Path
from typing import Any

import yaml

from server_repo.trtllm.assemble import TEMPLATE_ROOTS, Result, refuse_overwrite
from server_repo.trtllm.errors import InconsistentInput, RepoError, TemplateError
from server_repo.trtllm.gateway_config import Scalar, _table
from server_repo.trtllm.request import LlmapiRepoRequest
from server_repo.trtllm.verify import parse_config

MODEL_NAME = "tensorrt_llm"
NVIDIA_FILES = ("config.pbtxt", "1/model.py", "1/helpers.py")
#: Inputs the gateway sends on this contract; the template must declare them.
REQUIRED_INPUTS = ("text_input", "streaming", "sampling_param_max_tokens", "return_finish_reason")
#: TensorRT-LLM's PyTorch backend default block size, written out so the gateway can count.
TOKENS_PER_BLOCK = 32
CHAT_TEMPLATE_FILES = ("chat_template.jinja", "chat_template.json")


def find_llmapi_model(root: Path) -> Path:
    """NVIDIA's ``llmapi/tensorrt_llm`` folder under a TensorRT-LLM checkout (or the folder)."""
    candidates = [root, root / "tensorrt_llm"]
    candidates += [root / relative / "llmapi" / MODEL_NAME for relative in TEMPLATE_ROOTS]
    for candidate in candidates:
        if all((candidate / name).is_file() for name in NVIDIA_FILES):
            return candidate.resolve()
    raise TemplateError(
        f"no llmapi model under {root}: NVIDIA keeps it in a TensorRT-LLM checkout, in "
        "triton_backend/all_models/llmapi/tensorrt_llm/ (config.pbtxt, 1/model.py, "
        "1/helpers.py). Pass the checkout, or that folder itself"
    )


def read_model_folder(model: Path) -> dict[str, Any]:
    """The Hugging Face ``config.json`` of ``model``; the folder must also hold a tokenizer."""
    config_path = model / "config.json"
    if not config_path.is_file():
        raise RepoError(f"{model} is not a Hugging Face model folder (no config.json)")
    try:
        config: dict[str, Any] = json.loads(config_path.read_text())
    except json.JSONDecodeError as exc:
        raise RepoError(f"{config_path}: not JSON: {exc}") from exc
    if not any((model / n).is_file() for n in ("tokenizer.json", "tokenizer_config.json")):
        raise RepoError(f"{model} holds no tokenizer (tokenizer.json / tokenizer_config.json)")
    return config


def has_chat_template(model: Path) -> bool:
    """Whether the gateway will find a chat template there (it renders text prompts)."""
    if any((model / name).is_file() for name in CHAT_TEMPLATE_FILES):
        return True
    tokenizer_config = model / "tokenizer_config.json"
    if not tokenizer_config.is_file():
        return False
    try:
        return bool(json.loads(tokenizer_config.read_text()).get("chat_template"))
    except json.JSONDecodeError:
        return False


def is_vision_model(config: dict[str, Any]) -> bool:
    """A vision-language checkpoint: its config carries a vision tower's settings."""
    return "vision_config" in config


def model_yaml(request: LlmapiRepoRequest, multimodal: bool) -> dict[str, Any]:
    """The ``1/model.yaml`` NVIDIA's model.py reads (LLM API arguments + ``triton_config``)."""
    return {
        "model": request.server_path(request.model),
        "backend": "pytorch",
        "tensor_parallel_size": request.world_size,
        "pipeline_parallel_size": 1,
        "kv_cache_config": {
            "enable_block_reuse": request.kv_cache_reuse,
            "free_gpu_memory_fraction": request.kv_cache_fraction,
            "tokens_per_block": TOKENS_PER_BLOCK,
        },
        "triton_config": {"max_batch_size": 0, "decoupled": True, "multimodal": multimodal},
    }


def check_template(config_path: Path, multimodal: bool) -> None:
    """The copied ``config.pbtxt`` as Triton reads it: NVIDIA's llmapi model, able to carry
    what the gateway sends, its batch size and policy left to ``model.yaml``."""
    config = parse_config(config_path)
    problems = []
    if config.backend != "python":
        problems.append(f"backend is {config.backend!r}, NVIDIA's llmapi model is 'python'")
    declared = {entry.name for entry in config.input}
    missing = [name for name in REQUIRED_INPUTS if name not in declared]
    if missing:
        problems.append(f"declares no {', '.join(missing)} input (not the llmapi model?)")
    if multimodal and "image_url" not in declared:
        problems.append(
            "declares no image_url input, so images cannot reach the model: it predates "
            "TensorRT-LLM PR #18381; use a checkout that has it, or pass --no-multimodal "
            "(the gateway then refuses images)"
        )
    if config.max_batch_size != 0 or config.HasField("model_transaction_policy"):
        problems.append(
            "sets max_batch_size or model_transaction_policy itself; NVIDIA leaves both to "
            "model.yaml's triton_config, which cannot override them once config.pbtxt does"
        )
    if problems:
        raise InconsistentInput([f"{config_path}: {p}" for p in problems])


def _check_yaml(path: Path, wanted: dict[str, Any]) -> None:
    if yaml.safe_load(path.read_text()) != wanted:
        raise TemplateError(f"{path}: does not read back as written")


def _write_model(request: LlmapiRepoRequest, source: Path, target: Path, multimodal: bool) -> None:
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    check_template(target / "config.pbtxt", multimodal)
    wanted = model_yaml(request, multimodal)
    header = (
        "# Written by mmgw trtllm-repo --backend llmapi: the LLM API's arguments, then\n"
        "# triton_config (max_batch_size and decoupled override config.pbtxt's defaults).\n"
    )
    path = target / "1" / "model.yaml"
    path.write_text(header + yaml.safe_dump(wanted, sort_keys=False))
    _check_yaml(path, wanted)


def launch_command(request: LlmapiRepoRequest) -> str:
    """NVIDIA's launch: the wrapper lets the LLM API spawn its MPI workers."""
    repository = request.server_path(request.output)
    return shlex.join(["trtllm-llmapi-launch", "tritonserver", f"--model-repository={repository}"])


def gateway_toml(request: LlmapiRepoRequest, launch: str, chat_template: bool) -> str:
    """A gateway config serving the repository: no family needed, the tokenizer folder is the
    model folder (its chat template renders the prompts)."""
    entry: dict[str, Scalar | None] = {
        "id": request.model_id or request.model.resolve().name,
        "triton_model": MODEL_NAME,
        "triton_url": request.triton_url,
        "tokenizer": request.server_path(request.model),
        "kv_tokens_per_block": TOKENS_PER_BLOCK,
    }
    lines = [
        "# Written by `mmgw trtllm-repo --backend llmapi` for the Triton model repository",
        f"#   {request.output.resolve()}",
        "# Serve it with: mmgw serve --config <this file>",
        f"# Triton launch: {launch}",
    ]
    if not chat_template:
        lines.append("# The model folder has no chat template: chat requests cannot be rendered.")
    lines += [
        "",
        *_table("[server]", {"host": "0.0.0.0", "port": 8000}),
        *_table("[embedded]", {"enabled": False}),
        *_table("[[models]]", entry),
    ]
    return "\n".join(lines)


def compose_env(request: LlmapiRepoRequest, gateway_config: str) -> dict[str, str]:
    """The docker-compose variables of the llmapi variant (docker-compose.llmapi.yml)."""
    paths = [request.server_path(request.output), request.server_path(request.model)]
    shared = os.path.commonpath(paths)
    return {
        **({"MODELS_DIR": shared} if shared != "/" else {}),
        "TRITON_MODEL_REPO": paths[0],
        "GATEWAY_CONFIG": gateway_config,
    }


def build_llmapi_repository(request: LlmapiRepoRequest) -> Result:
    """Check, copy, write, read back and publish the repository plus its gateway config."""
    config_path = request.gateway_config or request.output.resolve().parent / "gateway.toml"
    refuse_overwrite(config_path, request.force, "--gateway-config")
    source = find_llmapi_model(request.templates)
    hf_config = read_model_folder(request.model)
    vision = is_vision_model(hf_config)
    multimodal = vision if request.multimodal is None else request.multimodal
    notes = []
    if vision and not multimodal:
        notes.append("a vision model served without triton_config.multimodal: text only")
    chat_template = has_chat_template(request.model)
    if not chat_template:
        notes.append(f"{request.model} has no chat template: only completions can be served")
    output = request.output.resolve()
    output.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{output.name}.", dir=output.parent) as tmp:
        staging = Path(tmp) / output.name
        staging.mkdir()
        _write_model(request, source, staging / MODEL_NAME, multimodal)
        if output.exists():
            if not request.force:
                raise RepoError(f"{output} exists; pass --force to replace it")
            shutil.rmtree(output)
        staging.rename(output)
    launch = launch_command(request)
    config_path.parent.mkdir(parents=True, exist_ok=True)
    config_path.write_text(gateway_toml(request, launch, chat_template))
    env = compose_env(request, str(config_path.resolve()))
    return Result(output, config_path, launch, env, notes)
