"""Kosmos-2: fp16 ``image_input`` (CLIP ViT-L/14 at 224 px), 64 features per image.

Kosmos-2 is a grounded completion model, not a chat model: its processor (server side) puts
``<image>`` + the 64 feature slots + ``</image>`` before the text, and the text is continued.
So the gateway sends the text as written, earlier turns joined in order; an image with no
text gets NVIDIA's runner prompt ``<grounding>An image of``. ``<grounding>`` and the
``<phrase>``/``<object>`` tags are features of the model and pass through.
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
    to_fp16_batch,
)
from gateway.families.base import Conversation, Family, require_final_user_turn

CLIP_224 = PixelSpec(
    shortest_edge=224,
    resample=Image.Resampling.BICUBIC,
    crop_size=(224, 224),
    rescale_factor=1 / 255,
    image_mean=OPENAI_CLIP_MEAN,
    image_std=OPENAI_CLIP_STD,
)
"""microsoft/kosmos-2-patch14-224's CLIPImageProcessor: shortest edge 224, 224 crop."""
DEFAULT_PROMPT = "<grounding>An image of"


def render_completion(conversation: Conversation, default: str) -> str:
    """System text and every turn joined by spaces; an empty last question becomes ``default``
    (nothing when ``default`` is empty).

    For completion-style models with no chat template: the history is plain preceding text.
    """
    require_final_user_turn(conversation)
    texts = [conversation.system.strip()] if conversation.system else []
    texts += [t.text.strip() for t in conversation.turns[:-1] if t.text.strip()]
    last = conversation.turns[-1].text.strip() or default
    return " ".join([*texts, last] if last else texts)


class Kosmos2(Family):
    name = "kosmos2"
    deployment_must_provide = (
        "a preprocessing that writes '<image>' + 64 features + '</image>' before "
        "the text, as Kosmos2Processor does"
    )
    image_tensor = "image_input"
    pixel_spec = CLIP_224
    stacked_images_rank = 5  # to_fp16_batch: [1, n, 3, H, W]
    image_decode_size = (224, 224)
    features_per_image = 64  # the image-to-text projection's latent queries
    max_images = 1
    reserved_markers = ("<image>", "</image>", "<s>", "</s>")

    def render(self, conversation: Conversation) -> str:
        return render_completion(conversation, DEFAULT_PROMPT)

    def stack_images(self, arrays: Sequence[np.ndarray[Any, Any]]) -> np.ndarray[Any, Any]:
        return to_fp16_batch(list(arrays))

    def processing_options(self) -> str:
        return f"{self.name}:{CLIP_224!r}"
