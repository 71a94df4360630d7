"""NeVA (NeMo): fp16 ``image_input`` (SigLIP 384 px), 729 features, NeMo's chat template.

NeVA's prompt puts the image features inside the user turn:
``<extra_id_0>System\\n{system}\\n\\n<extra_id_1>User\\n`` + features + ``\\n{q}\\n<extra_id_1>
Assistant\\n`` (NVIDIA's runner). No upstream Triton preprocessing exists for NeVA, so the
gateway sends the whole template with NeMo's ``<image>`` token where the features go, and
the deployment's preprocessing splits there (as NVIDIA's does for VILA). Earlier turns follow
NeMo's separators; ``<extra_id_1>`` starts the next turn, so it is a stop string.

Pixels: 384 x 384 bicubic, mean = std = 0.5 (SigLIP so400m, 27 x 27 = 729 patches).
One image per request, and one is required (the template always has its slot).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from PIL import Image

from gateway.families._pixels import preprocess, to_fp16_batch
from gateway.families.base import Conversation, Family, require_final_user_turn
from gateway.families.vila import SIGLIP_384

IMAGE = "<image>"
TURN = "<extra_id_1>"


class Neva(Family):
    name = "neva"
    deployment_must_provide = "a preprocessing that places the image features where <image> stands"
    image_tensor = "image_input"
    stacked_images_rank = 5  # to_fp16_batch: [1, n, 3, H, W]
    image_decode_size = (384, 384)
    features_per_image = 729
    requires_image = True
    max_images = 1
    stop_strings = (TURN,)
    reserved_markers = (IMAGE, "<extra_id_0>", TURN, "<extra_id_2>")

    def render(self, conversation: Conversation) -> str:
        require_final_user_turn(conversation)
        system = (conversation.system or "").strip()
        # NVIDIA's runner: "<extra_id_0>System\n\n<extra_id_1>User\n" with no system text,
        # "<extra_id_0>System\n{system}\n\n<extra_id_1>User" with one (its SteerLM prompt).
        pieces = [f"<extra_id_0>System\n{system}\n" + ("\n" if system else "")]
        for turn in conversation.turns:
            if turn.role == "user":
                slot = f"{IMAGE}\n" * turn.images
                pieces.append(f"{TURN}User\n{slot}{turn.text}\n")
            else:
                pieces.append(f"{TURN}Assistant\n{turn.text}\n")
        pieces.append(f"{TURN}Assistant\n")
        return "".join(pieces)

    def prepare_image(self, image: Image.Image) -> np.ndarray[Any, Any]:
        return preprocess(image, SIGLIP_384)

    def stack_images(self, arrays: Sequence[np.ndarray[Any, Any]]) -> np.ndarray[Any, Any]:
        return to_fp16_batch(list(arrays))

    def processing_options(self) -> str:
        return f"{self.name}:{SIGLIP_384!r}"
