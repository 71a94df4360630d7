"""A ``PixelSpec``'s steps on a device tensor, for images decoded there (``media/cuda_jpeg.py``).

The steps and their order are ``_pixels.preprocess``'s: upright per EXIF, RGB, resize with the
spec's filter, back to uint8 as PIL's resize leaves it, centre crop with HF's offsets and zero
padding, then rescale and normalise through the same lookup table (``_pixels.normalise_table``), so
the values are HF's arithmetic to the bit. The one step that is not PIL's is the resize:
torch's antialiased bicubic and bilinear follow PIL's kernels (the support widened by the
downscale factor, bicubic's a = -0.5) but compute in float, not PIL's fixed point, so a pixel
may land one level off after rounding (``tests/gateway/families/test_pixels_torch.py``
bounds it).

Imported only where a gateway decodes on a device: it brings in torch.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image

from gateway.families._pixels import MAX_RESIZE_PIXELS, PixelSpec, normalise_table, output_size
from gateway.media.cuda_jpeg import NotForDevice
from gateway.media.stripes import horizontal_first

__all__ = ["on_device", "preprocess_tensor", "upright"]

_MODES = {Image.Resampling.BICUBIC: "bicubic", Image.Resampling.BILINEAR: "bilinear"}


def on_device(spec: PixelSpec) -> bool:
    """Whether ``spec``'s steps can run here: its filter is one torch antialiases as PIL does."""
    return spec.resample in _MODES and spec.do_convert_rgb


def upright(pixels: torch.Tensor, orientation: int) -> torch.Tensor:
    """[C, H, W] as PIL's ``exif_transpose`` turns it for EXIF ``orientation`` (1-8)."""
    if orientation == 2:  # mirrored
        return pixels.flip(-1)
    if orientation == 3:  # upside down
        return pixels.flip(-2, -1)
    if orientation == 4:  # flipped top to bottom
        return pixels.flip(-2)
    if orientation == 5:  # PIL's TRANSPOSE
        return pixels.transpose(-2, -1)
    if orientation == 6:  # PIL's ROTATE_270 (a quarter turn clockwise)
        return pixels.rot90(-1, (-2, -1))
    if orientation == 7:  # PIL's TRANSVERSE
        return pixels.transpose(-2, -1).flip(-2, -1)
    if orientation == 8:  # PIL's ROTATE_90 (a quarter turn anticlockwise)
        return pixels.rot90(1, (-2, -1))
    return pixels


def preprocess_tensor(
    pixels: torch.Tensor, orientation: int, spec: PixelSpec
) -> tuple[np.ndarray[Any, Any], tuple[int, int]]:
    """uint8 [3, H, W] as stored -> HF's fp16 [3, h, w] on the host, and the upright
    (height, width) it was prepared from. NotForDevice where the spec needs PIL."""
    if not on_device(spec):
        raise NotForDevice(f"a {spec.resample.name} resize")
    image = upright(pixels, orientation)
    size = (int(image.shape[1]), int(image.shape[2]))
    image = _resize(image, spec)
    if spec.crop_size is not None:
        image = _center_crop(image, spec.crop_size)
    table = _device_table(spec, image.device)
    channels, height, width = image.shape
    flat = image.reshape(channels, -1).long()
    values = torch.gather(table, 1, flat).reshape(channels, height, width)
    return values.cpu().numpy(), size


def _resize(image: torch.Tensor, spec: PixelSpec) -> torch.Tensor:
    if spec.shortest_edge is None and spec.size is None:
        return image
    height, width = output_size(int(image.shape[1]), int(image.shape[2]), spec)
    if (height, width) == tuple(image.shape[1:]):
        return image
    if height * width > MAX_RESIZE_PIXELS:
        raise NotForDevice("an extreme aspect ratio")  # PIL resamples the crop window alone
    mode = _MODES[spec.resample]
    source = (int(image.shape[2]), int(image.shape[1]))
    batch = image[None].float()
    # PIL's two passes in PIL's order, each rounded and clipped to uint8 as PIL stores its
    # intermediate image: in one float pass, a ringing overshoot the first clip would have cut
    # carries into the second (up to 24 levels off on noise, measured).
    steps = [(int(image.shape[1]), width), (height, width)]
    if not horizontal_first(source, (width, height)):
        steps = [(height, int(image.shape[2])), (height, width)]
    for size in steps:
        if size != tuple(batch.shape[2:]):
            batch = F.interpolate(batch, size=size, mode=mode, antialias=True)
            batch = batch.round_().clamp_(0, 255)
    return batch[0].to(torch.uint8)


def _center_crop(image: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    """``_pixels.center_crop`` on [C, H, W]: HF's offsets, zero padding where too short."""
    channels, height, width = image.shape
    crop_h, crop_w = size
    top, left = (height - crop_h) // 2, (width - crop_w) // 2
    if top >= 0 and left >= 0:
        return image[:, top : top + crop_h, left : left + crop_w]
    new_h, new_w = max(crop_h, height), max(crop_w, width)
    canvas = image.new_zeros((channels, new_h, new_w))
    pad_top, pad_left = math.ceil((new_h - height) / 2), math.ceil((new_w - width) / 2)
    canvas[:, pad_top : pad_top + height, pad_left : pad_left + width] = image
    top, left = top + pad_top, left + pad_left
    rows = slice(max(0, top), min(new_h, top + crop_h))
    return canvas[:, rows, max(0, left) : min(new_w, left + crop_w)]


@functools.lru_cache(maxsize=16)
def _device_table(spec: PixelSpec, device: torch.device) -> torch.Tensor:
    """``_pixels.normalise_table`` (each uint8 value normalised, per channel, fp16) there."""
    return torch.from_numpy(normalise_table(spec, 3, np.dtype(np.float16))).to(device)
