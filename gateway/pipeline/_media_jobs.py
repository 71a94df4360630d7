"""The work a media worker process does for one item: decode, then the family's preparation.

Module-level functions, because the offloader sends them to worker processes by reference
(pickle); the worker imports this module at start, which brings in PIL, PyAV and the
families. Each returns the array with its timings, so the gateway's metrics can tell decode
time from preprocessing time although both ran elsewhere.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from gateway.families.base import Family
from gateway.media.audio import AudioLimits, decode_audio
from gateway.media.image import ImageLimits, decode_image
from gateway.media.local import FrameList
from gateway.media.video import FrameSampling, VideoLimits, decode_video
from gateway.media.video_frames import decode_frame_list

__all__ = ["PreparedItem", "prepare_audio", "prepare_image", "prepare_video"]


@dataclass(frozen=True)
class PreparedItem:
    """One item ready for the family's tensor, and what it cost in the worker."""

    array: np.ndarray
    decode_s: float
    preprocess_s: float
    pixels: int  # decoded pixels (width x height, summed over frames); 0 for audio
    size: tuple[int, int] = (0, 0)  # (height, width) of a decoded image, as decoded


def prepare_image(
    data: bytes, limits: ImageLimits, family: Family, draft_margin: float
) -> PreparedItem:
    """Decode (in JPEG draft mode when the family's input is much smaller) and preprocess."""
    started = time.perf_counter()
    image = decode_image(
        data, limits, target_size=family.image_decode_size, draft_margin=draft_margin
    )
    decoded = time.perf_counter()
    array = family.prepare_image(image)
    return PreparedItem(
        array,
        decoded - started,
        time.perf_counter() - decoded,
        image.width * image.height,
        (image.height, image.width),
    )


def prepare_video(
    data: bytes | FrameList, limits: VideoLimits, sampling: FrameSampling, family: Family
) -> PreparedItem:
    """Sample frames (seeking, downscaled by swscale; or, from a list of frames, decoding
    the sampled ones as images) and hand them to the family."""
    started = time.perf_counter()
    if isinstance(data, FrameList):
        frames = decode_frame_list(data, limits, sampling)
    else:
        frames = decode_video(data, limits, sampling)
    decoded = time.perf_counter()
    array = family.prepare_video(frames)
    pixels = int(frames.shape[0] * frames.shape[1] * frames.shape[2])
    return PreparedItem(array, decoded - started, time.perf_counter() - decoded, pixels)


def prepare_audio(data: bytes, limits: AudioLimits) -> PreparedItem:
    """Decode to 16 kHz mono float32 (families that take audio window it themselves)."""
    started = time.perf_counter()
    samples = decode_audio(data, limits)
    return PreparedItem(samples, time.perf_counter() - started, 0.0, 0)
