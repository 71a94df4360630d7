"""LLaVA-OneVision: raw uint8 ``image_bytes_input`` and ``video_bytes_input``; the server's
processor tiles images (anyres) and resizes video frames to 384 x 384.

NVIDIA's preprocessing wraps ``text_input`` as ``<|im_start|>user `` + features + ``\\n`` +
text + ``<|im_end|><|im_start|>assistant\\n``; the gateway sends the system text, the first
question and earlier turns in Qwen2's ChatML form. Images travel as decoded pixels,
downscaled only as far as the processor would anyway (its largest anyres canvas); video
frames with their shorter side at most 384, which the processor's 384 x 384 resize keeps.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from PIL import Image

from gateway.errors import UpstreamUnavailable
from gateway.families._pixels import fitted_to_side, resize_to_fit
from gateway.families.base import (
    NVIDIA_PREPROCESSING,
    ONE_RAW_IMAGE,
    Conversation,
    Family,
    require_final_user_turn,
)
from gateway.families.llava_next import best_resolution
from gateway.families.tool_formats.registry import HERMES

# The largest grid pinpoint of llava-onevision-qwen2 checkpoints is 2304 px a side.
MAX_SIDE = 2304
VIDEO_SIDE = 384  # the vision tower's input: every frame is resized to 384 x 384 server-side
END_OF_TURN = "<|im_end|>"
TILE = 384  # SigLIP's input: 27 x 27 patches of 14 px, 729 features
PATCH = 14
MAX_TILES = 9  # "anyres_max_9": a larger unpadded grid is pooled down to about 9 tiles
VIDEO_FEATURES_PER_FRAME = 196  # 27 x 27 pooled 2 x 2 (ceil): 14 x 14
# llava-onevision-qwen2 checkpoints' image_grid_pinpoints: every 1..6 x 1..6 grid of 384 px
# tiles. A deployment whose checkpoint has others states them as the Triton model's parameter
# ``image_grid_pinpoints`` (JSON [[height, width], ...], as in its config.json).
CHECKPOINT_PINPOINTS: tuple[tuple[int, int], ...] = tuple(
    (TILE * rows, TILE * cols) for rows in range(1, 7) for cols in range(1, 7)
)
PINPOINTS_PARAMETER = "image_grid_pinpoints"


class LlavaOnevision(Family):
    name = "llava_onevision"
    nvidia_server_side = NVIDIA_PREPROCESSING.format(since="v0.16.0")
    tool_format = HERMES
    image_tensor = "image_bytes_input"
    video_tensor = "video_bytes_input"
    video_max_short_side = VIDEO_SIDE
    max_images = 1
    image_limit_reason = ONE_RAW_IMAGE
    features_per_image = 729  # per 384 px tile; anyres uses up to 9 tiles plus the base
    low_detail_side = TILE  # detail "low": the grid is one tile (base view + 1 tile)
    pinpoints: tuple[tuple[int, int], ...] = CHECKPOINT_PINPOINTS

    def check_deployment(self, parameters: Mapping[str, str], model_name: str) -> None:
        """Read the checkpoint's grid pinpoints where the deployment states them: the image
        tokens reported in usage depend on them."""
        stated = parameters.get(PINPOINTS_PARAMETER)
        if not stated:
            return
        try:
            pinpoints = tuple((int(h), int(w)) for h, w in json.loads(stated))
        except (ValueError, TypeError) as exc:
            raise UpstreamUnavailable(
                f"Triton model {model_name!r}: parameter {PINPOINTS_PARAMETER} is not a JSON "
                f"list of [height, width] pairs ({exc})",
                code="unsupported_deployment",
            ) from None
        if pinpoints:
            self.pinpoints = pinpoints

    def image_tokens(self, sizes: Sequence[tuple[int, int]]) -> int | None:
        """One image: the anyres count (HF's ``LlavaOnevisionProcessor``); several: the base
        view and a newline each, as HF lays out a multi-image prompt."""
        if len(sizes) != 1:
            return len(sizes) * ((TILE // PATCH) ** 2 + 1)
        width, height = fitted_to_side(sizes[0][1], sizes[0][0], MAX_SIDE)  # as prepare_image
        return anyres_features(height, width, self.pinpoints)

    def video_tokens(self, frames: int) -> int | None:
        return frames * VIDEO_FEATURES_PER_FRAME + 1  # a newline feature after the frames

    default_end_id = 151645  # <|im_end|> of the Qwen2 tokenizer
    stop_strings = ()
    reserved_markers = ("<image>", "<video>", "<|im_start|>", END_OF_TURN, "<|endoftext|>")

    def render(self, conversation: Conversation) -> str:
        require_final_user_turn(conversation)
        pieces: list[str] = []
        if conversation.system:
            pieces.append(conversation.system.strip() + "\n\n")
        for index, turn in enumerate(conversation.turns):
            if turn.role == "user":
                prefix = "" if index == 0 else "<|im_start|>user\n"
                pieces.append(prefix + turn.text)
            else:
                pieces.append(f"{END_OF_TURN}<|im_start|>assistant\n{turn.text}{END_OF_TURN}")
        return "".join(pieces)

    def prepare_image(self, image: Image.Image) -> np.ndarray[Any, Any]:
        return np.asarray(resize_to_fit(image, MAX_SIDE).convert("RGB"), dtype=np.uint8)

    def stack_images(self, arrays: Sequence[np.ndarray[Any, Any]]) -> np.ndarray[Any, Any]:
        return stack_letterboxed(arrays)[np.newaxis]

    def processing_options(self) -> str:
        return f"llava_onevision:raw:max_side={MAX_SIDE}"

    def prepare_video(self, frames: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        if frames.ndim != 4 or frames.shape[-1] != 3 or frames.dtype != np.uint8:
            raise ValueError(f"frames must be uint8 [n, H, W, 3], got {frames.shape}")
        return frames

    def stack_video(self, video: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        return video[np.newaxis]  # [1, frames, H, W, 3]


def anyres_features(
    height: int, width: int, pinpoints: Sequence[tuple[int, int]] = CHECKPOINT_PINPOINTS
) -> int:
    """Features one ``height`` x ``width`` image becomes: the base view (729), the unpadded
    tile grid (pooled down where it passes ``MAX_TILES`` tiles by 1.1) and a newline per row
    (HF's ``LlavaOnevisionProcessor._get_number_of_features``)."""
    side = TILE // PATCH
    canvas_h, canvas_w = best_resolution(height, width, pinpoints)
    rows, cols = side * (canvas_h // TILE), side * (canvas_w // TILE)
    if width / height > cols / rows:
        rows -= 2 * ((rows - int(round(height * (cols / width), 7))) // 2)
    else:
        cols -= 2 * ((cols - int(round(width * (rows / height), 7))) // 2)
    ratio = math.sqrt(rows * cols / (MAX_TILES * side * side))
    if ratio > 1.1:
        rows, cols = int(rows // ratio), int(cols // ratio)
    return side * side + rows * cols + rows


def stack_letterboxed(arrays: Sequence[np.ndarray[Any, Any]]) -> np.ndarray[Any, Any]:
    """Stack [H, W, 3] images into [n, H, W, 3]; smaller ones centred on black.

    The contract's tensor holds one H and W for all images of a request, so images of
    different sizes share the largest canvas. Images of one size pass unchanged.
    """
    height = max(a.shape[0] for a in arrays)
    width = max(a.shape[1] for a in arrays)
    out = np.zeros((len(arrays), height, width, 3), dtype=np.uint8)
    for index, array in enumerate(arrays):
        top = (height - array.shape[0]) // 2
        left = (width - array.shape[1]) // 2
        out[index, top : top + array.shape[0], left : left + array.shape[1]] = array
    return out
