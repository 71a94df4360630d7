"""CogVLM (chat): fp16 ``image_input`` at 490 x 490, features prepended by the server.

CogVLM's transform squashes the image to 490 x 490 (bicubic) and normalises with CLIP's
mean and std: 35 x 35 = 1225 patch features plus begin/end-of-image, and the guide builds
the engine for 1280 per image. The features go before the text, so the gateway writes the
whole prompt in the form NVIDIA's runner uses, `` [INST] {q} [/INST] ``, each earlier turn as
another ``[INST]`` block with its answer after it.

CogVLM runs in bf16 only: a deployment that declares ``image_input`` as BF16 gets bf16 (the
tensor builder casts to the declared type). The engine is built without a paged KV cache
(``--paged_kv_cache disable``), so there is no KV reuse and no extra id. One image per
request, and one is required: the visual expert layers read the image positions.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from PIL import Image

from gateway.families._pixels import (
    OPENAI_CLIP_MEAN,
    OPENAI_CLIP_STD,
    PixelSpec,
    preprocess,
    to_fp16_batch,
)
from gateway.families.base import Conversation, Family, require_final_user_turn

SQUARE_490_CLIP = PixelSpec(
    size=(490, 490),
    resample=Image.Resampling.BICUBIC,
    rescale_factor=1 / 255,
    image_mean=OPENAI_CLIP_MEAN,
    image_std=OPENAI_CLIP_STD,
)
"""490 x 490 bicubic, CLIP mean/std: CogVLM's and InternLM-XComposer2's vision transform."""


class CogVLM(Family):
    name = "cogvlm"
    image_tensor = "image_input"
    image_decode_size = (490, 490)
    features_per_image = 1280  # 1225 + boi/eoi, rounded up as the guide builds the engine
    requires_image = True
    max_images = 1
    supports_extra_id = False
    reserved_markers = ("[INST]", "[/INST]", "</s>", "<s>")

    def render(self, conversation: Conversation) -> str:
        require_final_user_turn(conversation)
        system = conversation.system.strip() + "\n" if conversation.system else ""
        pieces: list[str] = []
        for index, turn in enumerate(conversation.turns):
            if turn.role == "user":
                text = (system if index == 0 else "") + turn.text
                pieces.append(f" [INST] {text} [/INST] ")
            else:
                pieces.append(turn.text)
        return "".join(pieces)

    def prepare_image(self, image: Image.Image) -> np.ndarray[Any, Any]:
        return preprocess(image, SQUARE_490_CLIP)

    def stack_images(self, arrays: Sequence[np.ndarray[Any, Any]]) -> np.ndarray[Any, Any]:
        return to_fp16_batch(list(arrays))

    def processing_options(self) -> str:
        return f"{self.name}:{SQUARE_490_CLIP!r}"
