"""``python -m bench image-job``: what one image costs the decode thread, in-process.

The job the gateway runs for a chat request with one JPEG (``prepare_image``: decode, in JPEG
draft mode when the model's input is much smaller, LLaVA-1.5's CLIP 336 preprocessing into
fp16, the content digest of the source bytes) on the bench's photo-like JPEGs, two ways:

- **warm**: back to back, best of ``--repeat`` (caches hot, the clock at speed): the code's
  own cost, the figure to compare before/after a change;
- **paced**: one job every ``--gap-ms`` in a thread of its own, as a paced request meets the
  decode lane (caches cold, the core perhaps asleep): the median, closer to what one request
  pays in the gateway's traces.

Each phase (decode, preprocess, digest) is printed as the job itself times it; the digest is
what the job still waited for it at the end (it runs beside the decode). ``--stripes 0,auto``
runs each side with the stripes' pool off (one thread, as before it) and at its default size,
interleaved, for a before/after pair in one run (``media/stripes.py``). Run it with another
checkout first on ``PYTHONPATH`` for a before/after pair of anything else.

``--device cuda`` times the job a gateway with ``[decode] device = "cuda"`` runs instead
(nvJPEG, the recipe in torch: ``pipeline/_device_jobs.py``), and says how far each job's
pixels are from PIL's full-size decode (the Hugging Face processor's input), in levels of 255.
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time

import numpy as np

from bench.media.inputs import photo_jpeg
from gateway.families.registry import get_family
from gateway.media import stripes
from gateway.media.cuda_jpeg import DeviceDecoder, open_device
from gateway.media.image import DEFAULT_DRAFT_MARGIN, ImageLimits
from gateway.pipeline._media_jobs import PreparedItem, image_digest_inputs, prepare_image


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("--sides", default="336,1024", help="JPEG sides")
    add("--repeat", type=int, default=200, help="warm jobs per side (best of)")
    add("--paced", type=int, default=30, help="paced jobs per side (median)")
    add("--gap-ms", type=float, default=100.0, help="pause between paced jobs")
    add("--stripes", default="auto", help="stripe pool sizes to compare, e.g. 0,auto (0: off)")
    add("--rounds", type=int, default=1, help="rounds of every stripe size, interleaved")
    add("--device", default="cpu", help="cpu (PIL), or cuda: the device's job, and its pixels")


_DEVICE: list[DeviceDecoder] = []  # the --device decoder, opened once


def _job(data: bytes) -> PreparedItem:
    family = get_family("llava")
    digest = image_digest_inputs("bench", family, f"draft={DEFAULT_DRAFT_MARGIN:g}")
    if _DEVICE:
        from gateway.pipeline._device_jobs import prepare_image_on_device

        item = prepare_image_on_device(data, ImageLimits(), family, _DEVICE[0], digest)
        assert item is not None, "the device declined the bench's JPEG"
        return item
    return prepare_image(data, ImageLimits(), family, DEFAULT_DRAFT_MARGIN, digest)


def fidelity(sides: list[int]) -> str:
    """How far the job's pixels (and the CPU job's, draft-decoded) are from PIL's full-size
    decode through the same recipe, in levels of 255 (one level: 1 / 255 / std)."""
    family = get_family("llava")
    spec = family.pixel_spec
    assert spec is not None and spec.image_std is not None
    level = 1 / 255 / np.asarray(spec.image_std).reshape(3, 1, 1)
    lines = ["| JPEG | job | mean levels off | max levels off |", "|---|---|---:|---:|"]
    for side in sides:
        data = photo_jpeg(side, side, seed=side)
        exact = prepare_image(data, ImageLimits(), family, 0.0).array.astype(np.float32)
        cpu = prepare_image(data, ImageLimits(), family, DEFAULT_DRAFT_MARGIN).array
        jobs = [("PIL, JPEG draft", cpu)]
        if _DEVICE:
            jobs.append((f"{_DEVICE[0].device} (nvJPEG)", _job(data).array))
        for name, array in jobs:
            off = np.abs(array.astype(np.float32) - exact) / level
            lines.append(f"| {side} px | {name} | {off.mean():.3f} | {off.max():.2f} |")
    return "\n".join(lines)


def _phases(items: list[PreparedItem], pick: str) -> tuple[float, float, float, float]:
    """(whole, decode, preprocess, digest) in ms: each phase's best or median."""
    reduce = min if pick == "best" else statistics.median
    return (
        reduce([i.decode_s + i.preprocess_s + i.digest_s for i in items]) * 1e3,
        reduce([i.decode_s for i in items]) * 1e3,
        reduce([i.preprocess_s for i in items]) * 1e3,
        reduce([i.digest_s for i in items]) * 1e3,
    )


def _paced(data: bytes, count: int, gap_s: float) -> list[PreparedItem]:
    items: list[PreparedItem] = []
    for _ in range(count):
        time.sleep(gap_s)
        worker = threading.Thread(target=lambda: items.append(_job(data)))
        worker.start()
        worker.join()
    return items


def main(args: argparse.Namespace) -> int:
    device = open_device(args.device)
    if device is not None:
        _DEVICE.append(device)
    print(table(args), flush=True)
    print("\nPixels against PIL's full-size decode (the Hugging Face processor's input):\n")
    print(fidelity([int(s) for s in args.sides.split(",") if s]), flush=True)
    return 0


def table(args: argparse.Namespace) -> str:
    """The job's phases per JPEG side and stripe pool size, warm and paced, as a markdown
    table; with several sizes and ``--rounds``, the sizes take turns (the host's noise is
    shared), and each row is its size's best (warm) or median (paced) over the rounds."""
    lines = [
        "| JPEG | stripe threads | run | job ms | decode ms | preprocess ms | digest ms | "
        "CPU ms per job |",
        "|---|---:|---|---:|---:|---:|---:|---:|",
    ]
    default = stripes.stripe_threads()
    auto = stripes.default_stripe_threads()  # for this process's cores (pinned: fewer)
    chosen = getattr(args, "stripes", "auto")  # gpu_goals' namespace names none
    sizes = [auto if s == "auto" else int(s) for s in chosen.split(",") if s]
    try:
        for side in (int(s) for s in args.sides.split(",") if s):
            data = photo_jpeg(side, side, seed=side)
            runs: dict[int, tuple[list[PreparedItem], list[PreparedItem], list[float]]] = {
                size: ([], [], []) for size in sizes
            }
            for _ in range(max(1, getattr(args, "rounds", 1))):
                for size in sizes:
                    stripes.configure(size)
                    warm, paced, cpu = runs[size]
                    _job(data)  # imports, tables, the family's caches, the pool's threads
                    started = time.process_time()
                    warm += [_job(data) for _ in range(args.repeat)]
                    cpu.append((time.process_time() - started) / args.repeat * 1e3)
                    paced += _paced(data, args.paced, args.gap_ms / 1e3)
            for size in sizes:
                lines += _rows(side, len(data), size, args, *runs[size])
    finally:
        stripes.configure(default)
    return "\n".join(lines)


def _rows(
    side: int,
    size_bytes: int,
    threads: int,
    args: argparse.Namespace,
    warm: list[PreparedItem],
    paced: list[PreparedItem],
    cpu: list[float],
) -> list[str]:
    runs = [(f"warm, best of {len(warm)}", warm, "best", f"{min(cpu):.3f}")]
    if paced:
        label = f"paced every {args.gap_ms:g} ms, median of {len(paced)}"
        runs.append((label, paced, "median", "-"))
    lines = []
    for label, items, pick, cpu_ms in runs:
        whole, decode, preprocess, digest = _phases(items, pick)
        lines.append(
            f"| {side} px, {size_bytes // 1000} kB | {threads} | {label} | {whole:.3f} | "
            f"{decode:.3f} | {preprocess:.3f} | {digest:.3f} | {cpu_ms} |"
        )
    return lines
