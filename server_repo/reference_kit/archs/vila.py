"""VILA-1.5 stand-in: ``LlavaForConditionalGeneration`` with a SigLIP-384 tower and a Llama.

VILA has no transformers class; what its Triton contract depends on is kept: fp16
``image_input`` ``[n, 3, 384, 384]`` (SigLIP at 384 px, patch 14: 27 x 27 = 729 features per
image here; VILA's projector pools them to 196, which changes no tensor the client sends), and
NVIDIA's server-side prompt (tensorrtllm_backend all_models/inflight_batcher_llm/preprocessing/
1/model.py @c2e65b88d85255be30cf50440a91662abeb497dd, ``_create_request``):

- ``max_num_images`` above 1: the text is split at each ``<image>`` (parts tokenized without
  special tokens), one image's features go at each marker, in order, between the Vicuna
  pre-prompt and `` ASSISTANT:`` (each of those two tokenized with BOS);
- otherwise: the pre-prompt, every feature, then the text tokenized whole (with BOS, an
  ``<image>`` in it staying text), then the post-prompt.

This model's preprocessing is built with ``max_num_images`` 4, as the guide builds VILA. A
request whose markers do not match its images is refused, where NVIDIA's would misplace
features or fail in the engine.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from transformers import (
    LlamaConfig,
    LlavaConfig,
    PretrainedConfig,
    PreTrainedTokenizerBase,
    SiglipImageProcessorPil,
    SiglipVisionConfig,
)

from server_repo.reference_kit.archs.base import decoder_settings
from server_repo.reference_kit.archs.llava import LlavaArch
from server_repo.reference_kit.request import InvalidRequest
from server_repo.reference_kit.templates import MediaSlot, Prompt
from server_repo.reference_kit.tiny_tokenizer import SpecialTokens

PRE_PROMPT = (
    "A chat between a curious user and an artificial intelligence assistant. The assistant "
    "gives helpful, detailed, and polite answers to the user's questions. USER: "
)
POST_PROMPT = " ASSISTANT:"
MARKER = "<image>"
SLOT = "<vila_image_slot>"  # the features' placeholder id; never written by a client


class VilaArch(LlavaArch):
    name: ClassVar[str] = "reference_vila"
    family: ClassVar[str] = "vila"
    # "<image>" is plain text to the tokenizer: NVIDIA splits the string, not a token.
    special_tokens = SpecialTokens(
        bos="<s>", eos="</s>", unk="<unk>", pad="<pad>", extra=(SLOT,), add_bos=True
    )
    tiny_spec: ClassVar[dict[str, Any]] = {
        "vision": {"hidden": 32, "intermediate": 64, "layers": 2, "heads": 2, "image": 384},
        "text": {"hidden": 64, "intermediate": 128, "layers": 2, "heads": 4, "kv_heads": 2},
        "max_positions": 4096,
        "init_range": 0.5,
        "seed": 1515,
    }

    def __init__(self, max_num_images: int = 4) -> None:
        self.max_num_images = max_num_images

    def tiny_config(self, tokenizer: PreTrainedTokenizerBase) -> PretrainedConfig:
        spec = self.tiny_spec
        vision = SiglipVisionConfig(
            hidden_size=spec["vision"]["hidden"],
            intermediate_size=spec["vision"]["intermediate"],
            num_hidden_layers=spec["vision"]["layers"],
            num_attention_heads=spec["vision"]["heads"],
            image_size=spec["vision"]["image"],
            patch_size=14,
        )
        text = LlamaConfig(**decoder_settings(spec, tokenizer))
        return LlavaConfig(
            vision_config=vision,
            text_config=text,
            image_token_index=tokenizer.convert_tokens_to_ids(SLOT),
            image_seq_length=729,
            vision_feature_layer=-1,
            vision_feature_select_strategy="full",
            pad_token_id=tokenizer.pad_token_id,
        )

    def save_processor(self, tokenizer: PreTrainedTokenizerBase, directory: Path) -> None:
        processor = SiglipImageProcessorPil(
            size={"height": 384, "width": 384}, image_mean=[0.5] * 3, image_std=[0.5] * 3
        )
        processor.save_pretrained(directory)
        tokenizer.save_pretrained(directory)

    def build_prompt(
        self, tokenizer: PreTrainedTokenizerBase, text: str, slots: tuple[MediaSlot, ...]
    ) -> Prompt:
        def encode(piece: str, special: bool) -> list[int]:
            if not piece:
                return []
            return list(tokenizer(piece, add_special_tokens=special)["input_ids"])

        if self.max_num_images > 1:
            parts = text.split(MARKER)
            if len(parts) - 1 != len(slots):
                raise InvalidRequest(
                    f"{self.name}: {len(slots)} images but {len(parts) - 1} {MARKER} markers; "
                    f"with max_num_images {self.max_num_images} NVIDIA's preprocessing places "
                    f"each image's features at a {MARKER} in the text"
                )
            if len(slots) > self.max_num_images:
                raise InvalidRequest(
                    f"{self.name}: {len(slots)} images exceed max_num_images {self.max_num_images}"
                )
            pieces: list[tuple[list[int], bool]] = [(encode(PRE_PROMPT, True), False)]
            for index, part in enumerate(parts):
                if index:
                    slot = slots[index - 1]
                    pieces.append(([slot.token_id] * slot.length, True))
                pieces.append((encode(part, False), False))
        else:
            if len(slots) > 1:
                raise InvalidRequest(
                    f"{self.name}: {len(slots)} images; with max_num_images "
                    f"{self.max_num_images} NVIDIA's preprocessing takes one"
                )
            pieces = [(encode(PRE_PROMPT, True), False)]
            pieces += [([slot.token_id] * slot.length, True) for slot in slots]
            pieces.append((encode(text, True), False))
        pieces.append((encode(POST_PROMPT, True), False))
        ids = [token for tokens, _ in pieces for token in tokens]
        mask = [media for tokens, media in pieces for _ in tokens]
        return Prompt(tuple(ids), tuple(mask))
