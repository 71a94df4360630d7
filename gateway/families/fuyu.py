"""Fuyu: fp16 ``image_input`` of variable size; the image is its own encoder input.

Fuyu has no vision tower: 30 x 30 pixel patches are projected straight into the decoder, so
the number of features follows the image. The gateway does what ``FuyuImageProcessor`` does
(downscale, bilinear, to fit 1080 x 1920, never up; pad with 1.0 on the 0-255 scale, then
rescale and normalise with 0.5 / 0.5) and sends only the part of the padded canvas the
processor's patches cover: the image rounded up to whole 30 px patches. The server reads
the patch grid from the tensor's shape and lays out the image placeholders (one per patch,
a newline per row) before the text, as the processor does; features = rows x (cols + 1).

The text goes as written (the server adds the BOS and the answer marker), an empty question
included: NVIDIA's runner builds Fuyu's ids from the processor's ``input_ids`` for the text
alone (its ``pre_prompt = "Describe this image:"`` is never read for Fuyu, tensorrt_llm/runtime/
multimodal_model_runner.py ``preprocess``), so no text is added here either. One image per
request.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from PIL import Image

from gateway.families._pixels import convert_rgb
from gateway.families.base import Conversation, Family
from gateway.families.kosmos2 import render_completion

CANVAS = (1080, 1920)  # (height, width) the processor fits images into
PATCH = 30
PAD_VALUE = 1.0  # on the 0-255 scale, before rescaling (as the processor pads)


def fitted_size(height: int, width: int) -> tuple[int, int]:
    """The processor's resize: fit inside ``CANVAS`` keeping aspect, only ever downscaling."""
    if height <= CANVAS[0] and width <= CANVAS[1]:
        return height, width
    scale = min(CANVAS[0] / height, CANVAS[1] / width)
    return int(height * scale), int(width * scale)


def features_for(height: int, width: int) -> int:
    """Patches plus one newline per patch row, for an image of this (original) size."""
    fitted_h, fitted_w = fitted_size(height, width)
    rows, cols = math.ceil(fitted_h / PATCH), math.ceil(fitted_w / PATCH)
    return rows * (cols + 1)


def preprocess_fuyu(image: Image.Image) -> np.ndarray[Any, Any]:
    """float32 [3, H, W] with H, W the fitted size rounded up to whole patches."""
    image = convert_rgb(image)
    height, width = fitted_size(image.height, image.width)
    if (height, width) != (image.height, image.width):
        image = image.resize((width, height), resample=Image.Resampling.BILINEAR)
    rows, cols = math.ceil(height / PATCH), math.ceil(width / PATCH)
    canvas = np.full((rows * PATCH, cols * PATCH, 3), PAD_VALUE, dtype=np.float64)
    canvas[:height, :width] = np.asarray(image)
    pixels = (canvas * (1 / 255)).astype(np.float32)
    pixels = (pixels - np.float32(0.5)) / np.float32(0.5)
    return np.ascontiguousarray(pixels.transpose(2, 0, 1), dtype=np.float32)


class Fuyu(Family):
    name = "fuyu"
    deployment_must_provide = (
        "a preprocessing that lays out Fuyu's patch placeholders (a newline per row), "
        "BOS, the text and the answer marker, as FuyuProcessor does"
    )
    image_tensor = "image_input"
    features_per_image = 36 * 65  # 1080 x 1920: 36 rows of 64 patches, a newline per row
    max_images = 1
    reserved_markers = ("|SPEAKER|", "|NEWLINE|", "<s>", "|ENDOFTEXT|")

    def render(self, conversation: Conversation) -> str:
        return render_completion(conversation, "")

    def prepare_image(self, image: Image.Image) -> np.ndarray[Any, Any]:
        return preprocess_fuyu(image)

    def stack_images(self, arrays: Sequence[np.ndarray[Any, Any]]) -> np.ndarray[Any, Any]:
        if len(arrays) != 1:
            raise ValueError("Fuyu takes one image per request")
        return arrays[0].astype(np.float16)[np.newaxis, np.newaxis]

    def processing_options(self) -> str:
        return f"{self.name}:fit{CANVAS}:bilinear:patch{PATCH}:pad{PAD_VALUE}"

    def image_tokens(self, sizes: Sequence[tuple[int, int]]) -> int | None:
        return sum(features_for(height, width) for height, width in sizes)
