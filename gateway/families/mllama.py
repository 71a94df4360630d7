"""Llama-3.2-Vision (mllama): raw uint8 ``image_bytes_input``; the server's processor tiles.

The server adds nothing to the text but BOS (triton-contract.md section 5): the text must hold
one ``<|image|>`` per image, where the cross-attention reads it, and Instruct checkpoints need
their chat template applied by the client. The gateway renders Meta's Llama-3.2-Vision chat
template (the one NVIDIA's runner applies through ``MllamaProcessorWrapper``) without
``<|begin_of_text|>``: the server's tokenizer adds BOS itself, and a second one would shift
every position. Meta's template writes its system block (knowledge dates, then the system
text) only when the conversation has no image, and refuses a system message next to an image;
the gateway does the same, with a 400 that says so. Base checkpoints (``mllama_base``) take
``<|image|>`` + the text as is.

Images go as decoded pixels, downscaled only as far as the processor would anyway (at most
4 tiles of 560 px: a 2240 px side), one per request (``ONE_RAW_IMAGE``). Text-only turns are
fine: the server skips the encoder. End id 128001 and pad id 128004 as NVIDIA's guide sends
them; Instruct turns end with ``<|eot_id|>``, sent as a stop word so the server stops there.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
from PIL import Image

from gateway.errors import InvalidRequest
from gateway.families._pixels import resize_to_fit
from gateway.families.base import (
    NVIDIA_PREPROCESSING,
    ONE_RAW_IMAGE,
    Conversation,
    Family,
    require_final_user_turn,
)
from gateway.families.llava_onevision import stack_letterboxed
from gateway.families.tool_formats.base import ToolFormat
from gateway.families.tool_formats.llama3 import SYSTEM_HEAD
from gateway.families.tool_formats.registry import LLAMA3_JSON

IMAGE = "<|image|>"
TILE = 560
MAX_SIDE = 4 * TILE  # max_image_tiles = 4: the widest canvas is 4 x 1 tiles
EOT = "<|eot_id|>"
# Meta's template's system block head when no tools are offered (its date_string default).
DATE_HEAD = "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024"


def _user_system(system: str | None) -> str:
    """The request's own system text: what remains once a tool format's head is taken off."""
    text = (system or "").strip()
    return text.removeprefix(SYSTEM_HEAD).strip()


def _header(role: str) -> str:
    role = "ipython" if role == "tool" else role  # a tool's result, as Meta's template writes it
    return f"<|start_header_id|>{role}<|end_header_id|>\n\n"


class Mllama(Family):
    name = "mllama"
    nvidia_server_side = NVIDIA_PREPROCESSING.format(since="v0.15.0")
    tool_format: ClassVar[ToolFormat | None] = LLAMA3_JSON
    image_tensor = "image_bytes_input"
    max_images = 1
    image_limit_reason = ONE_RAW_IMAGE
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

    def conversation_rules(self, conversation: Conversation) -> None:
        if conversation.image_count and _user_system(conversation.system):
            raise InvalidRequest(
                "Llama-3.2-Vision's chat template does not take a system message in a "
                "conversation with images (Meta's template refuses it: 'Prompting with images "
                "is incompatible with system messages'); move the instructions into the user "
                "message",
                param="messages",
                code="unsupported_system_message",
            )

    def render(self, conversation: Conversation) -> str:
        require_final_user_turn(conversation)
        pieces: list[str] = []
        if not conversation.image_count:  # Meta's template: a system block only without images
            system = (conversation.system or "").strip()
            head = "" if system.startswith(SYSTEM_HEAD) else DATE_HEAD + "\n\n"
            pieces.append(_header("system") + head + system + EOT)
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

    def image_tokens(self, sizes: Sequence[tuple[int, int]]) -> int | None:
        """None: the image reaches the decoder by cross-attention, not as prompt positions,
        and how many tiles the server cuts is its processor's choice."""
        return None


class MllamaBase(Mllama):
    """Base (non-Instruct) Llama-3.2-Vision: ``<|image|>`` per image, then the text as is."""

    name = "mllama_base"
    tool_format = None  # a base checkpoint was not trained on any tool-call format
    stop_strings: ClassVar[tuple[str, ...]] = ()

    def conversation_rules(self, conversation: Conversation) -> None:
        """None: a base checkpoint has no chat template, so no system rule."""

    def render(self, conversation: Conversation) -> str:
        require_final_user_turn(conversation)
        texts = [conversation.system.strip()] if conversation.system else []
        texts += [t.text for t in conversation.turns]
        return IMAGE * conversation.image_count + "\n".join(texts)
