"""Nougat (``VisionEncoderDecoderModel``: a Donut-Swin encoder + an mBART decoder).

NVIDIA's runner feeds the vision engine the HF processor's page (crop margins, fit into
896 x 672, pad, ImageNet normalisation); behind the ensemble contract that is ``image_input``
FP16 ``[1, 1, 3, 896, 672]``. The Swin encoder (patch 4, window 7, three 2 x 2 merges) turns the
page into (896 / 32) x (672 / 32) = 588 positions, projected to the decoder's width; the
decoder cross-attends to them. ``text_input`` is ignored (Nougat takes no prompt). Like a
deployment of NVIDIA's preprocessing, the decoder starts at the pad id unless
``decoder_text_input`` says otherwise; the runner's start is ``<s>`` (``decoder.bos_token_id``),
which the gateway sends as that decoder prompt.

Shrunk vs facebook/nougat-base: widths (Swin 128 -> 16, mBART 1024 -> 32) and depths
(2-2-14-2 Swin blocks -> 1-1-1-1, 10 decoder layers -> 1); the geometry (896 x 672 pages,
patch 4, window 7, 588 positions) is real. The decoder's output projection is untied from
its embeddings (Nougat ties them): with random weights a tied head mostly repeats the last
token.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch
from transformers import (
    DonutSwinConfig,
    MBartConfig,
    PretrainedConfig,
    PreTrainedModel,
    PreTrainedTokenizerBase,
    VisionEncoderDecoderConfig,
    VisionEncoderDecoderModel,
)
from transformers.models.nougat.image_processing_pil_nougat import NougatImageProcessorPil

from server_repo.reference_kit.archs.base import (
    Arch,
    EncoderOutput,
    MediaFeatures,
    image_array,
    model_device_dtype,
)
from server_repo.reference_kit.request import InvalidRequest
from server_repo.reference_kit.templates import NO_PROMPT, MediaSlot
from server_repo.reference_kit.tiny_tokenizer import SpecialTokens

PAGE = (896, 672)  # (height, width)


class NougatArch(Arch):
    name: ClassVar[str] = "reference_nougat"
    family: ClassVar[str] = "nougat"
    model_class = VisionEncoderDecoderModel
    template = NO_PROMPT
    encoder_decoder: ClassVar[bool] = True
    special_tokens = SpecialTokens(
        bos="<s>", eos="</s>", unk="<unk>", pad="<pad>", extra=(), add_bos=False
    )
    tiny_spec: ClassVar[dict[str, Any]] = {
        "swin": {"embed": 16, "depths": [1, 1, 1, 1], "heads": [1, 2, 4, 8], "window": 7},
        "decoder": {"hidden": 32, "ffn": 64, "layers": 1, "heads": 2},
        "max_positions": 4096,
        "init_range": 0.5,
        "tied": False,
        "seed": 1702,
    }

    def tiny_config(self, tokenizer: PreTrainedTokenizerBase) -> PretrainedConfig:
        spec = self.tiny_spec
        encoder = DonutSwinConfig(
            image_size=list(PAGE),
            patch_size=4,
            embed_dim=spec["swin"]["embed"],
            depths=spec["swin"]["depths"],
            num_heads=spec["swin"]["heads"],
            window_size=spec["swin"]["window"],
            drop_path_rate=0.0,
            initializer_range=spec["init_range"],
        )
        decoder = MBartConfig(
            vocab_size=len(tokenizer),
            d_model=spec["decoder"]["hidden"],
            decoder_layers=spec["decoder"]["layers"],
            decoder_attention_heads=spec["decoder"]["heads"],
            decoder_ffn_dim=spec["decoder"]["ffn"],
            encoder_layers=spec["decoder"]["layers"],
            max_position_embeddings=spec["max_positions"],
            scale_embedding=True,
            is_decoder=True,
            add_cross_attention=True,
            bos_token_id=tokenizer.bos_token_id,
            eos_token_id=tokenizer.eos_token_id,
            pad_token_id=tokenizer.pad_token_id,
            decoder_start_token_id=tokenizer.bos_token_id,
            init_std=spec["init_range"],
            tie_word_embeddings=spec["tied"],
        )
        config = VisionEncoderDecoderConfig(encoder=encoder.to_dict(), decoder=decoder.to_dict())
        config.decoder_start_token_id = tokenizer.bos_token_id
        config.pad_token_id = tokenizer.pad_token_id
        config.eos_token_id = tokenizer.eos_token_id
        return config

    def save_processor(self, tokenizer: PreTrainedTokenizerBase, directory: Path) -> None:
        NougatImageProcessorPil(size={"height": PAGE[0], "width": PAGE[1]}).save_pretrained(
            directory
        )

    def encode_media(
        self,
        model: PreTrainedModel,
        processor: Any,
        images: np.ndarray | None,
        video: np.ndarray | None,
    ) -> MediaFeatures:
        needed = f"{self.name} needs an image: it reads one page"
        pixels = image_array(
            self.name, images, video, "image_input", (np.float16, np.float32), needed
        )
        assert pixels is not None
        if pixels.shape != (1, 3, *PAGE):
            raise InvalidRequest(
                f"image_input must be one page [1, 3, {PAGE[0]}, {PAGE[1]}] per request, "
                f"got {list(pixels.shape)}"
            )
        device, dtype = model_device_dtype(model)
        tensor = torch.from_numpy(np.ascontiguousarray(pixels)).to(device=device, dtype=dtype)
        hidden = model.encoder(pixel_values=tensor).last_hidden_state[0]
        slot = MediaSlot(model.config.decoder.pad_token_id, int(hidden.shape[0]))
        return MediaFeatures((slot,), hidden)

    def encode(
        self, model: PreTrainedModel, embeds: torch.Tensor, features: MediaFeatures
    ) -> EncoderOutput:
        """The Swin output from ``encode_media``; the model projects it for the decoder."""
        return EncoderOutput(embeds)

    def decoder_start_id(self, model: PreTrainedModel) -> int:
        return int(model.config.decoder_start_token_id)
