"""CogVLM (chat): fp16 ``image_input`` at 490 x 490, features prepended by the server.

CogVLM's transform squashes the image to 490 x 490 (bicubic) and normalises with CLIP's
mean and std: 35 x 35 = 1225 patch features plus begin/end-of-image, and the guide builds
the engine for 1280 per image. The features go before the text, so the gateway writes the
whole prompt in the form NVIDIA's runner uses, `` [INST] {q} [/INST] ``, each earlier turn as
another ``[INST]`` block with its answer after it.

CogVLM's vision tokens share positions: NVIDIA's runner feeds the decoder custom position
ids (``prepare_position_ids_for_cogvlm``: BOS 0, begin-of-image 1, the 1225 patches all 2,
end-of-image 3, the text from 4 on; tensorrt_llm/runtime/multimodal_model_runner.py). A
Triton deployment cannot pass them: TensorRT-LLM's Triton backend builds every request with
``positionIds`` empty (inflight_batcher_llm/src/utils.cc @c2e65b88d85255be30cf50440a91662abeb497dd)
and its ``tensorrt_llm`` model declares no input for them, and NVIDIA ships no CogVLM Triton
preprocessing; the engine would then number the 1227 image positions one by one and read the
text 1224 positions too far on. The gateway cannot compute the ids either (they depend on the
server's token count). So it serves CogVLM only from a deployment that says it computes them
itself: its Triton config sets the parameter ``cogvlm_position_ids`` to ``"server"``; any other
deployment is refused at start-up (and each request gets a 503 naming the reason).

CogVLM runs in bf16 only: a deployment that declares ``image_input`` as BF16 gets bf16 (the
tensor builder casts to the declared type). The engine is built without a paged KV cache
(``--paged_kv_cache disable``), so there is no KV reuse and no extra id. One image per
request, and one is required: the visual expert layers read the image positions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from PIL import Image

from gateway.errors import UpstreamUnavailable
from gateway.families._pixels import (
    OPENAI_CLIP_MEAN,
    OPENAI_CLIP_STD,
    PixelSpec,
    to_fp16_batch,
)
from gateway.families.base import Conversation, Family, require_final_user_turn

# The Triton config parameter by which a deployment says it computes CogVLM's position ids.
POSITION_IDS_PARAMETER = "cogvlm_position_ids"
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
    deployment_must_provide = (
        "a preprocessing that computes CogVLM's position ids, declaring the "
        "parameter cogvlm_position_ids = server"
    )
    image_tensor = "image_input"
    pixel_spec = SQUARE_490_CLIP
    stacked_images_rank = 5  # to_fp16_batch: [1, n, 3, H, W]
    image_decode_size = (490, 490)
    features_per_image = 1280  # 1225 + boi/eoi, rounded up as the guide builds the engine
    requires_image = True
    max_images = 1
    supports_extra_id = False
    reserved_markers = ("[INST]", "[/INST]", "</s>", "<s>")

    def check_deployment(self, parameters: Mapping[str, str], model_name: str) -> None:
        if parameters.get(POSITION_IDS_PARAMETER) != "server":
            raise UpstreamUnavailable(
                f"Triton model {model_name!r} cannot serve CogVLM: CogVLM needs custom position "
                "ids (its 1225 image patches share one position, as NVIDIA's runner sets them), "
                "and TensorRT-LLM's Triton backend passes none (inflight_batcher_llm/src/"
                "utils.cc: positionIds empty), so answers would be computed at shifted "
                "positions; serve it from a deployment that computes them and declares "
                f'parameters {{ key: "{POSITION_IDS_PARAMETER}" value: {{ string_value: '
                '"server" } } (docs/families.md)',
                code="unsupported_deployment",
            )

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

    def stack_images(self, arrays: Sequence[np.ndarray[Any, Any]]) -> np.ndarray[Any, Any]:
        return to_fp16_batch(list(arrays))

    def processing_options(self) -> str:
        return f"{self.name}:{SQUARE_490_CLIP!r}"
