"""Nougat: an encoder-decoder (Swin encoder, mBART decoder) reading one page, 896 x 672 px.

``image_input`` is fp16 [1, 1, 3, 896, 672], ``NougatImageProcessor``'s recipe: crop the
page's margins (rows and columns with no pixel darker than the threshold, after stretching
the grey levels to 0-255), resize the shorter side to 672 (bilinear), shrink to fit 896 x 672
(a thumbnail, bicubic with a reducing gap of 2), pad centred with black, rescale, normalise
with ImageNet's mean and std. 588 encoder positions: (896 / 32) x (672 / 32).

Nougat takes no prompt: ``text_input`` is empty. Its decoder starts at ``<s>`` (NVIDIA's
runner: ``decoder_start_id = config.decoder.bos_token_id``, tensorrt_llm/runtime/
multimodal_model_runner.py ``setup_inputs``); NVIDIA's Triton preprocessing instead starts it
at the pad id when no ``decoder_text_input`` comes (``decoder_input_id = pad_id``,
all_models/inflight_batcher_llm/preprocessing/1/model.py @c2e65b88). So the gateway sends
``<s>`` as the decoder prompt wherever the deployment declares ``decoder_text_input``, and
refuses a deployment that does not (it would decode from ``<pad>``). One image per request, and
one is required. No KV reuse (enc-dec).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from PIL import Image

from gateway.families._pixels import convert_rgb
from gateway.families.base import (
    TEXT_CONTRACT_INPUTS,
    Conversation,
    Family,
    require_final_user_turn,
)

SIZE = (896, 672)  # (height, width)
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
GRAY_THRESHOLD = 200


def crop_margin(image: Image.Image) -> Image.Image:
    """The bounding box of the page's dark pixels (grey levels stretched to 0-255 first)."""
    gray = np.asarray(image.convert("L")).astype(np.uint8)
    low, high = gray.min(), gray.max()
    if low == high:
        return image
    dark = (gray - low) / (high - low) * 255 < GRAY_THRESHOLD
    ys, xs = np.nonzero(dark)
    return image.crop((int(xs.min()), int(ys.min()), int(xs.max()) + 1, int(ys.max()) + 1))


def _resize_shorter(image: Image.Image, shorter: int) -> Image.Image:
    """Shorter side to ``shorter`` (HF's ``get_resize_output_image_size``, truncating)."""
    width, height = image.size
    if width <= height:
        size = (shorter, int(shorter * height / width))
    else:
        size = (int(shorter * width / height), shorter)
    return image.resize(size, resample=Image.Resampling.BILINEAR)


def _thumbnail(image: Image.Image) -> Image.Image:
    """Shrink so neither side exceeds ``SIZE``, aspect kept (HF's ``thumbnail``)."""
    width, height = image.size
    out_h, out_w = min(height, SIZE[0]), min(width, SIZE[1])
    if (out_h, out_w) == (height, width):
        return image
    if height > width:
        out_w = int(width * out_h / height)
    elif width > height:
        out_h = int(height * out_w / width)
    return image.resize((out_w, out_h), resample=Image.Resampling.BICUBIC, reducing_gap=2.0)


def preprocess_page(image: Image.Image) -> np.ndarray[Any, Any]:
    """float32 [3, 896, 672]."""
    image = _thumbnail(_resize_shorter(crop_margin(convert_rgb(image)), min(SIZE)))
    array = np.asarray(image)
    canvas = np.zeros((*SIZE, 3), dtype=np.uint8)
    top, left = (SIZE[0] - array.shape[0]) // 2, (SIZE[1] - array.shape[1]) // 2
    canvas[top : top + array.shape[0], left : left + array.shape[1]] = array
    pixels = (canvas.astype(np.float64) * (1 / 255)).astype(np.float32)
    mean = np.asarray(IMAGENET_MEAN, dtype=np.float32)
    std = np.asarray(IMAGENET_STD, dtype=np.float32)
    return np.ascontiguousarray(((pixels - mean) / std).transpose(2, 0, 1), dtype=np.float32)


class Nougat(Family):
    name = "nougat"
    deployment_must_provide = (
        "an encoder-decoder deployment taking decoder_text_input (tokenized without "
        "special tokens) as the decoder start"
    )
    image_tensor = "image_input"
    features_per_image = 588  # (896 / 32) x (672 / 32) Swin output positions
    requires_image = True
    max_images = 1
    supports_extra_id = False
    default_end_id = 2  # mBART's </s>
    default_pad_id = 1  # <pad>
    decoder_prompt = "<s>"  # the runner's decoder start (bos_token_id 0), tokenized server-side
    required_inputs = (*TEXT_CONTRACT_INPUTS, "decoder_text_input")

    def render(self, conversation: Conversation) -> str:
        require_final_user_turn(conversation)
        return ""  # Nougat reads the page alone

    def prepare_image(self, image: Image.Image) -> np.ndarray[Any, Any]:
        return preprocess_page(image)

    def stack_images(self, arrays: Sequence[np.ndarray[Any, Any]]) -> np.ndarray[Any, Any]:
        if len(arrays) != 1:
            raise ValueError("Nougat takes one image per request")
        return arrays[0].astype(np.float16)[np.newaxis, np.newaxis]

    def processing_options(self) -> str:
        return f"{self.name}:crop_margin:{SIZE}:imagenet"
