"""Hugging Face-compatible pixel preprocessing in plain numpy and PIL.

Families whose deployment takes preprocessed ``image_input`` (LLaVA, BLIP2, VILA) need the
exact pixels the model was trained on, which is what the Hugging Face slow image processor
(the PIL backend, ``CLIPImageProcessorPil`` in transformers 5) produces. This module repeats
its steps and arithmetic: convert to RGB (alpha on white), resize with PIL, centre-crop (with
zero padding when the image is smaller), rescale in float64 then cast to float32, normalise in
float32, channels first. The tests compare it with transformers, value for value.

Pure and synchronous; the pipeline runs it in worker threads. Decoding is ``media/image.py``'s.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from PIL import Image

from gateway.errors import MediaTooLarge
from gateway.media import stripes

__all__ = [
    "CLIP_336",
    "MAX_RESIZE_PIXELS",
    "OPENAI_CLIP_MEAN",
    "OPENAI_CLIP_STD",
    "PixelSpec",
    "center_crop",
    "convert_rgb",
    "fitted_to_side",
    "normalise_table",
    "output_size",
    "preprocess",
    "resize_to_fit",
    "to_fp16_batch",
]

MAX_RESIZE_PIXELS = 16_000_000  # past this, only the crop window is resampled (see _resize)
OPENAI_CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
OPENAI_CLIP_STD = (0.26862954, 0.26130258, 0.27577711)


@dataclass(frozen=True)
class PixelSpec:
    """One family's pixel recipe, field for field as in a Hugging Face preprocessor config.

    Sizes are (height, width), as in HF. Give ``shortest_edge`` (aspect kept) or ``size``
    (exact), or neither to skip resizing; ``None`` for crop, rescale or normalisation skips it.
    """

    shortest_edge: int | None = None
    size: tuple[int, int] | None = None
    resample: Image.Resampling = Image.Resampling.BICUBIC
    crop_size: tuple[int, int] | None = None
    rescale_factor: float | None = 1 / 255
    image_mean: tuple[float, float, float] | None = None
    image_std: tuple[float, float, float] | None = None
    do_convert_rgb: bool = True

    def __post_init__(self) -> None:
        if self.shortest_edge is not None and self.size is not None:
            raise ValueError("give shortest_edge or size, not both")
        if (self.image_mean is None) != (self.image_std is None):
            raise ValueError("image_mean and image_std go together")
        sides = [self.shortest_edge or 1, *(self.size or ()), *(self.crop_size or ())]
        if min(sides) < 1:
            raise ValueError("sizes must be positive")


CLIP_336 = PixelSpec(
    shortest_edge=336,
    resample=Image.Resampling.BICUBIC,
    crop_size=(336, 336),
    rescale_factor=1 / 255,
    image_mean=OPENAI_CLIP_MEAN,
    image_std=OPENAI_CLIP_STD,
)
"""LLaVA-1.5's CLIP ViT-L/14-336 processor: shortest edge 336, bicubic, 336 x 336 crop."""


def convert_rgb(image: Image.Image) -> Image.Image:
    """HF's ``convert_to_rgb``: transparency (alpha band or palette/tRNS) composited on white."""
    if image.mode == "RGB":
        return image
    if "A" in image.getbands() or image.info.get("transparency") is not None:
        rgba = image.convert("RGBA")
        white = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(white, rgba).convert("RGB")
    return image.convert("RGB")


def output_size(height: int, width: int, spec: PixelSpec) -> tuple[int, int]:
    """The (height, width) ``spec`` resizes a ``height`` x ``width`` image to, before cropping.

    Shortest edge follows HF's ``get_resize_output_image_size`` to the letter, including
    its truncating ``int()``, so sizes agree pixel for pixel.
    """
    if spec.size is not None:
        return spec.size
    if spec.shortest_edge is None:
        return height, width
    short, long = (width, height) if width <= height else (height, width)
    new_short, new_long = spec.shortest_edge, int(spec.shortest_edge * long / short)
    return (new_long, new_short) if width <= height else (new_short, new_long)


def center_crop(array: np.ndarray[Any, Any], size: tuple[int, int]) -> np.ndarray[Any, Any]:
    """Centre-crop an [H, W, C] array to ``size``, zero-padding sides that are too short.

    The offsets use HF's ``center_crop`` arithmetic (floor division, then ceil padding), so a
    small or odd-sized image lands on the same pixels.
    """
    height, width = array.shape[:2]
    crop_h, crop_w = size
    top, left = (height - crop_h) // 2, (width - crop_w) // 2
    if top >= 0 and left >= 0:
        return array[top : top + crop_h, left : left + crop_w]
    new_h, new_w = max(crop_h, height), max(crop_w, width)
    canvas = np.zeros((new_h, new_w, *array.shape[2:]), dtype=array.dtype)
    pad_top, pad_left = math.ceil((new_h - height) / 2), math.ceil((new_w - width) / 2)
    canvas[pad_top : pad_top + height, pad_left : pad_left + width] = array
    top, left = top + pad_top, left + pad_left
    return canvas[max(0, top) : min(new_h, top + crop_h), max(0, left) : min(new_w, left + crop_w)]


def preprocess(
    image: Image.Image, spec: PixelSpec, dtype: type[np.floating[Any]] = np.float32
) -> np.ndarray[Any, Any]:
    """One image -> [C, H, W] (C is 3 after RGB conversion), as HF's PIL backend does.

    HF computes in float32; ``dtype=np.float16`` gives those values cast to fp16 (the wire
    type of ``image_input``) without an extra pass over the image.
    """
    if spec.do_convert_rgb:
        image = convert_rgb(image)
    image, cropped = _resize(image, spec)
    array = np.asarray(image)
    if array.ndim == 2:
        array = array[:, :, np.newaxis]
    if spec.crop_size is not None and not cropped:
        array = center_crop(array, spec.crop_size)
    if array.dtype == np.uint8:
        return _normalise_by_table(array, spec, dtype)
    pixels = _normalise(array, spec).astype(np.float32, copy=False)
    return np.ascontiguousarray(pixels.transpose(2, 0, 1), dtype=dtype)


def _normalise(pixels: np.ndarray[Any, Any], spec: PixelSpec) -> np.ndarray[Any, Any]:
    """HF's arithmetic: rescale in float64 then cast to float32, normalise in float32."""
    if spec.rescale_factor is not None:
        pixels = (pixels.astype(np.float64) * spec.rescale_factor).astype(np.float32)
    if spec.image_mean is not None and spec.image_std is not None:
        if not np.issubdtype(pixels.dtype, np.floating):
            pixels = pixels.astype(np.float32)
        mean = np.asarray(spec.image_mean, dtype=pixels.dtype)
        std = np.asarray(spec.image_std, dtype=pixels.dtype)
        pixels = (pixels - mean) / std
    return pixels


@functools.lru_cache(maxsize=32)
def normalise_table(spec: PixelSpec, channels: int, dtype: np.dtype[Any]) -> np.ndarray[Any, Any]:
    """``_normalise`` of every uint8 value, per channel, in float32 then cast to ``dtype``."""
    levels = np.repeat(np.arange(256, dtype=np.uint8)[:, np.newaxis], channels, axis=1)
    table = _normalise(levels, spec).astype(np.float32, copy=False)
    return np.ascontiguousarray(table.T, dtype=dtype)


def _normalise_by_table(
    array: np.ndarray[Any, Any], spec: PixelSpec, dtype: type[np.floating[Any]] = np.float32
) -> np.ndarray[Any, Any]:
    """``_normalise`` for uint8 pixels as a lookup, written straight into [C, H, W] order.

    The same float operations on the same values give the same bits, so this equals the
    direct arithmetic exactly, at a third of its cost (no float64 image, no transpose copy).
    """
    height, width, channels = array.shape
    table = normalise_table(spec, channels, np.dtype(dtype))
    out = np.empty((channels, height, width), dtype=dtype)
    for channel in range(channels):
        # "wrap" skips the per-element bounds check of the default "raise": a uint8 index is
        # always inside a 256-entry table (about 20% faster on a 336 x 336 image).
        np.take(table[channel], array[:, :, channel], out=out[channel], mode="wrap")
    return out


def _resize(image: Image.Image, spec: PixelSpec) -> tuple[Image.Image, bool]:
    """Resize as ``spec`` says; returns the image and whether it is already centre-cropped.

    A shortest-edge resize of a thin strip is huge (1 x 16384 px -> 336 x 5.5M px, 5 GB) even
    though the crop keeps only 336 x 336 of it. Past ``MAX_RESIZE_PIXELS`` the crop window
    alone is resampled (PIL's ``box``): the same geometry and filter, identical on smooth
    content, within a few levels of HF on noise. Normal aspect ratios (up to ~1:140 for
    CLIP 336) never take this path and match HF exactly.
    """
    if spec.shortest_edge is None and spec.size is None:
        return image, False
    height, width = output_size(image.height, image.width, spec)
    if (height, width) == (image.height, image.width):
        return image, False  # PIL would hand back a copy: the same pixels, a pass later
    if height * width <= MAX_RESIZE_PIXELS:
        return stripes.resize(image, (width, height), spec.resample), False
    crop = spec.crop_size
    if crop is None or crop[0] > height or crop[1] > width:
        raise MediaTooLarge(
            f"The image's aspect ratio ({image.width}x{image.height}) is too extreme to process."
        )
    top, left = (height - crop[0]) // 2, (width - crop[1]) // 2
    scale_y, scale_x = image.height / height, image.width / width
    box = (left * scale_x, top * scale_y, (left + crop[1]) * scale_x, (top + crop[0]) * scale_y)
    return image.resize((crop[1], crop[0]), resample=spec.resample, box=box), True


def to_fp16_batch(arrays: Sequence[np.ndarray[Any, Any]]) -> np.ndarray[Any, Any]:
    """Per-image [3, H, W] arrays -> the fp16 ``image_input`` tensor [1, n, 3, H, W]."""
    if not arrays:
        raise ValueError("no images to stack")
    shapes = {a.shape for a in arrays}
    if len(shapes) != 1:
        raise ValueError(f"images must share one shape to stack, got {sorted(shapes)}")
    if len(arrays) == 1 and arrays[0].dtype == np.float16 and arrays[0].flags.c_contiguous:
        return arrays[0][np.newaxis, np.newaxis]  # one image prepared in fp16: a view, no copy
    stacked: np.ndarray[Any, Any] = np.stack(arrays).astype(np.float16, copy=False)  # one copy
    return stacked[np.newaxis]


def resize_to_fit(
    image: Image.Image,
    max_side: int,
    resample: Image.Resampling = Image.Resampling.BICUBIC,
) -> Image.Image:
    """Downscale (never upscale) so the longest side is at most ``max_side``, keeping aspect.

    For raw-pixel families (``image_bytes_input``), whose server-side processor resizes
    again: this only bounds the bytes sent, so small images pass through untouched.
    """
    new_size = fitted_to_side(image.width, image.height, max_side)
    if new_size == image.size:
        return image
    return image.resize(new_size, resample=resample)


def fitted_to_side(width: int, height: int, max_side: int) -> tuple[int, int]:
    """The (width, height) ``resize_to_fit`` gives an image of this size."""
    if max_side < 1:
        raise ValueError("max_side must be positive")
    if max(width, height) <= max_side:
        return width, height
    scale = max_side / max(width, height)
    return max(1, round(width * scale)), max(1, round(height * scale))
