"""Where a reference model's weights come from: a real checkpoint, or tiny generated ones.

Nothing can be downloaded, so without a checkpoint a tiny model of the real architecture is
generated locally with seeded weights, once, into
``$MMGW_REFERENCE_CACHE/<model name>-<hash of the tiny spec and generator version>``
(default cache ``~/.cache/mmgw/reference``). Generation writes into a temporary folder beside the
target and renames it into place, so a reader never sees half a checkpoint and two processes that
race (Triton's stub and a test) both end up using one complete copy.

A real Hugging Face checkpoint folder is taken from the explicit argument, else from
``MMGW_REFERENCE_<FAMILY>_CHECKPOINT``. Device: ``MMGW_REFERENCE_DEVICE`` = cpu | cuda | auto;
fp32 on CPU, fp16 on CUDA.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from transformers import AutoTokenizer, GenerationConfig, PreTrainedModel, PreTrainedTokenizerBase

from server_repo.reference_kit.archs import Arch

GENERATOR_VERSION = "1"
DEFAULT_CACHE_DIR = Path("~/.cache/mmgw/reference")
MARKER_FILE = "mmgw_reference.json"


@dataclass(frozen=True)
class ModelAssets:
    """A loaded model with what serving it needs."""

    directory: Path
    model: PreTrainedModel
    tokenizer: PreTrainedTokenizerBase
    processor: Any
    device: torch.device
    tiny: bool


def cache_root(cache_dir: Path | str | None = None) -> Path:
    """The explicit folder, else ``$MMGW_REFERENCE_CACHE``, else ``~/.cache/mmgw/reference``."""
    chosen = cache_dir or os.environ.get("MMGW_REFERENCE_CACHE") or DEFAULT_CACHE_DIR
    return Path(chosen).expanduser()


def resolve_checkpoint(arch: Arch, checkpoint: str | None) -> Path | None:
    """The real checkpoint folder to serve, or None for the tiny generated model."""
    chosen = checkpoint or os.environ.get(f"MMGW_REFERENCE_{arch.family.upper()}_CHECKPOINT")
    if not chosen:
        return None
    path = Path(chosen).expanduser()
    if not (path / "config.json").is_file():
        raise FileNotFoundError(f"{path} is not a Hugging Face checkpoint folder (no config.json)")
    return path


def resolve_device(device: str | None = None) -> torch.device:
    """``cpu``, ``cuda`` or ``auto`` (the default: CUDA when available)."""
    name = (device or os.environ.get("MMGW_REFERENCE_DEVICE") or "auto").lower()
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise RuntimeError("MMGW_REFERENCE_DEVICE asks for CUDA but torch sees no GPU")
    return torch.device(name)


def fingerprint(arch: Arch) -> str:
    """Short hash naming the tiny checkpoint: changes whenever the spec or generator changes."""
    source = json.dumps(
        {"name": arch.name, "spec": arch.tiny_spec, "version": GENERATOR_VERSION},
        sort_keys=True,
    )
    return hashlib.sha256(source.encode()).hexdigest()[:12]


def tiny_checkpoint(arch: Arch, cache_dir: Path | str | None = None) -> Path:
    """The tiny checkpoint folder for ``arch``, generating it first if it is missing."""
    root = cache_root(cache_dir)
    target = root / f"{arch.name}-{fingerprint(arch)}"
    if (target / MARKER_FILE).is_file():
        return target
    root.mkdir(parents=True, exist_ok=True)
    print(f"generating tiny reference weights for {arch.name} into {target}", file=sys.stderr)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=root))
    try:
        write_tiny_checkpoint(arch, staging)
        try:
            staging.rename(target)
        except OSError:
            # Another process won the race; its copy is complete (renamed whole), use it.
            if not (target / MARKER_FILE).is_file():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def write_tiny_checkpoint(arch: Arch, directory: Path) -> None:
    """Tokenizer, processor files, seeded weights and a marker, all into ``directory``."""
    tokenizer = arch.build_tokenizer()
    config = arch.tiny_config(tokenizer)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(arch.tiny_spec["seed"])
        model = arch.model_class(config)
        arch.finish_tiny_model(model, tokenizer)
    marker = {"model": arch.name, "fingerprint": fingerprint(arch), "version": GENERATOR_VERSION}
    save_checkpoint(arch, model, tokenizer, directory, marker)


def save_checkpoint(
    arch: Arch,
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    directory: Path,
    marker: dict[str, Any],
    max_shard_size: str | None = None,
) -> None:
    """A generated model as an ordinary Hugging Face folder: weights (safetensors, in shards
    of ``max_shard_size`` when given), generation config, tokenizer, processor files, and the
    ``marker`` last, so a folder with a marker is complete."""
    model.generation_config = GenerationConfig(
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    shards = {"max_shard_size": max_shard_size} if max_shard_size else {}
    model.save_pretrained(directory, **shards)
    tokenizer.save_pretrained(directory)
    arch.save_processor(tokenizer, directory)
    (directory / MARKER_FILE).write_text(json.dumps(marker, indent=2) + "\n")


def load_assets(
    arch: Arch,
    cache_dir: Path | str | None = None,
    checkpoint: str | None = None,
    device: str | None = None,
) -> ModelAssets:
    """Load the real checkpoint if one is configured, else the (generated) tiny one."""
    real = resolve_checkpoint(arch, checkpoint)
    directory = real or tiny_checkpoint(arch, cache_dir)
    target = resolve_device(device)
    dtype = torch.float16 if target.type == "cuda" else torch.float32
    model = arch.model_class.from_pretrained(directory, dtype=dtype).to(target).eval()
    tokenizer = AutoTokenizer.from_pretrained(directory)
    processor = arch.load_processor(directory)
    return ModelAssets(directory, model, tokenizer, processor, target, tiny=real is None)


def publish_tokenizer(tokenizer: PreTrainedTokenizerBase, name: str) -> Path | None:
    """Write the served model's ``tokenizer.json`` to ``$MMGW_REFERENCE_TOKENIZERS/<name>/``.

    A TensorRT-LLM deployment returns logits by token id and no ids at all; the gateway names
    the top alternatives with the engine's tokenizer. The embedded gateway sets the variable and
    reads the file from there. Written to a temporary name and renamed, so a reader never sees
    half a file. None when the variable is unset or the tokenizer is not a fast one."""
    root = os.environ.get("MMGW_REFERENCE_TOKENIZERS")
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if not root or backend is None:
        return None
    folder = Path(root).expanduser() / name
    folder.mkdir(parents=True, exist_ok=True)
    handle, staging = tempfile.mkstemp(prefix=".tokenizer-", suffix=".json", dir=folder)
    os.close(handle)
    try:
        backend.save(staging)
        os.replace(staging, folder / "tokenizer.json")
    finally:
        if os.path.exists(staging):
            os.unlink(staging)
    return folder / "tokenizer.json"


def publish_pretrained_tokenizer(tokenizer: PreTrainedTokenizerBase, name: str) -> Path | None:
    """``publish_tokenizer``, plus the rest of the Hugging Face tokenizer folder
    (``tokenizer_config.json`` with its chat template): what a gateway pointed at
    ``$MMGW_REFERENCE_TOKENIZERS/<name>`` needs to render prompts itself (NVIDIA's ``llmapi``
    model takes finished prompts). Each file is written beside its target and renamed."""
    tokenizer_json = publish_tokenizer(tokenizer, name)
    if tokenizer_json is None:
        return None
    folder = tokenizer_json.parent
    staging = Path(tempfile.mkdtemp(prefix=".tokenizer-", dir=folder))
    try:
        tokenizer.save_pretrained(staging)
        for item in staging.iterdir():
            if item.name != "tokenizer.json":
                os.replace(item, folder / item.name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return folder
