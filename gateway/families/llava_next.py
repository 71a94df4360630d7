"""LLaVA-NeXT (v1.6): fp16 ``image_input`` with anyres tiling done in the gateway.

The processor picks the grid pinpoint that keeps the most of the image (least waste),
resizes the image into it keeping its aspect ratio, pads it centred with zeros, cuts
336 px tiles, and puts the whole image squashed to 336 x 336 first: 1 + tiles patches, each
CLIP-normalised (``LlavaNextImageProcessor``; the tests compare value for value). The
encoder needs the original size to unpad the tile features, so ``image_sizes_input``
[1, 1, 2] (height, width) goes with it when the deployment declares it.

NVIDIA's runner wraps the Mistral checkpoint's prompt as ``[INST] `` + features +
``\\n{q} [/INST]``; the server adds that, so the gateway sends the question and earlier turns
in Mistral's form. One image per request (the runner's limit): up to 5 x 576 features plus
one newline feature per row of tiles (2928 at most, ``features_for``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from PIL import Image

from gateway.families._pixels import CLIP_336, convert_rgb, preprocess, to_fp16_batch
from gateway.families.base import Conversation, Family, require_final_user_turn
from gateway.families.tool_formats.registry import MISTRAL

TILE = 336
# (height, width) canvases of llava-hf/llava-v1.6-* (the processor's image_grid_pinpoints).
GRID_PINPOINTS: tuple[tuple[int, int], ...] = (
    (336, 672),
    (672, 336),
    (672, 672),
    (1008, 336),
    (336, 1008),
)
RESAMPLE = Image.Resampling.BICUBIC


def best_resolution(
    height: int, width: int, pinpoints: Sequence[tuple[int, int]] = GRID_PINPOINTS
) -> tuple[int, int]:
    """The (height, width) canvas that keeps the most pixels, then wastes the fewest (HF's rule)."""
    best = pinpoints[0]
    most_kept, least_wasted = 0, math.inf
    for canvas_h, canvas_w in pinpoints:
        scale = min(canvas_w / width, canvas_h / height)
        kept = min(int(width * scale) * int(height * scale), width * height)
        wasted = canvas_w * canvas_h - kept
        if kept > most_kept or (kept == most_kept and wasted < least_wasted):
            best, most_kept, least_wasted = (canvas_h, canvas_w), kept, wasted
    return best


def fitted_size(height: int, width: int, canvas: tuple[int, int]) -> tuple[int, int]:
    """The aspect-kept size inside ``canvas`` (HF's ``get_patch_output_size``, ceil included)."""
    canvas_h, canvas_w = canvas
    scale_w, scale_h = canvas_w / width, canvas_h / height
    if scale_w < scale_h:
        return min(math.ceil(height * scale_w), canvas_h), canvas_w
    return canvas_h, min(math.ceil(width * scale_h), canvas_w)


def anyres_patches(
    image: Image.Image, pinpoints: Sequence[tuple[int, int]] = GRID_PINPOINTS
) -> list[np.ndarray[Any, Any]]:
    """uint8 [H, W, 3] patches: the whole image at 336 x 336, then the tiles row by row."""
    image = convert_rgb(image)
    canvas = best_resolution(image.height, image.width, pinpoints)
    new_h, new_w = fitted_size(image.height, image.width, canvas)
    resized = np.asarray(image.resize((new_w, new_h), resample=RESAMPLE))
    padded = np.zeros((*canvas, 3), dtype=np.uint8)
    top, left = (canvas[0] - new_h) // 2, (canvas[1] - new_w) // 2
    padded[top : top + new_h, left : left + new_w] = resized
    base = np.asarray(image.resize((TILE, TILE), resample=RESAMPLE))
    tiles = [
        padded[y : y + TILE, x : x + TILE]
        for y in range(0, canvas[0], TILE)
        for x in range(0, canvas[1], TILE)
    ]
    return [base, *tiles]


def features_for(height: int, width: int) -> int:
    """Visual features one image becomes: 576 for the base, then the tile grid with its
    padding rows (or columns) removed and one newline feature per row (HF's ``unpad_image``
    and ``pack_image_features``)."""
    side = TILE // 14  # 24 patches of 14 px per tile side
    canvas_h, canvas_w = best_resolution(height, width)
    grid_h, grid_w = canvas_h // TILE * side, canvas_w // TILE * side
    if width / height > grid_w / grid_h:
        new_h = int(round(height * (grid_w / width), 7))
        grid_h -= 2 * ((grid_h - new_h) // 2)
    else:
        new_w = int(round(width * (grid_h / height), 7))
        grid_w -= 2 * ((grid_w - new_w) // 2)
    return side * side + grid_h * (grid_w + 1)


class LlavaNext(Family):
    name = "llava_next"
    deployment_must_provide = (
        "a preprocessing that wraps the text as '[INST] ' + features + newline + "
        "text + ' [/INST]' and unpads the tile features with image_sizes_input"
    )
    tool_format = MISTRAL
    image_tensor = "image_input"
    image_sizes_tensor = "image_sizes_input"
    # The most one image becomes: 576 for the base + 2 x 2 tiles (48 x 48) + 48 newlines.
    features_per_image = 2928
    max_images = 1
    low_detail_side = TILE  # detail "low": the smallest anyres canvas (two tiles at most)
    reserved_markers = ("<image>", "[INST]", "[/INST]", "</s>", "<s>")

    def render(self, conversation: Conversation) -> str:
        require_final_user_turn(conversation)
        pieces: list[str] = []
        for index, turn in enumerate(conversation.turns):
            if turn.role == "assistant":
                pieces.append(f" [/INST] {turn.text}</s>")
            elif turn.role == "tool":  # [TOOL_RESULTS] markup (tool_formats/mistral.py)
                pieces.append(turn.text)
            elif index == 0:
                system = conversation.system.strip() + "\n\n" if conversation.system else ""
                pieces.append(system + turn.text)
            else:
                pieces.append(f"[INST] {turn.text}")
        return "".join(pieces)

    def prepare_image(self, image: Image.Image) -> np.ndarray[Any, Any]:
        patches = anyres_patches(image)
        return np.stack([preprocess(Image.fromarray(p), CLIP_336) for p in patches])

    def stack_images(self, arrays: Sequence[np.ndarray[Any, Any]]) -> np.ndarray[Any, Any]:
        if len(arrays) != 1:
            raise ValueError("LLaVA-NeXT takes one image per request")
        return to_fp16_batch(list(arrays[0]))

    def processing_options(self) -> str:
        return f"llava_next:anyres:{GRID_PINPOINTS}:{CLIP_336!r}"

    def image_tokens(self, sizes: Sequence[tuple[int, int]]) -> int | None:
        return sum(features_for(height, width) for height, width in sizes)
