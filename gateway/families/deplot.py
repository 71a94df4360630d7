"""Deplot (Pix2Struct): an encoder-decoder whose encoder reads flattened image patches.

``image_input`` is fp16 [1, 1, 2048, 770]: up to 2048 patches of 16 x 16 px, each row
``[row id, column id, 768 pixel values]``, zero rows after the last patch. The recipe is
``Pix2StructImageProcessor``'s: standardise the whole image by its own mean and standard
deviation (no fixed mean/std), resize (bilinear, antialiased) to the largest grid of whole
patches that fits 2048 with the aspect kept, then cut patches row by row. The bilinear
resize runs in PIL's float mode, which filters as torch's antialiased interpolation does.

The encoder sees only the image: ``text_input`` is empty, as in NVIDIA's runner, and the
decoder starts from Pix2Struct's start token (its pad id, the server's default). Deplot's
VQA header (the question drawn above the chart) needs the Arial font the HF processor
downloads, so it is not rendered: the user's text is not part of the input. One image per
request, and one is required. No KV reuse: enc-dec engines have no paged KV cache.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from PIL import Image

from gateway.families._pixels import convert_rgb
from gateway.families.base import Conversation, Family, require_final_user_turn

MAX_PATCHES = 2048
PATCH = 16
DEPTH = 2 + 3 * PATCH * PATCH  # row id, column id, then RGB values


def standardise(pixels: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Per-image standardisation: (x - mean) / max(std, 1 / sqrt(elements)), in float32."""
    pixels = pixels.astype(np.float32)
    std = max(float(np.std(pixels)), 1.0 / math.sqrt(pixels.size))
    centred: np.ndarray[Any, Any] = pixels - np.mean(pixels)
    return centred / np.float32(std)


def patch_grid(height: int, width: int, max_patches: int = MAX_PATCHES) -> tuple[int, int]:
    """(rows, columns) of whole patches: the largest grid with the aspect kept that fits."""
    scale = math.sqrt(max_patches * (PATCH / height) * (PATCH / width))
    rows = max(min(int(scale * height / PATCH), max_patches), 1)
    cols = max(min(int(scale * width / PATCH), max_patches), 1)
    return rows, cols


def _resize_channels(pixels: np.ndarray[Any, Any], height: int, width: int) -> np.ndarray[Any, Any]:
    """Antialiased bilinear resize of a float32 [H, W, C] array, channel by channel."""
    channels = [
        np.asarray(
            Image.fromarray(np.ascontiguousarray(pixels[:, :, c]), mode="F").resize(
                (width, height), resample=Image.Resampling.BILINEAR
            )
        )
        for c in range(pixels.shape[2])
    ]
    return np.stack(channels, axis=-1)


def flattened_patches(image: Image.Image, max_patches: int = MAX_PATCHES) -> np.ndarray[Any, Any]:
    """float32 [max_patches, 770]: ids and pixels per patch, row by row, zero-padded."""
    pixels = standardise(np.asarray(convert_rgb(image)))
    rows, cols = patch_grid(pixels.shape[0], pixels.shape[1], max_patches)
    resized = _resize_channels(pixels, rows * PATCH, cols * PATCH)
    patches = resized.reshape(rows, PATCH, cols, PATCH, 3).transpose(0, 2, 1, 3, 4)
    patches = patches.reshape(rows * cols, PATCH * PATCH * 3)
    row_ids = np.repeat(np.arange(1, rows + 1, dtype=np.float32), cols)
    col_ids = np.tile(np.arange(1, cols + 1, dtype=np.float32), rows)
    out = np.zeros((max_patches, DEPTH), dtype=np.float32)
    out[: rows * cols] = np.column_stack([row_ids, col_ids, patches])
    return out


class Deplot(Family):
    name = "deplot"
    deployment_must_provide = (
        "an encoder-decoder deployment whose encoder reads the flattened patches "
        "and whose decoder starts at the pad id"
    )
    image_tensor = "image_input"
    features_per_image = MAX_PATCHES  # encoder positions (max_encoder_input_len 2048)
    requires_image = True
    max_images = 1
    supports_extra_id = False
    default_end_id = 1  # Pix2Struct's </s>
    default_pad_id = 0  # <pad>, also the decoder start token

    def render(self, conversation: Conversation) -> str:
        require_final_user_turn(conversation)
        return ""  # the encoder reads the image alone (see the module docstring)

    def prepare_image(self, image: Image.Image) -> np.ndarray[Any, Any]:
        return flattened_patches(image)

    def stack_images(self, arrays: Sequence[np.ndarray[Any, Any]]) -> np.ndarray[Any, Any]:
        if len(arrays) != 1:
            raise ValueError("Deplot takes one image per request")
        return arrays[0].astype(np.float16)[np.newaxis, np.newaxis]  # [1, 1, 2048, 770]

    def processing_options(self) -> str:
        return f"{self.name}:pix2struct:{MAX_PATCHES}x{PATCH}"
