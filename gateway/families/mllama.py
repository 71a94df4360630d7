"""Llama-3.2-Vision (mllama): raw uint8 ``image_bytes_input``; the server's processor tiles.

The server adds nothing to the text (triton-contract.md section 5): the text must hold one
``<|image|>`` per image, where the cross-attention reads it, and Instruct checkpoints need
their chat template applied by the client. The gateway renders the Llama 3 template (system,
earlier turns, the assistant header last) without ``<|begin_of_text|>``: the server's
processor adds BOS itself, and a second one would shift every position. Base checkpoints
(``mllama_base``) take ``<|image|>`` + the text as is.

Images go as decoded pixels, downscaled only as far as the processor would anyway (at most
4 tiles of 560 px: a 2240 px side). Text-only turns are fine: the server skips the encoder.
End id 128001 and pad id 128004 as NVIDIA's guide sends them; Instruct turns end with
``<|eot_id|>``, sent as a stop word so the server stops there.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
from PIL import Image

from gateway.families._pixels import resize_to_fit
from gateway.families.base import Conversation, Family, require_final_user_turn
from gateway.families.llava_onevision import stack_letterboxed
from gateway.families.tool_formats.base import ToolFormat
from gateway.families.tool_formats.registry import LLAMA3_JSON

IMAGE = "<|image|>"
TILE = 560
MAX_SIDE = 4 * TILE  # max_image_tiles = 4: the widest canvas is 4 x 1 tiles
EOT = "<|eot_id|>"


def _header(role: str) -> str:
    role = "ipython" if role == "tool" else role  # a tool's result, as Meta's template writes it
    return f"<|start_header_id|>{role}<|end_header_id|>\n\n"


class Mllama(Family):
    name = "mllama"
    tool_format: ClassVar[ToolFormat | None] = LLAMA3_JSON
    image_tensor = "image_bytes_input"
    features_per_image = 6404  # encoder output per image: 4 tiles x 1601 (max_encoder_input_len)
    default_end_id = 128001  # <|end_of_text|>
    default_pad_id = 128004  # <|finetune_right_pad_id|>
    stop_strings: ClassVar[tuple[str, ...]] = (EOT,)
    reserved_markers = (
        IMAGE,
        EOT,
        "<|begin_of_text|>",
        "<|end_of_text|>",
        "<|start_header_id|>",
        "<|end_header_id|>",
        "<|python_tag|>",
    )

    def render(self, conversation: Conversation) -> str:
        require_final_user_turn(conversation)
        pieces: list[str] = []
        if conversation.system:
            pieces.append(_header("system") + conversation.system.strip() + EOT)
        for turn in conversation.turns:
            pieces.append(_header(turn.role) + IMAGE * turn.images + turn.text + EOT)
        pieces.append(_header("assistant"))
        return "".join(pieces)

    def prepare_image(self, image: Image.Image) -> np.ndarray[Any, Any]:
        return np.asarray(resize_to_fit(image, MAX_SIDE).convert("RGB"), dtype=np.uint8)

    def stack_images(self, arrays: Sequence[np.ndarray[Any, Any]]) -> np.ndarray[Any, Any]:
        return stack_letterboxed(arrays)[np.newaxis]

    def processing_options(self) -> str:
        return f"{self.name}:raw:max_side={MAX_SIDE}"


class MllamaBase(Mllama):
    """Base (non-Instruct) Llama-3.2-Vision: ``<|image|>`` per image, then the text as is."""

    name = "mllama_base"
    tool_format = None  # a base checkpoint was not trained on any tool-call format
    stop_strings: ClassVar[tuple[str, ...]] = ()

    def render(self, conversation: Conversation) -> str:
        require_final_user_turn(conversation)
        texts = [conversation.system.strip()] if conversation.system else []
        texts += [t.text for t in conversation.turns]
        return IMAGE * conversation.image_count + "\n".join(texts)
