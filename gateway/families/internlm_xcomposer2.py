"""InternLM-XComposer2 (VL, with LoRA): fp16 ``image_input`` at 490 px, 1225 features.

NVIDIA's ``internlm_xcomposer2`` Triton models wrap the text in InternLM2's chat frame,
``[UNUSED_TOKEN_146]user\\n`` + image features + ``{q}[UNUSED_TOKEN_145]\\n[UNUSED_TOKEN_146]
assistant\\n``; the guide's client sends only the question. So the gateway sends the question,
earlier turns inside it in the same frame (as for LLaVA), a system text first.

The vision side is CLIP ViT-L/14 at 490 x 490 (bicubic, CLIP mean/std, no crop): 35 x 35 =
1225 features. The model's Partial-LoRA (the ``Plora`` weights applied to image positions)
ships as a LoRA adapter: ``lora_task_id`` with ``lora_weights`` and ``lora_config`` on first
use, the id alone afterwards (see ``ServedModel.lora``). One image per request, required:
every prompt of this deployment has its image slot.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from PIL import Image

from gateway.families._pixels import preprocess, to_fp16_batch
from gateway.families.base import Conversation, Family, require_final_user_turn
from gateway.families.cogvlm import SQUARE_490_CLIP

START = "[UNUSED_TOKEN_146]"
END = "[UNUSED_TOKEN_145]"


class InternLMXComposer2(Family):
    name = "internlm_xcomposer2"
    image_tensor = "image_input"
    image_decode_size = (490, 490)
    features_per_image = 1225
    requires_image = True
    max_images = 1
    supports_lora = True
    stop_strings = (END,)
    reserved_markers = (START, END, "<s>", "</s>", "<ImageHere>")

    def render(self, conversation: Conversation) -> str:
        require_final_user_turn(conversation)
        pieces: list[str] = []
        if conversation.system:
            pieces.append(conversation.system.strip() + "\n")
        for index, turn in enumerate(conversation.turns):
            if turn.role == "assistant":
                pieces.append(f"{END}\n{START}assistant\n{turn.text}{END}\n")
            else:
                pieces.append(turn.text if index == 0 else f"{START}user\n{turn.text}")
        return "".join(pieces)

    def prepare_image(self, image: Image.Image) -> np.ndarray[Any, Any]:
        return preprocess(image, SQUARE_490_CLIP)

    def stack_images(self, arrays: Sequence[np.ndarray[Any, Any]]) -> np.ndarray[Any, Any]:
        return to_fp16_batch(list(arrays))

    def processing_options(self) -> str:
        return f"{self.name}:{SQUARE_490_CLIP!r}"
