"""Write the model repository: copy the user's templates, fill them, verify, then publish.

The repository is built in a temporary sibling directory and renamed into place only after
every config parsed and agreed, so a refused run leaves nothing half-written behind.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from server_repo.trtllm.checks import check, load_engines
from server_repo.trtllm.errors import RepoError, TemplateError
from server_repo.trtllm.families import LAYOUT_MODELS, WHISPER_ASSETS
from server_repo.trtllm.fill import fill_template
from server_repo.trtllm.gateway_config import compose_env, gateway_toml, launch_command
from server_repo.trtllm.guided import TOKENIZER_INFO_FILE, tokenizer_info, wire_ensemble
from server_repo.trtllm.request import RepoRequest
from server_repo.trtllm.values import Values, model_values
from server_repo.trtllm.verify import verify_repository

#: Where all_models/ sits in a tensorrtllm_backend checkout, a TensorRT-LLM checkout, or
#: a checkout with the TensorRT-LLM submodule (relative to the path the user gave).
TEMPLATE_ROOTS = (
    ".",
    "all_models",
    "triton_backend/all_models",
    "tensorrt_llm/triton_backend/all_models",
)


@dataclass(frozen=True)
class Result:
    """What was written and how to start it."""

    repository: Path
    gateway_config: Path
    launch_command: str
    compose_env: dict[str, str]
    notes: list[str] = field(default_factory=list)


def find_all_models(root: Path) -> Path:
    """The ``all_models/`` directory under ``root`` (checkout or container path)."""
    for relative in TEMPLATE_ROOTS:
        candidate = (root / relative).resolve()
        if (candidate / "inflight_batcher_llm" / "tensorrt_llm" / "config.pbtxt").is_file():
            return candidate
    tried = ", ".join(str(root / r) for r in TEMPLATE_ROOTS)
    raise TemplateError(
        f"no Triton TensorRT-LLM templates under {root}. NVIDIA keeps them in two places: "
        "a TensorRT-LLM checkout, in triton_backend/all_models/ (current releases), and a "
        "tensorrtllm_backend checkout, in all_models/ (older releases; the Triton TRT-LLM "
        "container has /app/all_models). Pass either checkout, or the all_models/ folder "
        f"itself (looked for inflight_batcher_llm/tensorrt_llm/config.pbtxt in {tried})"
    )


def _copy_model(source: Path, target: Path, values: Values) -> list[str]:
    """Copy one model directory and fill its config; returns names left to backend defaults."""
    if not (source / "config.pbtxt").is_file():
        raise TemplateError(f"template {source / 'config.pbtxt'} not found")
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for name, value in values.items():
        if any(c in value for c in '"\\\n'):
            raise RepoError(f"value for {name} contains a quote, backslash or newline: {value!r}")
    filled = fill_template((source / "config.pbtxt").read_text(), values)
    if filled.left_bare:
        names = ", ".join(f"${{{n}}}" for n in sorted(filled.left_bare))
        raise TemplateError(
            f"{source / 'config.pbtxt'}: {names} sit outside quotes and this tool has no value "
            "for them (a newer template?); Triton could not parse the result"
        )
    (target / "config.pbtxt").write_text(filled.text)
    return sorted(filled.left_quoted)


def _whisper_assets(request: RepoRequest, bls_version_dir: Path) -> list[str]:
    """Copy the tokenizer and mel filters the BLS loads; they ship in ``openai-whisper``."""
    source = request.whisper_assets
    if source is None:
        spec = importlib.util.find_spec("whisper")
        if spec is not None and spec.origin is not None:
            source = Path(spec.origin).parent / "assets"
    missing = [n for n in WHISPER_ASSETS if source is None or not (source / n).is_file()]
    for name in WHISPER_ASSETS:
        if name not in missing and source is not None:
            shutil.copy2(source / name, bls_version_dir / name)
    if not missing:
        return []
    return [
        f"copy {', '.join(missing)} into {bls_version_dir.name}/ of whisper_bls before "
        "launching (pip install openai-whisper ships them, or pass --whisper-assets DIR)"
    ]


def _guided_decoding(request: RepoRequest, staging: Path) -> None:
    """Write xgrammar's tokenizer info beside ``tensorrt_llm``'s config; wire the ensemble."""
    assert request.tokenizer_dir is not None  # the multimodal layout requires it
    info = tokenizer_info(request.tokenizer_dir)
    (staging / "tensorrt_llm" / TOKENIZER_INFO_FILE).write_text(json.dumps(info))
    wire_ensemble(staging / "ensemble" / "config.pbtxt")


def _publish(staging: Path, output: Path, force: bool) -> None:
    if output.exists():
        if not force:
            raise RepoError(f"{output} exists; pass --force to replace it")
        shutil.rmtree(output)
    staging.rename(output)


def _gateway_config_path(request: RepoRequest) -> Path:
    return request.gateway_config or request.output.resolve().parent / "gateway.toml"


def refuse_overwrite(path: Path, force: bool, option: str) -> None:
    """An earlier run's file (another model's gateway config) is replaced only with --force."""
    if path.exists() and not force:
        raise RepoError(
            f"{path} exists (written by an earlier run?); pass {option} PATH to write "
            "another, or --force to replace it"
        )


def build_repository(request: RepoRequest) -> Result:
    """Check, fill, verify and write the repository plus its gateway config."""
    refuse_overwrite(_gateway_config_path(request), request.force, "--gateway-config")
    engines = load_engines(request)
    check(request, engines)
    all_models = find_all_models(request.templates)
    values = model_values(request, engines)
    output = request.output.resolve()
    output.parent.mkdir(parents=True, exist_ok=True)
    notes: list[str] = []
    with tempfile.TemporaryDirectory(prefix=f".{output.name}.", dir=output.parent) as tmp:
        staging = Path(tmp) / output.name
        staging.mkdir()
        for template, name in LAYOUT_MODELS[request.spec.layout]:
            left = _copy_model(all_models / template, staging / name, values[name])
            if left:
                notes.append(f"{name}: left to backend defaults: {', '.join(left)}")
        if request.spec.layout == "whisper":
            version_dir = staging / "whisper_bls" / "1"
            version_dir.mkdir(exist_ok=True)
            notes += _whisper_assets(request, version_dir)
        if request.guided_decoding:
            _guided_decoding(request, staging)
        notes += verify_repository(staging, values, request)
        _publish(staging, output, request.force)
    launch = launch_command(request, request.server_path(all_models))
    config_path = _gateway_config_path(request)
    config_path.parent.mkdir(parents=True, exist_ok=True)
    config_path.write_text(gateway_toml(request, engines, launch))
    env = compose_env(request, str(config_path.resolve()))
    return Result(output, config_path, launch, env, notes)
