"""Deplot (``Pix2StructForConditionalGeneration``: a patch-sequence ViT encoder + a T5-style
decoder) for the reference.

Pix2Struct's encoder reads flattened patches, not an image: NVIDIA's runner feeds its vision
engine the HF processor's ``flattened_patches`` (``[max_patches, 2 + 16 x 16 x 3]``: row id,
column id, then the patch's standardised pixels; zero rows pad to ``max_patches``) with the
matching attention mask. Behind the ensemble contract that is ``image_input`` FP16
``[1, 1, patches, 770]``; the server derives the mask the way the processor does (a row is a
patch when it is not all zeros). The encoder output is all the decoder reads: ``text_input`` is
ignored (NVIDIA's runner passes dummy ids; Deplot's question is drawn into the image by the
processor), and the decoder starts from its start token (the pad id) unless
``decoder_text_input`` says otherwise. Features per image: the patch rows sent (2048 for
Deplot), padding included, as in TensorRT-LLM's encoder input length.

Shrunk vs google/deplot: widths (768 -> 32) and depths (12 + 12 layers -> 2 + 2); the
geometry (16 px patches, 2048 max patches, 4096 row/column positions) is real.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch
from transformers import (
    Pix2StructConfig,
    Pix2StructForConditionalGeneration,
    PretrainedConfig,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)
from transformers.models.pix2struct.image_processing_pil_pix2struct import (
    Pix2StructImageProcessorPil,
)

from server_repo.reference_kit.archs.base import (
    Arch,
    EncoderOutput,
    MediaFeatures,
    expect_array,
    model_device_dtype,
)
from server_repo.reference_kit.request import InvalidRequest
from server_repo.reference_kit.templates import NO_PROMPT, MediaSlot
from server_repo.reference_kit.tiny_tokenizer import SpecialTokens

PATCH = 16
DEPTH = 2 + 3 * PATCH * PATCH
MAX_PATCHES = 2048


class Pix2StructArch(Arch):
    name: ClassVar[str] = "reference_deplot"
    family: ClassVar[str] = "deplot"
    model_class = Pix2StructForConditionalGeneration
    template = NO_PROMPT
    encoder_decoder: ClassVar[bool] = True
    special_tokens = SpecialTokens(
        bos=None, eos="</s>", unk="<unk>", pad="<pad>", extra=(), add_bos=False
    )
    tiny_spec: ClassVar[dict[str, Any]] = {
        "hidden": 32,
        "kv": 16,
        "ff": 64,
        "layers": 2,
        "heads": 2,
        "seq_len": 4096,
        "init_factor": 4.0,
        "seed": 2212,
    }

    def tiny_config(self, tokenizer: PreTrainedTokenizerBase) -> PretrainedConfig:
        spec = self.tiny_spec
        shared = {
            "hidden_size": spec["hidden"],
            "d_kv": spec["kv"],
            "d_ff": spec["ff"],
            "initializer_factor": spec["init_factor"],
        }
        text = {
            **shared,
            "vocab_size": len(tokenizer),
            "num_layers": spec["layers"],
            "num_heads": spec["heads"],
            "pad_token_id": tokenizer.pad_token_id,
            "eos_token_id": tokenizer.eos_token_id,
            "decoder_start_token_id": tokenizer.pad_token_id,
        }
        vision = {
            **shared,
            "patch_embed_hidden_size": DEPTH - 2,
            "num_hidden_layers": spec["layers"],
            "num_attention_heads": spec["heads"],
            "seq_len": spec["seq_len"],
            "initializer_range": 0.02 * spec["init_factor"],
        }
        return Pix2StructConfig(
            text_config=text,
            vision_config=vision,
            is_vqa=True,
            initializer_factor=spec["init_factor"],
            decoder_start_token_id=tokenizer.pad_token_id,
            pad_token_id=tokenizer.pad_token_id,
            eos_token_id=tokenizer.eos_token_id,
        )

    def save_processor(self, tokenizer: PreTrainedTokenizerBase, directory: Path) -> None:
        """The image processor only (``Pix2StructProcessor`` wants a T5 tokenizer class)."""
        Pix2StructImageProcessorPil(max_patches=MAX_PATCHES, is_vqa=True).save_pretrained(directory)

    def encode_media(
        self,
        model: PreTrainedModel,
        processor: Any,
        images: np.ndarray | None,
        video: np.ndarray | None,
    ) -> MediaFeatures:
        if video is not None:
            raise InvalidRequest(f"video input is not supported by {self.name}")
        if images is None:
            raise InvalidRequest(f"{self.name} needs an image: its encoder reads only the image")
        patches = expect_array(images, "image_input", 3, (np.float16, np.float32))
        limit = model.config.vision_config.seq_len
        if patches.shape[0] != 1 or patches.shape[2] != DEPTH or patches.shape[1] > limit:
            raise InvalidRequest(
                f"image_input must be one image's flattened patches [1, <= {limit}, {DEPTH}] "
                f"(row id, column id, 16 x 16 x 3 pixels), got {list(patches.shape)}"
            )
        device, dtype = model_device_dtype(model)
        tensor = torch.from_numpy(np.ascontiguousarray(patches)).to(device=device, dtype=dtype)
        mask = (tensor.sum(dim=-1) != 0).to(dtype)
        if not bool(mask.any()):
            raise InvalidRequest("image_input holds no patch: every row is zero")
        encoder = model.get_encoder()
        hidden = encoder(flattened_patches=tensor, attention_mask=mask).last_hidden_state[0]
        slot = MediaSlot(model.config.text_config.pad_token_id, int(hidden.shape[0]))
        return MediaFeatures((slot,), hidden, {"mask": mask})

    def encode(
        self, model: PreTrainedModel, embeds: torch.Tensor, features: MediaFeatures
    ) -> EncoderOutput:
        """The vision encoder already ran in ``encode_media``: its output and patch mask."""
        return EncoderOutput(embeds, features.extra["mask"])

    def decoder_start_id(self, model: PreTrainedModel) -> int:
        return int(model.config.text_config.decoder_start_token_id)
