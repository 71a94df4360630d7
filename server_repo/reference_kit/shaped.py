"""Reference LLaVA checkpoints at a real model's dimensions, with random weights.

A measurement of the gateway against direct gRPC on a GPU needs the model's real compute shape
(a 7B prefill after a CLIP ViT-L/14-336 encoder), not its trained weights, and nothing can be
downloaded. So this generates the reference model's own architecture (``archs/llava.py``:
``LlavaForConditionalGeneration``, the kit's tokenizer and special tokens) at the sizes of a
shape in ``SHAPES``, with seeded random weights, as an ordinary Hugging Face folder that
``weights.load_assets(..., checkpoint=...)`` loads, so the embedded Triton serves it through
``[embedded] checkpoints`` (``MMGW_REFERENCE_LLAVA_CHECKPOINT``).

    python -m server_repo.reference_kit.shaped llava-1.5-7b OUT_DIR [--device cuda]

Seven billion parameters are built on the target device in its serving dtype (fp16 on CUDA):
an fp32 initialisation on the CPU would take minutes and 28 GB, so big shapes are refused on
the CPU; ``tiny`` is the same code at the tiny model's sizes, for tests on any machine.

The weights are Hugging Face's own initialisation (normal, ``init_range`` std, norms at one),
and then one change that keeps the output decodable: the language head's rows for ids that do
not decode to text on their own (the padding of the vocabulary to the real checkpoint's 32064,
and the special tokens) are zero. Their logits are then exactly 0 while the text tokens' are
spread around 0, so greedy decoding picks a text token: every streamed step carries text, and
the first token is never an end id (a random model would otherwise often start with an id the
tokenizer cannot name, and a client would see no text at all).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from transformers import LlavaConfig, PreTrainedModel, PreTrainedTokenizerBase

from server_repo.reference_kit.archs import LlavaArch
from server_repo.reference_kit.archs.base import tiny_llava_config
from server_repo.reference_kit.weights import MARKER_FILE, resolve_device, save_checkpoint

SHAPED_VERSION = "1"
# Shapes above this are generated on a GPU only (see the module's docstring).
MAX_CPU_PARAMETERS = 1_000_000_000

SHAPES: dict[str, dict[str, Any]] = {
    # llava-hf/llava-1.5-7b-hf's config.json (https://huggingface.co/llava-hf/llava-1.5-7b-hf,
    # transformers 4.39.3): vision_config CLIP ViT-L/14-336 (hidden 1024, intermediate 4096,
    # 24 layers, 16 heads, image 336, patch 14), vision_feature_layer -2, "default" strategy;
    # text_config lmsys/vicuna-7b-v1.5 with max_position_embeddings 4096 and vocab_size 32064,
    # its other sizes LlamaConfig's defaults there (hidden 4096, intermediate 11008, 32 layers,
    # 32 heads, 32 KV heads); tie_word_embeddings false. 7,063,427,072 parameters.
    "llava-1.5-7b": {
        "vision": {"hidden": 1024, "intermediate": 4096, "layers": 24, "heads": 16, "image": 336},
        "text": {"hidden": 4096, "intermediate": 11008, "layers": 32, "heads": 32, "kv_heads": 32},
        "vocab": 32064,
        "max_positions": 4096,
        "init_range": 0.02,
        "seed": 1234,
    },
    # The tiny reference LLaVA's sizes (archs/llava.py), its vocabulary padded as the real one
    # is, so the padding path runs on a CPU too.
    "tiny": {
        "vision": {"hidden": 32, "intermediate": 64, "layers": 2, "heads": 2, "image": 336},
        "text": {"hidden": 64, "intermediate": 128, "layers": 2, "heads": 4, "kv_heads": 2},
        "vocab": 1024,
        "max_positions": 4096,
        "init_range": 0.5,
        "seed": 1234,
    },
}
SHARD_SIZE = "5GB"  # safetensors files of the weights (three for the 7B shape)
PATCH_SIZE = 14  # CLIP ViT-L/14, as clip_vision_config builds every LLaVA tower


def shape_spec(name: str) -> dict[str, Any]:
    """The shape's sizes, or a ValueError naming the shapes there are."""
    if name not in SHAPES:
        raise ValueError(f"unknown shape {name!r}; shapes: {', '.join(SHAPES)}")
    return SHAPES[name]


def shape_fingerprint(name: str) -> str:
    """Short hash of the shape's sizes and this generator's version: a folder generated from
    other sizes or by another version is not reused."""
    source = json.dumps({"shape": shape_spec(name), "version": SHAPED_VERSION}, sort_keys=True)
    return hashlib.sha256(source.encode()).hexdigest()[:12]


def shaped_config(name: str, tokenizer: PreTrainedTokenizerBase) -> LlavaConfig:
    """The reference LLaVA's config at the shape's sizes; special ids from ``tokenizer``."""
    spec = shape_spec(name)
    if spec["vocab"] < len(tokenizer):
        raise ValueError(f"shape {name!r}: vocab {spec['vocab']} < tokenizer {len(tokenizer)}")
    features = (spec["vision"]["image"] // PATCH_SIZE) ** 2  # 576 at 336 px
    config = tiny_llava_config(spec, tokenizer, "<image>", features)
    config.get_text_config(decoder=True).vocab_size = spec["vocab"]
    return config


def build_model(
    name: str, device: torch.device, dtype: torch.dtype
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """The shaped model built directly on ``device`` in ``dtype`` (``meta``: sizes only, no
    memory), seeded, its non-text head rows zeroed; with the kit's tokenizer."""
    arch = LlavaArch()
    tokenizer = arch.build_tokenizer()
    config = shaped_config(name, tokenizer)
    cuda = [device.index or 0] if device.type == "cuda" else []
    previous = torch.get_default_dtype()
    with torch.random.fork_rng(devices=cuda):
        torch.manual_seed(shape_spec(name)["seed"])
        torch.set_default_dtype(dtype)
        try:
            with torch.device(device):
                model = arch.model_class(config)
        finally:
            torch.set_default_dtype(previous)
    if device.type != "meta":
        mute_non_text_tokens(model, tokenizer)
    return model, tokenizer


def text_token_ids(tokenizer: PreTrainedTokenizerBase) -> list[int]:
    """Ids that decode to text on their own: the vocabulary less the special tokens."""
    special = set(tokenizer.all_special_ids)
    return sorted(i for i in tokenizer.get_vocab().values() if i not in special)


@torch.no_grad()
def mute_non_text_tokens(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> None:
    """Zero the language head's rows of every id that is not a text token (the module's
    docstring says why)."""
    # [vocab, hidden]
    head = model.get_output_embeddings().weight  # type: ignore[no-untyped-call]
    keep = torch.zeros(head.shape[0], dtype=torch.bool, device=head.device)
    keep[text_token_ids(tokenizer)] = True
    head[~keep] = 0


def parameter_count(name: str) -> int:
    """The shape's parameters, counted on the ``meta`` device (no memory, no time)."""
    model, _ = build_model(name, torch.device("meta"), torch.float16)
    return sum(p.numel() for p in model.parameters())


def write_shaped_checkpoint(
    name: str, directory: Path, device: torch.device, max_shard_size: str = SHARD_SIZE
) -> None:
    """Generate the shape on ``device`` (fp16 on CUDA, fp32 on the CPU) into ``directory``."""
    if device.type == "cpu" and parameter_count(name) > MAX_CPU_PARAMETERS:
        raise ValueError(
            f"shape {name!r} is generated on a GPU (--device cuda): on the CPU its fp32 "
            "initialisation takes minutes and four bytes per parameter"
        )
    dtype = torch.float16 if device.type == "cuda" else torch.float32
    model, tokenizer = build_model(name, device, dtype)
    marker = {
        "model": LlavaArch.name, "shape": name, "fingerprint": shape_fingerprint(name),
        "version": SHAPED_VERSION, "parameters": sum(p.numel() for p in model.parameters()),
    }  # fmt: skip
    save_checkpoint(LlavaArch(), model, tokenizer, directory, marker, max_shard_size)


def is_current(name: str, directory: Path) -> bool:
    """Whether ``directory`` holds a complete checkpoint of this shape and generator."""
    try:
        marker = json.loads((directory / MARKER_FILE).read_text())
    except (OSError, ValueError):
        return False
    return bool(
        marker.get("shape") == name and marker.get("fingerprint") == shape_fingerprint(name)
    )


def shaped_checkpoint(name: str, directory: Path, device: str | None = None) -> tuple[Path, bool]:
    """``directory`` holding the shape, generated unless already there; and whether it was
    generated now. Written into a folder beside it and renamed into place, so a reader never
    sees half a checkpoint; a stale one (other sizes, other version) is replaced, a folder
    of anything else is refused."""
    directory = directory.expanduser().resolve()
    if is_current(name, directory):
        return directory, False
    if directory.exists() and any(directory.iterdir()) and not (directory / MARKER_FILE).exists():
        raise ValueError(f"{directory} holds something else than a shaped checkpoint: not replaced")
    target = resolve_device(device)
    print(f"generating {name} on {target} into {directory} ...", file=sys.stderr, flush=True)
    directory.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{directory.name}-", dir=directory.parent))
    try:
        write_shaped_checkpoint(name, staging, target)
        if directory.exists():
            shutil.rmtree(directory)
        staging.rename(directory)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return directory, True


def folder_bytes(directory: Path) -> int:
    return sum(p.stat().st_size for p in directory.iterdir() if p.is_file())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m server_repo.reference_kit.shaped", description=__doc__.split("\n")[0]
    )
    parser.add_argument("shape", choices=sorted(SHAPES))
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--device", default="auto", help="cuda, cpu or auto (CUDA if present)")
    args = parser.parse_args(argv)
    started = time.monotonic()
    try:
        directory, generated = shaped_checkpoint(args.shape, args.out_dir, args.device)
    except (ValueError, RuntimeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    took = time.monotonic() - started
    what = f"generated in {took:.1f} s" if generated else "already there (reused)"
    size = folder_bytes(directory) / 1e9
    print(f"{args.shape}: {directory} {what}, {size:.2f} GB", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
