"""VILA-1.5: fp16 ``image_input`` (SigLIP 384 px), 196 features per image, several images.

NVIDIA's preprocessing wraps ``text_input`` in Vicuna's frame (the "A chat between a curious
user..." system sentence and `` USER: `` before, `` ASSISTANT:`` after) and splits the text at
each ``<image>``, placing one image's features there, in order. So the gateway sends the
question with one ``<image>\\n`` per image at the start of the turn that carried it (the
guide's ``<image>\\n<image>\\n Please elaborate...``), and earlier turns in Vicuna's form.

Pixels: VILA-1.5's ``image_aspect_ratio: resize`` squashes every image to 384 x 384
(bicubic), then SigLIP rescales and normalises with mean = std = 0.5. SigLIP's 729 patch
features are pooled 2 x 2 by the projector into 196 (14 x 14). The engine decides how many
images a request may hold (``max_num_images``, 4 in the guide): ``ServedModel.max_images``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from PIL import Image

from gateway.families._pixels import PixelSpec, preprocess, to_fp16_batch
from gateway.families.base import Conversation, Family, require_final_user_turn

IMAGE = "<image>"
SIGLIP_384 = PixelSpec(
    size=(384, 384),
    resample=Image.Resampling.BICUBIC,
    rescale_factor=1 / 255,
    image_mean=(0.5, 0.5, 0.5),
    image_std=(0.5, 0.5, 0.5),
)
"""SigLIP so400m-patch14-384 as VILA-1.5 uses it: a plain 384 x 384 resize, no crop."""


class Vila(Family):
    name = "vila"
    image_tensor = "image_input"
    image_decode_size = (384, 384)
    features_per_image = 196
    reserved_markers = (IMAGE, "</s>", "<s>")

    def render(self, conversation: Conversation) -> str:
        require_final_user_turn(conversation)
        pieces: list[str] = []
        if conversation.system:
            pieces.append(conversation.system.strip() + "\n")
        for index, turn in enumerate(conversation.turns):
            if turn.role == "assistant":
                pieces.append(f" ASSISTANT: {turn.text}</s>")
                continue
            text = f"{IMAGE}\n" * turn.images + turn.text
            pieces.append(text if index == 0 else f"USER: {text}")
        return "".join(pieces)

    def prepare_image(self, image: Image.Image) -> np.ndarray[Any, Any]:
        return preprocess(image, SIGLIP_384)

    def stack_images(self, arrays: Sequence[np.ndarray[Any, Any]]) -> np.ndarray[Any, Any]:
        return to_fp16_batch(list(arrays))

    def processing_options(self) -> str:
        return f"{self.name}:{SIGLIP_384!r}"
