"""BLIP2-OPT: fp16 ``image_input`` preprocessed in the gateway, 224 px, 32 query features.

NVIDIA's preprocessing adds nothing for BLIP2: the Q-Former's 32 features are prepended and
the text goes as the client wrote it, so the gateway writes the ``Question: {q} Answer:``
form the guides use. Earlier turns become earlier question/answer pairs. One image per
request (the Q-Former reads one), and an image is required: a BLIP2 engine is an image
captioner/VQA model whose prompt is about the picture. Generation ends at OPT's newline, as
in NVIDIA's runner: the model closes its answer with one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
from PIL import Image

from gateway.families._pixels import (
    OPENAI_CLIP_MEAN,
    OPENAI_CLIP_STD,
    PixelSpec,
    to_fp16_batch,
)
from gateway.families.base import (
    NVIDIA_PREPROCESSING,
    Conversation,
    Family,
    require_final_user_turn,
)

OPT_NEWLINE = 50118  # "\n" (GPT-2's "Ċ") in OPT's vocabulary
BLIP2_224 = PixelSpec(
    size=(224, 224),
    resample=Image.Resampling.BICUBIC,
    rescale_factor=1 / 255,
    image_mean=OPENAI_CLIP_MEAN,
    image_std=OPENAI_CLIP_STD,
)
"""``BlipImageProcessor`` of the Salesforce/blip2-* checkpoints: 224 x 224, bicubic, no crop."""


def render_question_answer(conversation: Conversation) -> str:
    """``Question: q Answer: a Question: q2 Answer:``, system text first (BLIP2's VQA form)."""
    require_final_user_turn(conversation)
    pieces = [conversation.system.strip()] if conversation.system else []
    for turn in conversation.turns:
        if turn.role == "user":
            pieces.append(f"Question: {turn.text.strip()} Answer:")
        else:
            pieces.append(turn.text.strip())
    return " ".join(pieces)


class Blip2Opt(Family):
    name = "blip2_opt"
    nvidia_server_side: ClassVar[str | None] = NVIDIA_PREPROCESSING.format(since="v0.13.0")
    image_tensor = "image_input"
    pixel_spec = BLIP2_224
    stacked_images_rank = 5  # to_fp16_batch: [1, n, 3, H, W]
    image_decode_size = (224, 224)
    features_per_image = 32  # the Q-Former's query tokens
    requires_image = True
    max_images = 1
    # NVIDIA's runner ends BLIP2-OPT answers at OPT's newline (tensorrt_llm/runtime/
    # multimodal_model_runner.py, ``generate``: "For BLIP2-OPT, model outputs a "\n" at the
    # end. we avoid it by using newline as the end token", end_id = tokenizer.encode("\n",
    # add_special_tokens=False)[0]); NVIDIA's Triton preprocessing would use </s> (2), which
    # the model rarely emits, so answers ran on to max_tokens.
    default_end_id = OPT_NEWLINE
    default_pad_id = 1  # OPT's <pad>
    reserved_markers = ("</s>",)

    def render(self, conversation: Conversation) -> str:
        return render_question_answer(conversation)

    def stack_images(self, arrays: Sequence[np.ndarray[Any, Any]]) -> np.ndarray[Any, Any]:
        return to_fp16_batch(list(arrays))

    def processing_options(self) -> str:
        return f"{self.name}:{BLIP2_224!r}"
