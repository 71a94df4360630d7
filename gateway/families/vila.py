"""VILA-1.5: fp16 ``image_input`` (SigLIP 384 px), 196 features per image, several images.

NVIDIA's preprocessing wraps ``text_input`` in Vicuna's frame (the "A chat between a curious
user..." system sentence and `` USER: `` before, `` ASSISTANT:`` after). Where it puts the
image features depends on the deployment's ``max_num_images`` (all_models/inflight_batcher_llm/
preprocessing/1/model.py @c2e65b88d85255be30cf50440a91662abeb497dd, ``_create_request``):
above 1, it splits the text at each ``<image>`` and places one image's features there, in
order; otherwise (the guide's fill value, 1, or unset) it never splits, and puts the features
of its one image between the frame's head and the text, so an ``<image>`` would reach the
model as text. The gateway follows the same rule from ``ServedModel.max_images`` (set it to
the deployment's ``max_num_images``): one ``<image>\\n`` per image at the start of the turn
that carried it (the guide's ``<image>\\n<image>\\n Please elaborate...``) when it is above 1;
else no marker and at most one image. Earlier turns go in Vicuna's form.

Pixels: VILA-1.5's ``image_aspect_ratio: resize`` squashes every image to 384 x 384
(bicubic), then SigLIP rescales and normalises with mean = std = 0.5. SigLIP's 729 patch
features are pooled 2 x 2 by the projector into 196 (14 x 14).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from PIL import Image
from pydantic import BaseModel

from gateway.families._pixels import PixelSpec, to_fp16_batch
from gateway.families.base import (
    NVIDIA_PREPROCESSING,
    Conversation,
    Family,
    require_final_user_turn,
)

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
    nvidia_server_side = NVIDIA_PREPROCESSING.format(since="v0.15.0")
    image_tensor = "image_input"
    pixel_spec = SIGLIP_384
    stacked_images_rank = 5  # to_fp16_batch: [1, n, 3, H, W]
    image_decode_size = (384, 384)
    features_per_image = 196
    reserved_markers = (IMAGE, "</s>", "<s>")

    def __init__(self, options: BaseModel | None = None, *, splits_at_markers: bool = False):
        super().__init__(options)
        # NVIDIA's preprocessing splits the text at <image> markers only when the
        # deployment's max_num_images is above 1 (``engine_images``). Fixed at construction:
        # two served models of this family never share it.
        self.splits_at_markers = splits_at_markers

    def engine_images(self, max_images: int | None) -> Vila:
        splits = max_images is not None and max_images > 1
        if splits == self.splits_at_markers:
            return self
        return type(self)(splits_at_markers=splits)

    def image_limit(self) -> int | None:
        return None if self.splits_at_markers else 1

    def image_limit_rule(self) -> str:
        return (
            f"model family '{self.name}' takes at most 1 per "
            "request here: NVIDIA's preprocessing places each image's features at an <image> "
            "marker only when its max_num_images is above 1 (set the model's max_images to "
            "the deployment's max_num_images)"
        )

    def render(self, conversation: Conversation) -> str:
        require_final_user_turn(conversation)
        pieces: list[str] = []
        if conversation.system:
            pieces.append(conversation.system.strip() + "\n")
        for index, turn in enumerate(conversation.turns):
            if turn.role == "assistant":
                pieces.append(f" ASSISTANT: {turn.text}</s>")
                continue
            markers = turn.images if self.splits_at_markers else 0
            text = f"{IMAGE}\n" * markers + turn.text
            pieces.append(text if index == 0 else f"USER: {text}")
        return "".join(pieces)

    def stack_images(self, arrays: Sequence[np.ndarray[Any, Any]]) -> np.ndarray[Any, Any]:
        return to_fp16_batch(list(arrays))

    def processing_options(self) -> str:
        return f"{self.name}:{SIGLIP_384!r}"
