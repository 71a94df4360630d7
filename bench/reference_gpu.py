"""GPU check of the embedded reference path: the kit on CUDA, a checkpoint dir, Triton on CUDA.

Run on a machine with a GPU (``python -m bench.reference_gpu``). It prints, with progress:
1. greedy tokens of the tiny LLaVA and LLaVA-OneVision models on CPU (fp32) and CUDA, and
   whether they agree, plus decode speed on each device;
2. the same models loaded through the *checkpoint directory* path on CUDA (the folder the
   tiny weights were saved to is an ordinary Hugging Face checkpoint);
3. the real ``tritonserver`` from the nvidia-pytriton wheel serving both reference models
   with ``MMGW_REFERENCE_DEVICE=cuda``, queried through Triton's HTTP ``generate_stream``.
Nothing here needs the gateway's HTTP stack; only the wheel, torch and transformers.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import numpy as np

from gateway.triton.embedded import EmbeddedTriton
from server_repo.reference_kit import GenerationRequest, load_engine

MODELS = {"reference_llava": "llava", "reference_llava_onevision": "llava_onevision"}


def say(message: str) -> None:
    print(message, flush=True)


def sample_images(family: str) -> np.ndarray:
    rng = np.random.default_rng(0)
    if family == "llava":
        return rng.standard_normal((2, 3, 336, 336)).astype(np.float16)
    return rng.integers(0, 256, (2, 384, 512, 3), dtype=np.uint8)


def run_kit(
    name: str, cache: Path, device: str, checkpoint: str | None = None
) -> tuple[list[int], float]:
    engine = load_engine(name, cache_dir=cache, device=device, checkpoint=checkpoint)
    request = GenerationRequest(
        text_input="Describe the two pictures.",
        images=sample_images(MODELS[name]),
        max_tokens=32,
        temperature=0.0,
        top_k=1,
        end_id=-1,
    )
    engine.complete(request)  # warm-up (kernels, allocator)
    started = time.perf_counter()
    completion = engine.complete(request)
    elapsed = time.perf_counter() - started
    return completion.token_ids, len(completion.token_ids) / elapsed


def kit_checks(cache: Path) -> None:
    for name in MODELS:
        say(f"[kit] {name}: CPU fp32 ...")
        cpu_ids, cpu_rate = run_kit(name, cache, "cpu")
        say(f"[kit] {name}: CUDA ...")
        gpu_ids, gpu_rate = run_kit(name, cache, "cuda")
        same = sum(1 for a, b in zip(cpu_ids, gpu_ids, strict=False) if a == b)
        say(
            f"[kit] {name}: cpu {cpu_rate:.1f} tok/s, cuda {gpu_rate:.1f} tok/s; "
            f"greedy tokens equal on {same}/{len(cpu_ids)} (fp32 vs fp16)"
        )
        checkpoint = next(p for p in cache.iterdir() if p.name.startswith(name))
        ckpt_ids, _ = run_kit(name, cache, "cuda", checkpoint=str(checkpoint))
        say(
            f"[kit] {name}: checkpoint dir {checkpoint.name} on CUDA "
            f"reproduces: {ckpt_ids == gpu_ids}"
        )


def generate_stream(http_url: str, model: str) -> tuple[list[str], float]:
    body = json.dumps(
        {"text_input": "Hello there", "max_tokens": 16, "stream": True, "temperature": 0.0}
    )
    request = urllib.request.Request(
        f"{http_url}/v2/models/{model}/generate_stream",
        data=body.encode(),
        headers={"Content-Type": "application/json"},
    )
    started = time.perf_counter()
    pieces = []
    with urllib.request.urlopen(request, timeout=120) as response:
        for line in response:
            if line.startswith(b"data: "):
                pieces.append(json.loads(line[6:])["text_output"])
    return pieces, time.perf_counter() - started


async def triton_check(cache: Path) -> None:
    say("[triton] starting tritonserver with the reference models on CUDA ...")
    server = EmbeddedTriton(
        Path(__file__).resolve().parent.parent / "server_repo" / "reference",
        env={"MMGW_REFERENCE_CACHE": str(cache), "MMGW_REFERENCE_DEVICE": "cuda"},
    )
    started = time.perf_counter()
    await server.start()
    say(f"[triton] ready in {time.perf_counter() - started:.1f} s")
    try:
        for model in MODELS:
            pieces, elapsed = await asyncio.to_thread(generate_stream, server.http_url, model)
            say(
                f"[triton] {model}: {len(pieces)} streamed responses "
                f"in {elapsed * 1000:.0f} ms: {pieces[:6]}"
            )
    finally:
        await server.stop()


def main() -> int:
    import torch

    if not torch.cuda.is_available():
        say("no CUDA device: this check needs a GPU")
        return 2
    say(f"torch {torch.__version__} on {torch.cuda.get_device_name(0)}")
    with tempfile.TemporaryDirectory() as tmp:
        cache = Path(tmp)
        if "--triton-only" not in sys.argv:
            kit_checks(cache)
        asyncio.run(triton_check(cache))
    return 0


if __name__ == "__main__":
    sys.exit(main())
