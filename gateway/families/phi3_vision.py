"""Phi-3-vision: fp16 ``image_input`` of HD crops, with ``image_sizes_input``; client template.

The processor (remote code of microsoft/Phi-3-vision-128k-instruct) lays the image on a grid
of 336 px crops: it turns portrait images sideways, picks the largest scale whose grid holds
at most 16 crops, resizes (bilinear) to ``scale x 336`` wide, pads the height to a multiple
of 336 centred with white, turns back; the crops, row by row, follow a global view (the
whole HD image resized to 336 x 336, bicubic as torch interpolates, without antialias), and
zero crops pad the stack to 17. All CLIP-normalised: the wire tensor is [1, 17, 3, 336, 336].
The HD image's (height, width) goes as ``image_sizes_input`` when declared: the encoder
needs it to drop the padding crops. Features: ``(crops + 1) x 144 + 1 + (rows + 1) x 12``.

The server adds no template: the gateway writes Phi-3's chat form with ``<|image_1|>`` in the
turn that carried the image, system text first, ``<|assistant|>\\n`` last; ``<|end|>`` ends a
turn, so it is a stop string. One image per request.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from PIL import Image

from gateway.families._pixels import OPENAI_CLIP_MEAN, OPENAI_CLIP_STD, convert_rgb
from gateway.families.base import Conversation, Family, require_final_user_turn

CROP = 336
MAX_CROPS = 16
IMAGE = "<|image_1|>"
END = "<|end|>"


def _scale(width: int, height: int, max_crops: int) -> int:
    """The most crops across (landscape) whose grid still holds at most ``max_crops``."""
    ratio = width / height
    scale = 1
    while scale * math.ceil(scale / ratio) <= max_crops:
        scale += 1
    return scale - 1


def hd_image(image: Image.Image, max_crops: int = MAX_CROPS) -> Image.Image:
    """The processor's ``HD_transform``: resized to whole crops across, padded to whole crops
    down with white, centred; portrait images are handled turned sideways."""
    portrait = image.width < image.height
    if portrait:
        image = image.transpose(Image.Transpose.TRANSPOSE)
    new_w = int(_scale(image.width, image.height, max_crops) * CROP)
    new_h = int(new_w / (image.width / image.height))
    resized = image.resize((new_w, new_h), resample=Image.Resampling.BILINEAR)
    padded_h = math.ceil(new_h / CROP) * CROP
    canvas = Image.new("RGB", (new_w, padded_h), (255, 255, 255))
    canvas.paste(resized, (0, int((padded_h - new_h) / 2)))
    return canvas.transpose(Image.Transpose.TRANSPOSE) if portrait else canvas


def hd_size(height: int, width: int, max_crops: int = MAX_CROPS) -> tuple[int, int]:
    """(height, width) of ``hd_image`` for an image of this size, without resizing anything."""
    portrait = width < height
    if portrait:
        height, width = width, height
    new_w = int(_scale(width, height, max_crops) * CROP)
    padded_h = math.ceil(int(new_w / (width / height)) / CROP) * CROP
    return (new_w, padded_h) if portrait else (padded_h, new_w)


def features_for(height: int, width: int) -> int:
    """Image tokens for an original image of this size (the processor's ``num_img_tokens``)."""
    hd_h, hd_w = hd_size(height, width)
    rows, cols = hd_h // CROP, hd_w // CROP
    return (rows * cols + 1) * 144 + 1 + (rows + 1) * 12


def _cubic_taps(in_size: int, out_size: int) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """Source indices [4, out] and weights [4, out] of torch's bicubic interpolation
    (a = -0.75, half-pixel centres, edge indices clamped, no antialias)."""
    src = (np.arange(out_size) + 0.5) * (in_size / out_size) - 0.5
    base = np.floor(src).astype(int)
    t = src - base
    a = -0.75
    weights = np.stack(
        [
            ((a * (t + 1) - 5 * a) * (t + 1) + 8 * a) * (t + 1) - 4 * a,
            ((a + 2) * t - (a + 3)) * t * t + 1,
            ((a + 2) * (1 - t) - (a + 3)) * (1 - t) * (1 - t) + 1,
            ((a * (2 - t) - 5 * a) * (2 - t) + 8 * a) * (2 - t) - 4 * a,
        ]
    )
    indices = np.stack([np.clip(base + k, 0, in_size - 1) for k in range(-1, 3)])
    return indices, weights.astype(np.float32)


def global_view(pixels: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """[3, H, W] -> [3, 336, 336], bicubic without antialias (torch's ``interpolate``):
    four taps per output row, then four per column."""
    rows, row_w = _cubic_taps(pixels.shape[1], CROP)
    cols, col_w = _cubic_taps(pixels.shape[2], CROP)
    tall = sum(pixels[:, rows[k], :] * row_w[k][None, :, None] for k in range(4))
    out = sum(tall[:, :, cols[k]] * col_w[k][None, None, :] for k in range(4))
    return np.asarray(out, dtype=np.float32)


def preprocess_hd(image: Image.Image) -> np.ndarray[Any, Any]:
    """float32 [17, 3, 336, 336]: the global view, the crops row by row, zero crops."""
    hd = np.asarray(hd_image(convert_rgb(image)))
    pixels = hd.astype(np.float32) / np.float32(255)
    mean = np.asarray(OPENAI_CLIP_MEAN, dtype=np.float32)
    std = np.asarray(OPENAI_CLIP_STD, dtype=np.float32)
    pixels = ((pixels - mean) / std).transpose(2, 0, 1)
    rows, cols = hd.shape[0] // CROP, hd.shape[1] // CROP
    crops = pixels.reshape(3, rows, CROP, cols, CROP).transpose(1, 3, 0, 2, 4)
    out = np.zeros((MAX_CROPS + 1, 3, CROP, CROP), dtype=np.float32)
    out[0] = global_view(pixels)
    out[1 : 1 + rows * cols] = crops.reshape(rows * cols, 3, CROP, CROP)
    return out


class Phi3Vision(Family):
    name = "phi3_vision"
    deployment_must_provide = (
        "a preprocessing that places the HD image features at <|image_1|> "
        "(reading image_sizes_input)"
    )
    image_tensor = "image_input"
    image_sizes_tensor = "image_sizes_input"
    features_per_image = features_for(16 * CROP, CROP)  # 16 x 1 crops: the most tokens (2653)
    max_images = 1
    stop_strings = (END,)
    reserved_markers = (IMAGE, END, "<|user|>", "<|assistant|>", "<|system|>", "<|endoftext|>")

    def render(self, conversation: Conversation) -> str:
        require_final_user_turn(conversation)
        pieces: list[str] = []
        if conversation.system:
            pieces.append(f"<|system|>\n{conversation.system.strip()}{END}\n")
        for turn in conversation.turns:
            if turn.role == "user":
                slot = f"{IMAGE}\n" if turn.images else ""
                pieces.append(f"<|user|>\n{slot}{turn.text}{END}\n")
            else:
                pieces.append(f"<|assistant|>\n{turn.text}{END}\n")
        pieces.append("<|assistant|>\n")
        return "".join(pieces)

    def prepare_image(self, image: Image.Image) -> np.ndarray[Any, Any]:
        return preprocess_hd(image)

    def stack_images(self, arrays: Sequence[np.ndarray[Any, Any]]) -> np.ndarray[Any, Any]:
        if len(arrays) != 1:
            raise ValueError("Phi-3-vision takes one image per request")
        return arrays[0].astype(np.float16)[np.newaxis]  # [1, 17, 3, 336, 336]

    def image_sizes(self, sizes: Sequence[tuple[int, int]]) -> np.ndarray[Any, Any] | None:
        """The HD image's (height, width), which is what the encoder needs, not the original's."""
        hd = [hd_size(height, width) for height, width in sizes]
        return np.asarray(hd, dtype=np.int64).reshape(1, len(hd), 2)

    def processing_options(self) -> str:
        return f"{self.name}:hd{MAX_CROPS}x{CROP}:clip"

    def image_tokens(self, sizes: Sequence[tuple[int, int]]) -> int | None:
        return sum(features_for(height, width) for height, width in sizes)
