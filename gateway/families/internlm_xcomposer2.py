"""InternLM-XComposer2 (VL, with LoRA): fp16 ``image_input`` at 490 px, 1225 features.

The guide's deployment (seeds/004; its Triton models are Howe-Young/tensorrtllm_backend
``all_models/internlm_xcomposer2`` @76a0d1f53335a9f08b6a750c278651458813948e) adds no chat
frame: its preprocessing splits ``text_input`` at ``<ImageHere>``, tokenizes the part before
and the part after (each with BOS), and puts the image features between them; a text without
``<ImageHere>`` fails there (IndexError). Its client (``tools/internlm_xcomposer2/client.py``,
same commit) writes the whole InternLM2 chat prompt, and so does the gateway:
``[UNUSED_TOKEN_146]system\n{system}[UNUSED_TOKEN_145]\n`` then each turn as
``[UNUSED_TOKEN_146]{role}\n{text}[UNUSED_TOKEN_145]\n``, ``<ImageHere>`` at the head of the
user turn that carried the image, and ``[UNUSED_TOKEN_146]assistant\n`` last. Without a system
message the system text is the client's meta instruction (as its Python evaluates it: only the
first line of the four it spells out reaches the prompt).

The vision side is CLIP ViT-L/14 at 490 x 490 (bicubic, CLIP mean/std, no crop): 35 x 35 =
1225 features. The model's Partial-LoRA (the ``Plora`` weights applied to image positions)
ships as a LoRA adapter: ``lora_task_id`` with ``lora_weights`` and ``lora_config`` on first
use, the id alone afterwards (see ``ServedModel.lora``). One image per request, required:
the deployment's preprocessing splits every prompt at its one image slot.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from gateway.families._pixels import to_fp16_batch
from gateway.families.base import Conversation, Family, require_final_user_turn
from gateway.families.cogvlm import SQUARE_490_CLIP

START = "[UNUSED_TOKEN_146]"
END = "[UNUSED_TOKEN_145]"
IMAGE = "<ImageHere>"
META_INSTRUCTION = "You are an AI assistant whose name is InternLM-XComposer (浦语·灵笔).\n"


class InternLMXComposer2(Family):
    name = "internlm_xcomposer2"
    deployment_must_provide = (
        "the guide's community templates (Howe-Young/tensorrtllm_backend "
        "all_models/internlm_xcomposer2): <ImageHere> split, ViT run"
    )
    image_tensor = "image_input"
    pixel_spec = SQUARE_490_CLIP
    stacked_images_rank = 5  # to_fp16_batch: [1, n, 3, H, W]
    image_decode_size = (490, 490)
    features_per_image = 1225
    requires_image = True
    max_images = 1
    image_limit_reason = f"the deployment's preprocessing splits the prompt at one {IMAGE}"
    supports_lora = True
    stop_strings = (END,)
    reserved_markers = (START, END, "<s>", "</s>", IMAGE)

    def render(self, conversation: Conversation) -> str:
        require_final_user_turn(conversation)
        system = conversation.system.strip() if conversation.system else META_INSTRUCTION
        pieces = [f"{START}system\n{system}{END}\n"]
        for turn in conversation.turns:
            role = "assistant" if turn.role == "assistant" else "user"
            slot = IMAGE * turn.images if role == "user" else ""
            pieces.append(f"{START}{role}\n{slot}{turn.text}{END}\n")
        pieces.append(f"{START}assistant\n")
        return "".join(pieces)

    def stack_images(self, arrays: Sequence[np.ndarray[Any, Any]]) -> np.ndarray[Any, Any]:
        return to_fp16_batch(list(arrays))

    def processing_options(self) -> str:
        return f"{self.name}:{SQUARE_490_CLIP!r}"
