"""CogVLM stand-in: ``LlavaForConditionalGeneration`` (CLIP ViT at 490 px) with CogVLM's positions.

CogVLM has no transformers class and NVIDIA ships no Triton preprocessing for it; its Triton
backend cannot pass position ids either (docs/families.md). This model stands for the deployment
docs/families.md asks for: one that computes CogVLM's position ids itself, and says so with the
config parameter ``cogvlm_position_ids: "server"``. The layout is NVIDIA's runner's
(tensorrt_llm/runtime/multimodal_model_runner.py @033f406702a726877a9df9eb4931f0661cf0a39a):
``input_ids = [BOS, image features, the rest of the text]`` (``setup_fake_prompts``), the image
being begin-of-image, 1225 patches (35 x 35 at 490 px), end-of-image; and
``prepare_position_ids_for_cogvlm``: BOS 0, begin-of-image 1, every patch 2, end-of-image 3, the
text from 4 on. Here begin- and end-of-image are two special tokens around the CLIP features
(CogVLM's vision engine emits them as features), so the 1227 image positions are the same.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from server_repo.reference_kit.archs.base import MediaFeatures
from server_repo.reference_kit.archs.internlm_xcomposer2 import InternLMXComposer2Arch
from server_repo.reference_kit.archs.vila import SLOT
from server_repo.reference_kit.request import InvalidRequest
from server_repo.reference_kit.templates import MediaSlot, Prompt
from server_repo.reference_kit.tiny_tokenizer import SpecialTokens

BOI, EOI = "<boi>", "<eoi>"
PATCHES = 1225
IMAGE_END = 2 + PATCHES  # index of end-of-image: BOS, begin-of-image, then the patches


def position_ids(start: int, length: int) -> torch.Tensor:
    """The runner's ids for prompt indexes ``[start, start + length)`` (and beyond, generated)."""
    index = torch.arange(start, start + length)
    positions = torch.where(index < 2, index, torch.full_like(index, 2))
    return torch.where(index >= IMAGE_END, index - (PATCHES - 1), positions)


class CogVLMArch(InternLMXComposer2Arch):
    name: ClassVar[str] = "reference_cogvlm"
    family: ClassVar[str] = "cogvlm"
    special_tokens = SpecialTokens(
        bos="<s>", eos="</s>", unk="<unk>", pad="<pad>", extra=(SLOT, BOI, EOI), add_bos=True
    )
    tiny_spec: ClassVar[dict[str, Any]] = {**InternLMXComposer2Arch.tiny_spec, "seed": 1717}
    # The prefix cache keys blocks by token ids alone; these positions follow the index, so a
    # reused block holds the KV this prompt would compute.
    reuse_prefix: ClassVar[bool] = True

    def build_prompt(
        self, tokenizer: PreTrainedTokenizerBase, text: str, slots: tuple[MediaSlot, ...]
    ) -> Prompt:
        if len(slots) != 1 or slots[0].length != PATCHES:
            raise InvalidRequest(f"{self.name}: CogVLM reads one 490 x 490 image per request")
        bos = tokenizer.bos_token_id
        boi, eoi = tokenizer.convert_tokens_to_ids([BOI, EOI])
        rest = list(tokenizer(text, add_special_tokens=False)["input_ids"])
        slot = slots[0]
        ids = [bos, boi, *[slot.token_id] * slot.length, eoi, *rest]
        mask = [False, False] + [True] * slot.length + [False] * (1 + len(rest))
        return Prompt(tuple(ids), tuple(mask))

    def step_inputs(
        self, model: PreTrainedModel, prompt: Prompt, features: MediaFeatures
    ) -> Callable[[int, int], dict[str, Any]]:
        device = next(model.parameters()).device

        def inputs(start: int, length: int) -> dict[str, Any]:
            return {"position_ids": position_ids(start, length).view(1, -1).to(device)}

        return inputs
