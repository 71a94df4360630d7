"""LLaVA-1.5: fp16 ``image_input`` preprocessed in the gateway, CLIP 336 px, 576 features.

NVIDIA's preprocessing wraps ``text_input`` as ``USER:\\n`` + image features + text +
`` ASSISTANT:``, so the gateway sends only what goes between: the system text, the first
question, and earlier turns rendered in LLaVA-1.5's ``ASSISTANT: ...</s>USER: ...`` form.
Every image's features sit at the start, where the server puts them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from gateway.families._pixels import CLIP_336, to_fp16_batch
from gateway.families.base import (
    NVIDIA_PREPROCESSING,
    Conversation,
    Family,
    require_final_user_turn,
)
from gateway.families.tool_formats.registry import HERMES


class Llava(Family):
    name = "llava"
    nvidia_server_side = NVIDIA_PREPROCESSING.format(since="v0.13.0")
    tool_format = HERMES
    image_tensor = "image_input"
    pixel_spec = CLIP_336
    stacked_images_rank = 5  # to_fp16_batch: [1, n, 3, H, W]
    image_decode_size = (336, 336)  # CLIP's shortest edge: large JPEGs decode in draft mode
    features_per_image = 576
    default_end_id = None  # the tokenizer's EOS, which the server applies when omitted
    reserved_markers = ("<image>", "</s>", "<s>")

    def render(self, conversation: Conversation) -> str:
        require_final_user_turn(conversation)
        pieces: list[str] = []
        if conversation.system:
            pieces.append(conversation.system.strip() + "\n")
        for index, turn in enumerate(conversation.turns):
            if turn.role == "user":
                pieces.append(turn.text if index == 0 else f"USER: {turn.text}")
            else:
                pieces.append(f" ASSISTANT: {turn.text}</s>")
        return "".join(pieces)

    def stack_images(self, arrays: Sequence[np.ndarray[Any, Any]]) -> np.ndarray[Any, Any]:
        return to_fp16_batch(list(arrays))

    def processing_options(self) -> str:
        return f"llava:clip336:{CLIP_336!r}"
