"""A video sent as its frames -> N uniformly sampled RGB frames, like ``video.py``'s output.

vLLM's frame-list encoding, ``data:video/jpeg;base64,<frame>,<frame>,...`` (``local.py`` parses
its form into a ``FrameList``), is read as vLLM's ``VideoMediaIO.load_base64`` reads it: the
payload split at ``,``, each piece a base64 image (JPEG by the media type; PNG, WebP and GIF,
which vLLM's image loader also opens, are accepted too). The frames carry no timing, so they
are sampled by ``num_frames`` alone (evenly, first and last kept; ``fps`` has nothing to act
on), where vLLM keeps them all or, in newer versions, the first ``num_frames``.

Every frame is checked cheaply (its count against ``max_frames`` before anything is split,
then strict base64, the bytes of all frames against ``max_bytes``, and magic bytes of an
accepted image format), so a malformed list is refused whole; only the sampled frames are
decoded, each by ``image.py`` under the video's per-frame limits (side and pixels, read from
its header first), and all must share one size, as a video's frames do. Synchronous: the
caller offloads it to a media worker, under its memory cap and time budget.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
from PIL import Image

from gateway.errors import (
    MediaDecodeError,
    MediaError,
    MediaTooLarge,
    MediaURLError,
    UnsupportedMedia,
)
from gateway.media.image import SUPPORTED_FORMATS, ImageLimits, decode_image, sniff_image_format
from gateway.media.local import FRAME_LIST_TYPE, FrameList, decode_base64_payload
from gateway.media.video import FrameSampling, VideoLimits, output_size, sample_indices

__all__ = ["decode_frame_list"]


def decode_frame_list(
    frames: FrameList, limits: VideoLimits, sampling: FrameSampling
) -> np.ndarray[Any, Any]:
    """Sampled frames as uint8 ``[frames, H, W, 3]`` RGB.

    Raises MediaURLError (``invalid_video_url``: an empty or non-base64 frame),
    UnsupportedMedia (a frame that is no accepted image), MediaTooLarge (a limit) or
    MediaDecodeError (a corrupt frame, frames of different sizes).
    """
    count = frames.count
    if count > limits.max_frames:
        raise MediaTooLarge(
            f"The {FRAME_LIST_TYPE} frame list has {count} frames, over the limit of "
            f"{limits.max_frames} frames."
        )
    chosen = sample_indices(count, 0.0, dataclasses.replace(sampling, fps=None))
    if len(chosen) > limits.max_decoded_frames:
        raise MediaTooLarge(
            f"Sampling this video needs more than {limits.max_decoded_frames} decoded frames."
        )
    encoded = _sampled_bytes(frames, set(chosen), limits.max_bytes)
    image_limits = ImageLimits(
        max_bytes=limits.max_bytes, max_pixels=limits.max_pixels, max_side=limits.max_side
    )
    images = [_decode(encoded[index], index, count, image_limits) for index in chosen]
    first = images[0]
    for index, image in zip(chosen, images, strict=True):
        if image.size != first.size:
            raise MediaDecodeError(
                f"The frames differ in size: frame {chosen[0] + 1} is {_size(first)}, frame "
                f"{index + 1} is {_size(image)}; the frames of one video share one size."
            )
    width, height = output_size(first.width, first.height, sampling.max_short_side)
    return np.stack([_rgb(image, width, height) for image in images])


def _sampled_bytes(frames: FrameList, chosen: set[int], max_bytes: int) -> dict[int, bytes]:
    """Check every frame's base64 and format (and their bytes in all); keep the sampled."""
    kept: dict[int, bytes] = {}
    total = 0
    for index, text in enumerate(frames.payload.split(",")):
        where = f"Frame {index + 1} of {frames.count} in the {FRAME_LIST_TYPE} frame list"
        if not text.strip():
            raise MediaURLError(f"{where} is empty.", code="invalid_video_url")
        data = decode_base64_payload(text, max_bytes, where, code="invalid_video_url")
        total += len(data)
        if total > max_bytes:
            raise MediaTooLarge(
                f"The {FRAME_LIST_TYPE} frame list is over the limit of {max_bytes} bytes."
            )
        if sniff_image_format(data) is None:
            raise UnsupportedMedia(f"{where} is not a supported image ({SUPPORTED_FORMATS}).")
        if index in chosen:
            kept[index] = data
    return kept


def _decode(data: bytes, index: int, count: int, limits: ImageLimits) -> Image.Image:
    try:
        return decode_image(data, limits)
    except MediaError as exc:
        raise exc.located(None, item=f"frame {index + 1} of {count}") from exc


def _rgb(image: Image.Image, width: int, height: int) -> np.ndarray[Any, Any]:
    if image.size != (width, height):
        image = image.resize((width, height), Image.Resampling.BICUBIC)
    return np.asarray(image, dtype=np.uint8)


def _size(image: Image.Image) -> str:
    return f"{image.width}x{image.height}"
