"""What a model family is: a tensor path, a prompt renderer and a pixel spec, nothing more.

A family knows how one conversation becomes the ``text_input`` string the Triton
deployment expects (given what NVIDIA's server-side preprocessing already adds), and how
decoded images become the image tensor its deployment declares. It knows nothing of
HTTP, fetching or gRPC: everything here is pure and synchronous so the pipeline can run
the pixel work in worker threads and tests can check it without a server.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal

import numpy as np
from PIL import Image

from gateway.errors import InvalidRequest

Role = Literal["system", "user", "assistant"]
ImageTensorName = Literal["image_input", "image_bytes_input"]


@dataclass(frozen=True)
class Turn:
    """One message, flattened: its text and how many images it carried (in order)."""

    role: Role
    text: str
    images: int = 0


@dataclass(frozen=True)
class Conversation:
    """The chat, normalised: system text first (if any), then alternating turns."""

    system: str | None
    turns: tuple[Turn, ...]

    @property
    def image_count(self) -> int:
        return sum(t.images for t in self.turns)


class Family:
    """Base class: override the class attributes and ``render``; pixels are optional."""

    name: ClassVar[str]
    image_tensor: ClassVar[ImageTensorName | None] = None
    features_per_image: ClassVar[int | None] = None
    default_end_id: ClassVar[int | None] = None
    default_pad_id: ClassVar[int | None] = None
    stop_strings: ClassVar[tuple[str, ...]] = ()
    # Strings the server tokenizer turns into structure (image slots, turn markers). User
    # text carrying them could forge turns or desynchronise image features: refused.
    reserved_markers: ClassVar[tuple[str, ...]] = ()

    def render(self, conversation: Conversation) -> str:
        """The ``text_input`` for this conversation."""
        raise NotImplementedError

    def prepare_image(self, image: Image.Image) -> np.ndarray:
        """One decoded RGB image -> the per-image array this family's tensor holds."""
        raise InvalidRequest(f"model family '{self.name}' does not accept images")

    def stack_images(self, arrays: Sequence[np.ndarray]) -> np.ndarray:
        """Per-image arrays -> the wire tensor, batch dimension first."""
        raise InvalidRequest(f"model family '{self.name}' does not accept images")

    def processing_options(self) -> str:
        """A stable description of the pixel processing, folded into the content digest."""
        return f"{self.name}:{self.image_tensor}"

    def check_text(self, conversation: Conversation) -> None:
        """Refuse user-supplied text that contains the family's structural markers."""
        texts = [conversation.system or ""] + [t.text for t in conversation.turns]
        for marker in self.reserved_markers:
            if any(marker in text for text in texts):
                raise InvalidRequest(
                    f"message text may not contain the reserved marker {marker!r}",
                    param="messages",
                    code="reserved_marker",
                )


def require_final_user_turn(conversation: Conversation) -> None:
    """Families whose server appends the assistant header need a user turn last."""
    if not conversation.turns or conversation.turns[-1].role != "user":
        raise InvalidRequest(
            "the last message must have role 'user' for this model", param="messages"
        )


def max_multimodal_len(max_batch_size: int, features_per_image: int, max_images: int) -> int:
    """TRT-LLM engine rule: max_multimodal_len = max_batch_size x features x max_images."""
    if min(max_batch_size, features_per_image, max_images) < 1:
        raise ValueError("max_batch_size, features_per_image and max_images must be >= 1")
    return max_batch_size * features_per_image * max_images
