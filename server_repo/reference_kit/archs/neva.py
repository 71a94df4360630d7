"""NeVA and Video-NeVA stand-ins: ``LlavaForConditionalGeneration`` towers with a Llama.

NeMo's NeVA has no transformers class and NVIDIA ships no Triton preprocessing for it, so these
models stand for the deployment docs/families.md asks for: ``text_input`` holds NeMo's whole
template, and the features go where its media marker stands (``<image>`` for NeVA, ``<video>``
for Video-NeVA), as NVIDIA's preprocessing does for VILA's ``<image>``. The two text pieces are
tokenized without special tokens, as NVIDIA's runner tokenizes NeVA's pre- and post-prompt
(``sentencepiece.encode``, tensorrt_llm/runtime/multimodal_model_runner.py
@033f406702a726877a9df9eb4931f0661cf0a39a); NeMo's ``<extra_id_*>`` turn markers are single
tokens. Exactly one marker per request: the template has one media slot.

NeVA: SigLIP at 384 px (27 x 27 = 729 features), ``image_input`` ``[1, 3, 384, 384]``.
Video-NeVA: CLIP ViT at 224 px (16 x 16 = 256 features a frame), the frames in
``image_input`` ``[frames, 3, 224, 224]``, all of them at the one ``<video>``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from transformers import (
    CLIPImageProcessorPil,
    PretrainedConfig,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)

from server_repo.reference_kit.archs.base import (
    MediaFeatures,
    tiny_llava_config,
)
from server_repo.reference_kit.archs.vila import SLOT, VilaArch
from server_repo.reference_kit.request import InvalidRequest
from server_repo.reference_kit.templates import MediaSlot, Prompt
from server_repo.reference_kit.tiny_tokenizer import SpecialTokens

NEMO_TURNS = ("<extra_id_0>", "<extra_id_1>", "<extra_id_2>")


class NevaArch(VilaArch):
    name: ClassVar[str] = "reference_neva"
    family: ClassVar[str] = "neva"
    marker: ClassVar[str] = "<image>"
    media_noun: ClassVar[str] = "image"
    special_tokens = SpecialTokens(
        bos="<s>", eos="</s>", unk="<unk>", pad="<pad>", extra=(SLOT, *NEMO_TURNS), add_bos=False
    )
    tiny_spec: ClassVar[dict[str, Any]] = {**VilaArch.tiny_spec, "seed": 3131}

    def __init__(self) -> None:
        super().__init__(max_num_images=1)

    def build_prompt(
        self, tokenizer: PreTrainedTokenizerBase, text: str, slots: tuple[MediaSlot, ...]
    ) -> Prompt:
        parts = text.split(self.marker)
        if len(parts) != 2 or len(slots) != 1:
            raise InvalidRequest(
                f"{self.name}: the text must hold exactly one {self.marker} and the request "
                f"one {self.media_noun}; got {len(parts) - 1} markers and {len(slots)}"
            )
        before, after = (
            list(tokenizer(part, add_special_tokens=False)["input_ids"]) if part else []
            for part in parts
        )
        slot = slots[0]
        ids = [*before, *[slot.token_id] * slot.length, *after]
        mask = [False] * len(before) + [True] * slot.length + [False] * len(after)
        return Prompt(tuple(ids), tuple(mask))


class VideoNevaArch(NevaArch):
    name: ClassVar[str] = "reference_video_neva"
    family: ClassVar[str] = "video_neva"
    marker: ClassVar[str] = "<video>"
    media_noun: ClassVar[str] = "video (its frames in image_input)"
    tiny_spec: ClassVar[dict[str, Any]] = {
        **VilaArch.tiny_spec,
        "vision": {**VilaArch.tiny_spec["vision"], "image": 224},
        "seed": 4141,
    }

    def tiny_config(self, tokenizer: PreTrainedTokenizerBase) -> PretrainedConfig:
        return tiny_llava_config(self.tiny_spec, tokenizer, SLOT, 256)

    def save_processor(self, tokenizer: PreTrainedTokenizerBase, directory: Path) -> None:
        processor = CLIPImageProcessorPil(
            size={"shortest_edge": 224}, crop_size={"height": 224, "width": 224}
        )
        processor.save_pretrained(directory)
        tokenizer.save_pretrained(directory)

    def encode_media(
        self,
        model: PreTrainedModel,
        processor: Any,
        images: np.ndarray | None,
        video: np.ndarray | None,
    ) -> MediaFeatures:
        """Every frame's 256 features, one run at the ``<video>`` marker."""
        features = super().encode_media(model, processor, images, video)
        if features.embeds is None:
            return features
        total = sum(slot.length for slot in features.slots)
        slot = MediaSlot(features.slots[0].token_id, total)
        return MediaFeatures((slot,), features.embeds)
