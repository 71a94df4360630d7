"""Qwen2-VL: raw uint8 ``image_bytes_input``, every image 504 x 504 (324 features).

The server applies Qwen2-VL's chat template (system line, ``<|vision_start|>`` + image pads
+ ``<|vision_end|>`` before the text, assistant header after), so the gateway sends the
question; earlier turns and a system text ride inside it in ChatML form, as for OneVision.
Images are resized to 504 x 504 (bicubic) as NVIDIA's runner does: the processor then keeps
that size (a multiple of 28), giving 36 x 36 patches merged 2 x 2, so every image costs
exactly 324 features and ``max_multimodal_len`` can be sized for it.

No ``prompt_table_extra_id``: Qwen2-VL's preprocessing builds its own ids for the vision
positions (M-RoPE), so the KV-reuse key is not sent.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from PIL import Image

from gateway.families._pixels import convert_rgb
from gateway.families.base import (
    NVIDIA_PREPROCESSING,
    ONE_RAW_IMAGE,
    Conversation,
    Family,
    require_final_user_turn,
)
from gateway.families.tool_formats.registry import HERMES

SIDE = 504
END_OF_TURN = "<|im_end|>"


class Qwen2VL(Family):
    name = "qwen2_vl"
    nvidia_server_side = NVIDIA_PREPROCESSING.format(since="v0.19.0")
    tool_format = HERMES
    image_tensor = "image_bytes_input"
    image_decode_size = (SIDE, SIDE)
    max_images = 1
    image_limit_reason = ONE_RAW_IMAGE
    features_per_image = 324  # (504 / 14)^2 / (2 x 2 merge)
    default_end_id = 151645  # <|im_end|>
    supports_extra_id = False
    reserved_markers = (
        "<|im_start|>",
        END_OF_TURN,
        "<|endoftext|>",
        "<|vision_start|>",
        "<|vision_end|>",
        "<|image_pad|>",
        "<|video_pad|>",
    )

    def render(self, conversation: Conversation) -> str:
        require_final_user_turn(conversation)
        pieces: list[str] = []
        if conversation.system:
            pieces.append(conversation.system.strip() + "\n\n")
        for index, turn in enumerate(conversation.turns):
            if turn.role == "user":
                pieces.append(turn.text if index == 0 else f"<|im_start|>user\n{turn.text}")
            else:
                pieces.append(f"{END_OF_TURN}\n<|im_start|>assistant\n{turn.text}{END_OF_TURN}\n")
        return "".join(pieces)

    def prepare_image(self, image: Image.Image) -> np.ndarray[Any, Any]:
        resized = convert_rgb(image).resize((SIDE, SIDE), resample=Image.Resampling.BICUBIC)
        return np.asarray(resized, dtype=np.uint8)

    def stack_images(self, arrays: Sequence[np.ndarray[Any, Any]]) -> np.ndarray[Any, Any]:
        stacked: np.ndarray[Any, Any] = np.stack(arrays)
        return stacked[np.newaxis]  # [1, n, 504, 504, 3]

    def processing_options(self) -> str:
        return f"{self.name}:raw:{SIDE}x{SIDE}:bicubic"
