"""What the gateway needs to speak NVIDIA's ``llmapi`` Triton model: images as ``data:`` URIs,
and the checkpoint's chat template and tokenizer.

NVIDIA's ``tensorrt_llm`` llmapi model (TensorRT-LLM triton_backend/all_models/llmapi, config.pbtxt
@0a71057313ec0626527e164a8fc0205c5822e2f5) runs the PyTorch backend: it preprocesses images
itself, from its ``image_url`` input (one URL per image). Triton never fetches a URL the client
named: the gateway fetches, decodes and checks every image as for any model (SSRF guard, byte,
pixel and time limits) and sends the image it decoded, re-encoded as a lossless PNG ``data:``
URI. Re-encoding rather than forwarding the source bytes means the model sees exactly the pixels
the gateway checked (RGB, transparency on white, the first frame of an animation), whatever
decoder differences lie between the gateway's Pillow and the server's loader, and never a file
the gateway's limits did not bound.

The ``Llmapi`` family stands in for a served model that names no family (tools are then refused:
no tool-call format is known); a named family on this contract supplies its tool-call format.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image
from tokenizers import Tokenizer

from gateway.families._pixels import convert_rgb
from gateway.families.base import Conversation, Family
from gateway.families.chat_template import ChatTemplate, TemplateError

PNG_PREFIX = b"data:image/png;base64,"
NVIDIA_LLMAPI = (
    "NVIDIA's llmapi Triton model (TensorRT-LLM triton_backend/all_models/llmapi, PyTorch "
    "backend): the gateway renders the chat template, the model preprocesses images"
)


class Llmapi(Family):
    """Images for ``image_url``: each a PNG ``data:`` URI of the decoded RGB pixels."""

    name = "llmapi"
    image_tensor = "image_url"
    required_inputs = ("text_input", "sampling_param_max_tokens")
    nvidia_server_side = NVIDIA_LLMAPI

    def render(self, conversation: Conversation) -> str:
        raise NotImplementedError("the llmapi contract renders with the model's chat template")

    def prepare_image(self, image: Image.Image) -> np.ndarray[Any, Any]:
        """The decoded image as PNG bytes (compression level 1: the bytes go over loopback or a
        LAN, where encoding time matters more than size)."""
        buffer = io.BytesIO()
        convert_rgb(image).save(buffer, format="PNG", compress_level=1)
        return np.frombuffer(buffer.getvalue(), dtype=np.uint8)

    def stack_images(self, arrays: Sequence[np.ndarray[Any, Any]]) -> np.ndarray[Any, Any]:
        """One ``data:`` URI per image, in order (``image_url`` has no batch axis)."""
        urls = [PNG_PREFIX + base64.b64encode(array.tobytes()) for array in arrays]
        return np.array(urls, dtype=np.object_)

    def processing_options(self) -> str:
        return "llmapi:png"


IMAGE_URLS = Llmapi()


@dataclass(frozen=True)
class LlmapiModel:
    """A served llmapi model's chat template and tokenizer, read once from its Hugging Face
    folder (``[[models]] tokenizer``)."""

    folder: Path
    template: ChatTemplate
    tokenizer: Tokenizer
    # The BOS text the tokenizer adds itself: NVIDIA's model tokenizes ``text_input`` with
    # special tokens added, so a template that writes BOS too would double it; it is cut.
    added_bos: str | None = None
    # The tokenizer's special tokens: text the client sends may not hold them.
    special_tokens: tuple[str, ...] = ()

    @classmethod
    def load(cls, folder: Path) -> LlmapiModel:
        """``TemplateError`` (a ``ValueError``) says what the folder lacks."""
        if not folder.is_dir():
            raise TemplateError(f"the tokenizer folder {folder} does not exist")
        template = ChatTemplate.load(folder)
        file = folder / "tokenizer.json"
        try:
            tokenizer = Tokenizer.from_file(str(file))
        except Exception as exc:  # tokenizers raises a bare Exception for a bad file
            raise TemplateError(f"cannot read a tokenizer from {file}: {exc}") from exc
        added = tokenizer.encode("", add_special_tokens=True).ids
        bos = template.special.get("bos_token")
        added_bos = bos if bos and added and tokenizer.id_to_token(added[0]) == bos else None
        decoder = tokenizer.get_added_tokens_decoder()
        special = tuple(sorted({t.content for t in decoder.values() if t.special and t.content}))
        return cls(folder, template, tokenizer, added_bos, special)

    def count(self, text: str, special: bool = False) -> int:
        """Tokens in ``text`` as the model's tokenizer reads it; ``special``: with the special
        tokens the tokenizer adds (a prompt, as the model tokenizes ``text_input``)."""
        return len(self.tokenizer.encode(text, add_special_tokens=special).ids)

    def prompt(self, rendered: str) -> str:
        """The rendered prompt as ``text_input`` (a template-written BOS cut, see above)."""
        if self.added_bos and rendered.startswith(self.added_bos):
            return rendered[len(self.added_bos) :]
        return rendered
