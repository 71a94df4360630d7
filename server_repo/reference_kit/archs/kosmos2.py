"""Kosmos-2 (``Kosmos2ForConditionalGeneration``: CLIP ViT-L/14 + a latent-query resampler +
a Magneto decoder) for the reference.

NVIDIA's runner takes the HF processor's pixels (224 px, bicubic, OpenAI-CLIP normalisation)
and input ids, then points the 64 image positions at the prompt table; behind the ensemble
contract that is ``image_input`` FP16 ``[1, 1, 3, 224, 224]`` and a server-side template:
BOS, ``<image>``, the 64 resampled features, ``</image>``, then the client's text (the guide's
default is ``<grounding>An image of``). One image per request, as the processor lays it out.

The features are spliced into the token embeddings before the decoder scales them by
``sqrt(d)``, as HF does; positions are sinusoidal, counted from the pad id.

Shrunk vs kosmos-2-patch14-224: widths (ViT 1024 -> 32, decoder 2048 -> 64) and depths
(24 / 24 layers -> 1-2); the geometry (224 px, patch 14, 64 latent queries) is real. Two
departures keep random weights informative: the output projection is untied from the
embeddings (a tied head mostly repeats the last token) and the resampler's latent queries are
drawn small (HF's N(0, 1) drowns the unit-norm image features, so every image would read
alike).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch
from transformers import (
    AutoTokenizer,
    CLIPImageProcessorPil,
    Kosmos2Config,
    Kosmos2ForConditionalGeneration,
    PretrainedConfig,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)

from server_repo.reference_kit.archs.base import (
    Arch,
    MediaFeatures,
    image_array,
    model_device_dtype,
)
from server_repo.reference_kit.request import InvalidRequest
from server_repo.reference_kit.templates import KOSMOS2, MediaSlot
from server_repo.reference_kit.tiny_tokenizer import SpecialTokens

IMAGE_SIZE = 224
LATENT_QUERIES = 64


class Kosmos2Arch(Arch):
    name: ClassVar[str] = "reference_kosmos2"
    family: ClassVar[str] = "kosmos2"
    model_class = Kosmos2ForConditionalGeneration
    template = KOSMOS2
    special_tokens = SpecialTokens(
        bos="<s>",
        eos="</s>",
        unk="<unk>",
        pad="<pad>",
        extra=("<image>", "</image>", "<grounding>", "<phrase>", "</phrase>"),
        add_bos=True,
    )
    tiny_spec: ClassVar[dict[str, Any]] = {
        "vision": {"hidden": 32, "intermediate": 64, "layers": 1, "heads": 2},
        "text": {"hidden": 64, "ffn": 128, "layers": 2, "heads": 4},
        "max_positions": 2048,
        "init_range": 0.5,
        "latent_query_std": 0.05,
        "tied": False,
        "seed": 2022,
    }

    def tiny_config(self, tokenizer: PreTrainedTokenizerBase) -> PretrainedConfig:
        spec = self.tiny_spec
        vision = {
            "hidden_size": spec["vision"]["hidden"],
            "intermediate_size": spec["vision"]["intermediate"],
            "num_hidden_layers": spec["vision"]["layers"],
            "num_attention_heads": spec["vision"]["heads"],
            "image_size": IMAGE_SIZE,
            "patch_size": 14,
            "initializer_range": spec["init_range"],
        }
        text = {
            "vocab_size": len(tokenizer),
            "embed_dim": spec["text"]["hidden"],
            "ffn_dim": spec["text"]["ffn"],
            "layers": spec["text"]["layers"],
            "attention_heads": spec["text"]["heads"],
            "max_position_embeddings": spec["max_positions"],
            "bos_token_id": tokenizer.bos_token_id,
            "eos_token_id": tokenizer.eos_token_id,
            "pad_token_id": tokenizer.pad_token_id,
            "init_std": spec["init_range"],
            "tie_word_embeddings": spec["tied"],
        }
        return Kosmos2Config(
            text_config=text,
            vision_config=vision,
            latent_query_num=LATENT_QUERIES,
            tie_word_embeddings=spec["tied"],
        )

    def finish_tiny_model(self, model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> None:
        """Small latent queries: HF draws them N(0, 1), which drowns the unit-norm image
        features in the resampler, so every image would give the same answer."""
        with torch.no_grad():
            model.image_to_text_projection.latent_query.normal_(
                0.0, self.tiny_spec["latent_query_std"]
            )

    def save_processor(self, tokenizer: PreTrainedTokenizerBase, directory: Path) -> None:
        """The image processor only: ``Kosmos2Processor`` wants the real vocabulary's 1024
        location tokens, which the tiny tokenizer has no use for."""
        CLIPImageProcessorPil(
            size={"shortest_edge": IMAGE_SIZE},
            crop_size={"height": IMAGE_SIZE, "width": IMAGE_SIZE},
            do_center_crop=False,
        ).save_pretrained(directory)

    def load_processor(self, directory: Path) -> Any:
        """The ``<image>`` token id: its id stands in the 64 feature positions."""
        tokenizer = AutoTokenizer.from_pretrained(directory)
        return {"image_id": tokenizer.convert_tokens_to_ids("<image>")}

    def encode_media(
        self,
        model: PreTrainedModel,
        processor: Any,
        images: np.ndarray | None,
        video: np.ndarray | None,
    ) -> MediaFeatures:
        pixels = image_array(self.name, images, video, "image_input", (np.float16, np.float32))
        if pixels is None:
            return MediaFeatures.empty()
        if pixels.shape != (1, 3, IMAGE_SIZE, IMAGE_SIZE):
            raise InvalidRequest(
                f"image_input must be one image [1, 3, {IMAGE_SIZE}, {IMAGE_SIZE}] per request, "
                f"got {list(pixels.shape)}"
            )
        device, dtype = model_device_dtype(model)
        tensor = torch.from_numpy(np.ascontiguousarray(pixels)).to(device=device, dtype=dtype)
        embeds = image_features(model, tensor)[0]
        return MediaFeatures((MediaSlot(processor["image_id"], int(embeds.shape[0])),), embeds)

    def language_model(self, model: PreTrainedModel) -> PreTrainedModel:
        """The text decoder: the full model's ``forward`` insists on pixels or image embeds."""
        return model.text_model


def image_features(model: PreTrainedModel, pixels: torch.Tensor) -> torch.Tensor:
    """``[n, 64, d]`` as ``Kosmos2ForConditionalGeneration.forward`` computes them: the ViT's
    whole last hidden state, post-layernorm, L2-normalised, then the latent-query resampler."""
    hidden = model.vision_model(pixel_values=pixels, return_dict=True).last_hidden_state
    hidden = torch.nn.functional.normalize(model.vision_model.model.post_layernorm(hidden), dim=-1)
    return model.image_to_text_projection(hidden)[0]
