"""The gateway TOML that serves the repository just written, and the launch command.

The gateway must agree with the repository too: which Triton model to call, how many
images the engine was built for, the KV block size (to report cached tokens) and the
family's end/pad ids. Writing it from the same values removes one more copy-by-hand step.
The TOML is checked by loading it with ``gateway.config.load_settings`` in the tests.
"""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Mapping
from pathlib import PurePosixPath

from server_repo.trtllm.engines import Engines
from server_repo.trtllm.families import RANK_MODELS
from server_repo.trtllm.request import MULTIMODAL_GPU0_POOL_BYTES, RepoRequest

Scalar = str | int | float | bool


def _toml_value(value: Scalar) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    return json.dumps(value)  # a JSON string is a valid TOML basic string


def _table(header: str, items: Mapping[str, Scalar | None]) -> list[str]:
    lines = [header]
    lines += [f"{key} = {_toml_value(value)}" for key, value in items.items() if value is not None]
    return [*lines, ""]


def default_model_id(request: RepoRequest) -> str:
    """The checkpoint's name: the tokenizer folder, else the folder the recipes build
    ``llm/``, ``encoder/`` and ``decoder/`` into."""
    if request.tokenizer_dir is not None:
        return request.tokenizer_dir.resolve().name
    engine = (request.llm_engine or request.output).resolve()
    return engine.parent.name if engine.name in ("llm", "decoder") else engine.name


def served_model(request: RepoRequest, engines: Engines) -> dict[str, Scalar | None]:
    """The ``[[models]]`` entry: what the gateway needs to call this deployment right."""
    spec = request.spec
    return {
        "id": request.model_id or default_model_id(request),
        "family": spec.gateway_family,
        "triton_model": request.triton_model,
        "triton_url": request.triton_url,
        "max_images": request.max_images if spec.layout == "multimodal" else 0,
        "kv_tokens_per_block": engines.llm.tokens_per_block,
        "streaming": "delta",
        "end_id": spec.end_id,
        "pad_id": spec.pad_id,
        # Names the top_logprobs alternatives (the path as the gateway sees it: compose mounts
        # the models folder at the same path in both containers).
        "tokenizer": request.server_path(request.tokenizer_dir) if request.tokenizer_dir else None,
    }


def gateway_toml(request: RepoRequest, engines: Engines, launch: str) -> str:
    """A complete gateway config (loadable by ``gateway.config.load_settings``)."""
    lines = [
        "# Written by `mmgw trtllm-repo` for the Triton model repository",
        f"#   {request.output.resolve()}",
        "# Serve it with: mmgw serve --config <this file>",
        f"# Triton launch: {launch}",
        "",
        *_table("[server]", {"host": "0.0.0.0", "port": 8000}),
        *_table("[embedded]", {"enabled": False}),
    ]
    if request.spec.layout == "multimodal":
        lines += _table("[media]", {"max_images_per_request": request.max_images})
    lines += _table("[[models]]", served_model(request, engines))
    return "\n".join(lines)


def launch_script(request: RepoRequest, all_models: str) -> PurePosixPath:
    """NVIDIA's launcher sits in ``scripts/`` beside ``all_models/`` in the backend tree."""
    if request.launch_script is not None:
        return request.launch_script
    return PurePosixPath(all_models).parent / "scripts" / "launch_triton_server.py"


def launch_command(request: RepoRequest, all_models: str) -> str:
    """The one command that starts Triton over the repository, one MPI rank per GPU."""
    argv = [
        "python3",
        str(launch_script(request, all_models)),
        "--world_size",
        str(request.world_size),
        f"--model_repo={request.server_path(request.output)}",
        "--tensorrt_llm_model_name",
        RANK_MODELS[request.spec.layout],
        "--multimodal_gpu0_cuda_mem_pool_bytes",
        str(MULTIMODAL_GPU0_POOL_BYTES),
    ]
    return shlex.join(argv)


def models_dir(request: RepoRequest) -> str | None:
    """The folder holding the repository, engines and tokenizer: compose mounts it as is."""
    local = [request.output, request.llm_engine, request.visual_engine, request.encoder_engine]
    paths = [request.server_path(p) for p in [*local, request.tokenizer_dir] if p is not None]
    common = os.path.commonpath(paths)
    return None if common == "/" else common


def compose_env(request: RepoRequest, gateway_config: str) -> dict[str, str]:
    """The docker-compose variables that launch this repository (see deploy/README.md)."""
    shared = models_dir(request)
    return {
        **({"MODELS_DIR": shared} if shared else {}),
        "TRITON_MODEL_REPO": request.server_path(request.output),
        "TRITON_WORLD_SIZE": str(request.world_size),
        "TRITON_LLM_MODEL_NAMES": RANK_MODELS[request.spec.layout],
        "GATEWAY_CONFIG": gateway_config,
    }
