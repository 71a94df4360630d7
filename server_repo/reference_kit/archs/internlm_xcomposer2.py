"""InternLM-XComposer2 stand-in: ``LlavaForConditionalGeneration`` with a CLIP ViT at 490 px.

InternLM-XComposer2 has no transformers class. What its Triton deployment depends on is kept:
fp16 ``image_input`` ``[1, 3, 490, 490]`` (CLIP ViT-L/14 at 490 px: 35 x 35 = 1225 features),
and the server side of the guide's deployment (seeds/004; Howe-Young/tensorrtllm_backend
``all_models/internlm_xcomposer2/preprocessing/1/model.py``
@76a0d1f53335a9f08b6a750c278651458813948e): ``text_input`` is split at ``<ImageHere>``, the part
before and the part after are each ``tokenizer.encode``-d (so each starts with BOS), and the
image features go between them. A text without ``<ImageHere>`` fails there with an IndexError;
this model refuses it with a message instead. InternLM2's ``[UNUSED_TOKEN_146]`` /
``[UNUSED_TOKEN_145]`` turn markers are single tokens, as in its tokenizer.

The model's Partial-LoRA ships as a LoRA adapter, selected by ``lora_task_id`` with its weights
and config on first use, as the guide's client sends it; the kit applies it to every position
(``lora.py``), as TensorRT-LLM's LoRA does.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from transformers import (
    CLIPImageProcessorPil,
    PretrainedConfig,
    PreTrainedTokenizerBase,
)

from server_repo.reference_kit.archs.base import (
    tiny_llava_config,
)
from server_repo.reference_kit.archs.llava import LlavaArch
from server_repo.reference_kit.archs.vila import SLOT
from server_repo.reference_kit.request import InvalidRequest
from server_repo.reference_kit.templates import MediaSlot, Prompt
from server_repo.reference_kit.tiny_tokenizer import SpecialTokens

IMAGE_HERE = "<ImageHere>"
TURN_MARKERS = ("[UNUSED_TOKEN_146]", "[UNUSED_TOKEN_145]")


class InternLMXComposer2Arch(LlavaArch):
    name: ClassVar[str] = "reference_internlm_xcomposer2"
    family: ClassVar[str] = "internlm_xcomposer2"
    special_tokens = SpecialTokens(
        bos="<s>", eos="</s>", unk="<unk>", pad="<pad>", extra=(SLOT, *TURN_MARKERS), add_bos=True
    )
    tiny_spec: ClassVar[dict[str, Any]] = {
        "vision": {"hidden": 32, "intermediate": 64, "layers": 2, "heads": 2, "image": 490},
        "text": {"hidden": 64, "intermediate": 128, "layers": 2, "heads": 4, "kv_heads": 2},
        "max_positions": 4096,
        "init_range": 0.5,
        "seed": 2024,
    }

    def tiny_config(self, tokenizer: PreTrainedTokenizerBase) -> PretrainedConfig:
        return tiny_llava_config(self.tiny_spec, tokenizer, SLOT, 1225)

    def save_processor(self, tokenizer: PreTrainedTokenizerBase, directory: Path) -> None:
        processor = CLIPImageProcessorPil(
            size={"height": 490, "width": 490}, do_center_crop=False, do_resize=True
        )
        processor.save_pretrained(directory)
        tokenizer.save_pretrained(directory)

    def build_prompt(
        self, tokenizer: PreTrainedTokenizerBase, text: str, slots: tuple[MediaSlot, ...]
    ) -> Prompt:
        parts = text.split(IMAGE_HERE)
        if len(parts) != 2 or len(slots) != 1:
            raise InvalidRequest(
                f"{self.name}: the guide's preprocessing splits the text at one {IMAGE_HERE} "
                f"and places one image there; got {len(parts) - 1} markers and {len(slots)} "
                "images"
            )
        before, after = (list(tokenizer(part)["input_ids"]) for part in parts)  # BOS on each
        slot = slots[0]
        ids = [*before, *[slot.token_id] * slot.length, *after]
        mask = [False] * len(before) + [True] * slot.length + [False] * len(after)
        return Prompt(tuple(ids), tuple(mask))
