"""What is timed: each case is the gateway's path and its baseline on the same input.

Times are wall-clock per item (median of interleaved runs) plus the process CPU time of the
same runs: on a shared machine CPU time is the steadier of the two, and both sides are
single-threaded, so on an idle machine they agree.
"""

from __future__ import annotations

import asyncio
import io
import statistics
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import av
import numpy as np
from PIL import Image

from gateway.families._pixels import OPENAI_CLIP_MEAN, OPENAI_CLIP_STD
from gateway.families.registry import get_family
from gateway.media.image import DEFAULT_DRAFT_MARGIN, ImageLimits
from gateway.media.offload import Offloader, OffloadLimits
from gateway.media.threads import ThreadLane, ThreadLimits
from gateway.media.video import FrameSampling, VideoLimits, sample_indices
from gateway.pipeline._media_jobs import prepare_image, prepare_video

LLAVA = get_family("llava")
ONEVISION = get_family("llava_onevision")
FRAMES = 8


@dataclass(frozen=True)
class Case:
    name: str
    ours: Callable[[], Any]
    baseline: Callable[[], Any]
    ours_label: str
    baseline_label: str
    goal: float | None  # the speedup asked for
    runs: int
    agreement: Callable[[Any, Any], str]  # what the two outputs' difference is, in words
    cpu_comparable: bool = True  # False when the gateway's work runs in another process


@dataclass(frozen=True)
class Timing:
    case: Case
    agreement: str
    ours_ms: float
    baseline_ms: float
    ours_cpu_ms: float
    baseline_cpu_ms: float

    @property
    def speedup(self) -> float:
        return self.baseline_ms / self.ours_ms

    @property
    def cpu_speedup(self) -> float:
        return self.baseline_cpu_ms / self.ours_cpu_ms


def measure(case: Case) -> Timing:
    """One warm-up each (its outputs compared), then ``runs`` interleaved pairs."""
    agreement = case.agreement(case.ours(), case.baseline())
    samples: dict[str, list[tuple[float, float]]] = {"ours": [], "baseline": []}
    for run in range(case.runs):
        order = ("ours", "baseline") if run % 2 == 0 else ("baseline", "ours")
        for side in order:
            function = case.ours if side == "ours" else case.baseline
            wall, cpu = time.perf_counter(), time.process_time()
            function()
            samples[side].append((time.perf_counter() - wall, time.process_time() - cpu))
    ours, base = samples["ours"], samples["baseline"]
    return Timing(
        case,
        agreement,
        1000 * statistics.median(w for w, _ in ours),
        1000 * statistics.median(w for w, _ in base),
        1000 * statistics.median(c for _, c in ours),
        1000 * statistics.median(c for _, c in base),
    )


def _hf_processor() -> Any:
    warnings.filterwarnings("ignore", module="transformers")
    from transformers import CLIPImageProcessorPil

    return CLIPImageProcessorPil(
        size={"shortest_edge": 336},
        crop_size={"height": 336, "width": 336},
        resample=Image.Resampling.BICUBIC,
        image_mean=list(OPENAI_CLIP_MEAN),
        image_std=list(OPENAI_CLIP_STD),
    )


def image_case(name: str, data: bytes, goal: float | None, runs: int) -> Case:
    """LLaVA ``image_input`` [1, 1, 3, 336, 336] fp16 from JPEG bytes, both ways."""
    processor = _hf_processor()
    limits = ImageLimits()

    def ours() -> np.ndarray:
        item = prepare_image(data, limits, LLAVA, DEFAULT_DRAFT_MARGIN)
        return LLAVA.stack_images([item.array])

    def baseline() -> np.ndarray:
        with Image.open(io.BytesIO(data)) as image:
            pixels = processor(images=[image], return_tensors="np")["pixel_values"]
        return pixels.astype(np.float16)[np.newaxis]

    label = "HF CLIPImageProcessorPil"
    return Case(name, ours, baseline, "gateway job", label, goal, runs, pixel_agreement)


def pixel_agreement(ours: np.ndarray, theirs: np.ndarray) -> str:
    """Differences of the normalised pixels, in 8-bit input levels."""
    std = np.asarray(OPENAI_CLIP_STD, np.float32)[:, None, None]
    diff = np.abs(ours.astype(np.float32) - theirs.astype(np.float32))[0, 0] * std * 255
    if not diff.any():
        return "identical"
    return f"max {diff.max():.1f}, mean {diff.mean():.2f} levels"


def pooled_image_case(name: str, data: bytes, loop: asyncio.AbstractEventLoop, runs: int) -> Case:
    """The same job through the gateway's worker pool: what a request pays, IPC included."""
    processor_case = image_case(name, data, None, runs)
    pool = Offloader(OffloadLimits(workers=1), preload=("gateway.pipeline._media_jobs",))
    loop.run_until_complete(pool.start())
    limits = ImageLimits()

    def ours() -> np.ndarray:
        job = pool.run(prepare_image, data, limits, LLAVA, DEFAULT_DRAFT_MARGIN)
        return LLAVA.stack_images([loop.run_until_complete(job).array])

    return Case(
        name,
        ours,
        processor_case.baseline,
        "gateway job in a worker process",
        processor_case.baseline_label,
        None,
        runs,
        pixel_agreement,
        cpu_comparable=False,
    )


def lane_image_case(name: str, data: bytes, loop: asyncio.AbstractEventLoop, runs: int) -> Case:
    """The same job through the gateway's thread lane (media/threads.py), as a request whose
    JPEG the header bounds takes it: no process, no pickled array."""
    processor_case = image_case(name, data, None, runs)
    lane = ThreadLane(ThreadLimits(threads=1), item_timeout_s=15)
    limits = ImageLimits()

    def ours() -> np.ndarray:
        job = lane.run(prepare_image, data, limits, LLAVA, DEFAULT_DRAFT_MARGIN)
        return LLAVA.stack_images([loop.run_until_complete(job).array])

    return Case(
        name,
        ours,
        processor_case.baseline,
        "gateway job in the thread lane",
        processor_case.baseline_label,
        None,
        runs,
        pixel_agreement,
        cpu_comparable=True,  # one process: its CPU time counts the lane thread
    )


def video_case(name: str, clip: bytes, goal: float | None, runs: int) -> Case:
    """8 frames as uint8 [8, H, W, 3] (shorter side 384, as LLaVA-OneVision takes them)."""
    limits = VideoLimits(max_bytes=len(clip) + 1)
    sampling = FrameSampling(FRAMES, max_short_side=ONEVISION.video_max_short_side)

    def ours() -> np.ndarray:
        return prepare_video(clip, limits, sampling, ONEVISION).array

    def baseline() -> np.ndarray:
        return decode_every_frame(clip, sampling)

    label = "decode every frame"
    return Case(name, ours, baseline, "seek to 8 frames", label, goal, runs, frame_agreement)


def frame_agreement(ours: np.ndarray, theirs: np.ndarray) -> str:
    if ours.shape != theirs.shape:
        return f"DIFFERENT shapes {ours.shape} vs {theirs.shape}"
    return "identical frames" if np.array_equal(ours, theirs) else "DIFFERENT frames"


def decode_every_frame(clip: bytes, sampling: FrameSampling) -> np.ndarray:
    """The usual loader: decode the whole stream in order, keep the frames wanted (converted
    and scaled exactly as the gateway does), with the gateway's decoder settings."""
    with av.open(io.BytesIO(clip)) as container:
        stream = container.streams.video[0]
        stream.thread_type = "SLICE"
        stream.codec_context.thread_count = 1
        total = stream.frames
        duration = total / float(stream.average_rate)
        wanted = set(sample_indices(total, duration, sampling))
        short = sampling.max_short_side or min(stream.width, stream.height)
        scale = min(1.0, short / min(stream.width, stream.height))
        size = {"width": round(stream.width * scale), "height": round(stream.height * scale)}
        kept = [
            frame.to_ndarray(format="rgb24", interpolation="BICUBIC", **size)
            for index, frame in enumerate(container.decode(stream))
            if index in wanted
        ]
    return np.stack(kept)
