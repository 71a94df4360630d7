"""Tiny checkpoints: seeded and byte-identical, generated in seconds, atomic, loadable by HF."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoImageProcessor, AutoProcessor, AutoTokenizer

from server_repo.reference_kit.archs import LlavaArch, LlavaOnevisionArch, get_arch
from server_repo.reference_kit.weights import (
    MARKER_FILE,
    fingerprint,
    load_assets,
    resolve_checkpoint,
    resolve_device,
    tiny_checkpoint,
    write_tiny_checkpoint,
)


@pytest.mark.parametrize("family", ["llava", "llava_onevision"])
def test_generation_is_deterministic_and_fast(family: str, tmp_path: Path) -> None:
    arch = get_arch(family)
    started = time.monotonic()
    write_tiny_checkpoint(arch, (tmp_path / "a").resolve())
    elapsed = time.monotonic() - started
    write_tiny_checkpoint(arch, (tmp_path / "b").resolve())
    files_a = sorted(p.name for p in (tmp_path / "a").iterdir())
    assert files_a == sorted(p.name for p in (tmp_path / "b").iterdir())
    for name in files_a:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
    weights_a = load_file(tmp_path / "a" / "model.safetensors")
    weights_b = load_file(tmp_path / "b" / "model.safetensors")
    assert all(torch.equal(weights_a[k], weights_b[k]) for k in weights_a)
    size = sum(p.stat().st_size for p in (tmp_path / "a").iterdir())
    assert elapsed < 15 and size < 8_000_000


def test_tiny_checkpoint_is_cached_and_atomic_under_a_race(tmp_path: Path) -> None:
    arch = LlavaArch()
    results: list[Path] = []
    threads = [
        threading.Thread(target=lambda: results.append(tiny_checkpoint(arch, tmp_path)))
        for _ in range(2)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    target = tmp_path / f"reference_llava-{fingerprint(arch)}"
    assert results == [target, target]
    assert (target / MARKER_FILE).is_file()
    assert [p.name for p in tmp_path.iterdir()] == [target.name]  # no staging folder left
    stamp = (target / "model.safetensors").stat().st_mtime_ns
    assert tiny_checkpoint(arch, tmp_path) == target
    assert (target / "model.safetensors").stat().st_mtime_ns == stamp


def test_llava_checkpoint_geometry_and_hf_loading(reference_cache: Path) -> None:
    directory = tiny_checkpoint(LlavaArch(), reference_cache)
    tokenizer = AutoTokenizer.from_pretrained(directory)
    processor = AutoProcessor.from_pretrained(directory)
    assets = load_assets(LlavaArch(), reference_cache, device="cpu")
    config = assets.model.config
    assert config.image_token_index == tokenizer.convert_tokens_to_ids("<image>")
    assert config.text_config.vocab_size == len(tokenizer)
    vision = config.vision_config
    assert (vision.image_size, vision.patch_size) == (336, 14)
    assert (vision.image_size // vision.patch_size) ** 2 == 576
    assert processor.image_processor.crop_size["height"] == 336
    assert processor.tokenizer.bos_token == "<s>"


def test_onevision_checkpoint_geometry_and_hf_loading(reference_cache: Path) -> None:
    directory = tiny_checkpoint(LlavaOnevisionArch(), reference_cache)
    tokenizer = AutoTokenizer.from_pretrained(directory)
    image_processor = AutoImageProcessor.from_pretrained(directory, backend="pil")
    config = load_assets(LlavaOnevisionArch(), reference_cache, device="cpu").model.config
    assert config.image_token_index == tokenizer.convert_tokens_to_ids("<image>")
    assert config.video_token_index == tokenizer.convert_tokens_to_ids("<video>")
    assert config.text_config.eos_token_id == tokenizer.eos_token_id
    assert (config.vision_config.image_size, config.vision_config.patch_size) == (384, 14)
    assert image_processor.image_grid_pinpoints == config.image_grid_pinpoints
    # transformers' OneVision processor class needs torchvision for its video processor.
    pytest.importorskip("torchvision")
    assert AutoProcessor.from_pretrained(directory).num_image_tokens == 729


def test_checkpoint_resolution(monkeypatch: pytest.MonkeyPatch, reference_cache: Path) -> None:
    arch = LlavaArch()
    monkeypatch.delenv("MMGW_REFERENCE_LLAVA_CHECKPOINT", raising=False)
    assert resolve_checkpoint(arch, None) is None
    real = tiny_checkpoint(arch, reference_cache)
    monkeypatch.setenv("MMGW_REFERENCE_LLAVA_CHECKPOINT", str(real))
    assert resolve_checkpoint(arch, None) == real
    assets = load_assets(arch, device="cpu")
    assert not assets.tiny and assets.directory == real
    with pytest.raises(FileNotFoundError):
        resolve_checkpoint(arch, str(reference_cache / "missing"))


def test_device_resolution(monkeypatch: pytest.MonkeyPatch) -> None:
    assert resolve_device("cpu") == torch.device("cpu")
    monkeypatch.setenv("MMGW_REFERENCE_DEVICE", "cpu")
    assert resolve_device(None).type == "cpu"
    if not torch.cuda.is_available():
        assert resolve_device("auto").type == "cpu"
        with pytest.raises(RuntimeError):
            resolve_device("cuda")
