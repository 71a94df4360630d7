"""LLaVA-OneVision: raw uint8 ``image_bytes_input`` and ``video_bytes_input``; the server's
processor tiles images (anyres) and resizes video frames to 384 x 384.

NVIDIA's preprocessing wraps ``text_input`` as ``<|im_start|>user `` + features + ``\\n`` +
text + ``<|im_end|><|im_start|>assistant\\n``; the gateway sends the system text, the first
question and earlier turns in Qwen2's ChatML form. Images travel as decoded pixels,
downscaled only as far as the processor would anyway (its largest anyres canvas); video
frames with their shorter side at most 384, which the processor's 384 x 384 resize keeps.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from PIL import Image

from gateway.families._pixels import resize_to_fit
from gateway.families.base import (
    NVIDIA_PREPROCESSING,
    ONE_RAW_IMAGE,
    Conversation,
    Family,
    require_final_user_turn,
)
from gateway.families.tool_formats.registry import HERMES

# The largest grid pinpoint of llava-onevision-qwen2 checkpoints is 2304 px a side.
MAX_SIDE = 2304
VIDEO_SIDE = 384  # the vision tower's input: every frame is resized to 384 x 384 server-side
END_OF_TURN = "<|im_end|>"


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
