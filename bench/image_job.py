"""``python -m bench image-job``: what one image costs the decode thread, in-process.

The job the gateway runs for a chat request with one JPEG (``prepare_image``: decode, in JPEG
draft mode when the model's input is much smaller, LLaVA-1.5's CLIP 336 preprocessing into
fp16, the content digest of the source bytes) on the bench's photo-like JPEGs, two ways:

- **warm**: back to back, best of ``--repeat`` (caches hot, the clock at speed): the code's
  own cost, the figure to compare before/after a change;
- **paced**: one job every ``--gap-ms`` in a thread of its own, as a paced request meets the
  decode lane (caches cold, the core perhaps asleep): the median, closer to what one request
  pays in the gateway's traces.

Each phase (decode, preprocess, digest) is printed as the job itself times it. Run it with
another checkout first on ``PYTHONPATH`` for a before/after pair, interleaved.
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time

from bench.media.inputs import photo_jpeg
from gateway.families.registry import get_family
from gateway.media.image import DEFAULT_DRAFT_MARGIN, ImageLimits
from gateway.pipeline._media_jobs import PreparedItem, image_digest_inputs, prepare_image


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("--sides", default="336,1024", help="JPEG sides")
    add("--repeat", type=int, default=200, help="warm jobs per side (best of)")
    add("--paced", type=int, default=30, help="paced jobs per side (median)")
    add("--gap-ms", type=float, default=100.0, help="pause between paced jobs")


def _job(data: bytes) -> PreparedItem:
    family = get_family("llava")
    digest = image_digest_inputs("bench", family, f"draft={DEFAULT_DRAFT_MARGIN:g}")
    return prepare_image(data, ImageLimits(), family, DEFAULT_DRAFT_MARGIN, digest)


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
    print(table(args), flush=True)
    return 0


def table(args: argparse.Namespace) -> str:
    """The job's phases per JPEG side, warm and paced, as a markdown table."""
    lines = [
        "| JPEG | run | job ms | decode ms | preprocess ms | digest ms | CPU ms per job |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for side in (int(s) for s in args.sides.split(",") if s):
        data = photo_jpeg(side, side, seed=side)
        _job(data)  # imports, tables, the family's caches
        started = time.process_time()
        warm = [_job(data) for _ in range(args.repeat)]
        cpu_ms = (time.process_time() - started) / args.repeat * 1e3
        paced = _paced(data, args.paced, args.gap_ms / 1e3)
        runs = [(f"warm, best of {args.repeat}", warm, "best", f"{cpu_ms:.3f}")]
        if paced:
            runs.append((f"paced every {args.gap_ms:g} ms, median of {len(paced)}", paced,
                         "median", "-"))  # fmt: skip
        for label, items, pick, cpu in runs:
            whole, decode, preprocess, digest = _phases(items, pick)
            lines.append(
                f"| {side} px, {len(data) // 1000} kB | {label} | {whole:.3f} | {decode:.3f} | "
                f"{preprocess:.3f} | {digest:.3f} | {cpu} |"
            )
    return "\n".join(lines)
