"""Llama-3.2-Vision (``MllamaForConditionalGeneration``) for the reference.

Mllama does not put image features into the prompt: a tiled ViT encodes each image, and
cross-attention layers inside the decoder read it. The prompt is the client's text with BOS
in front (NVIDIA's preprocessing adds nothing else); each ``<|image|>`` token marks where
attending to the next image starts, so tokens before the first one see no image, and the count
of ``<|image|>`` tokens must equal the count of images. Text-only requests skip the encoder.

Like NVIDIA's preprocessing, the model takes raw pixels (``image_bytes_input`` uint8
``[1, n, H, W, 3]``) and runs the image processor itself (PIL backend): resize into the best
canvas of up to 4 tiles, pad, normalise, split into tiles; the cross-attention mask says which
tiles exist. Prompt positions hold only text, so ``input_tokens`` counts text tokens.

Prefix KV reuse is off (0 reused blocks): a text token's KV depends on the image through
cross-attention, and TensorRT-LLM builds Mllama as an encoder-decoder engine anyway.

Shrunk vs Llama-3.2-11B-Vision: the tile is 224 px instead of 560 (16 x 16 + 1 = 257 vision
positions per tile instead of 1601, so at most 1028 per image instead of 6404); widths (ViT
1280 -> 32, Llama 4096 -> 64) and depths (32 + 8 global / 40 layers -> 2 + 1 / 2, one of them
cross-attention) are tiny. Tiling (max 4 tiles, the 8 aspect ratios) is real.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch
from transformers import (
    AutoImageProcessor,
    MllamaConfig,
    MllamaForConditionalGeneration,
    PretrainedConfig,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)
from transformers.models.mllama.image_processing_pil_mllama import MllamaImageProcessorPil
from transformers.models.mllama.processing_mllama import (
    convert_sparse_cross_attention_mask_to_dense,
    get_cross_attention_token_mask,
)

from server_repo.reference_kit.archs.base import (
    Arch,
    MediaFeatures,
    model_device_dtype,
    one_raw_image,
    rgb_image_bytes,
)
from server_repo.reference_kit.request import InvalidRequest
from server_repo.reference_kit.templates import MLLAMA, Prompt
from server_repo.reference_kit.tiny_tokenizer import SpecialTokens

IMAGE_TOKEN = "<|image|>"
TILE = 224
MAX_TILES = 4


class MllamaArch(Arch):
    name: ClassVar[str] = "reference_mllama"
    family: ClassVar[str] = "mllama"
    model_class = MllamaForConditionalGeneration
    template = MLLAMA
    reuse_prefix: ClassVar[bool] = False
    special_tokens = SpecialTokens(
        bos="<|begin_of_text|>",
        eos="<|end_of_text|>",
        unk="<unk>",
        pad="<|finetune_right_pad_id|>",
        extra=(
            "<|start_header_id|>",
            "<|end_header_id|>",
            "<|eot_id|>",
            "<|python_tag|>",
            IMAGE_TOKEN,
        ),
        add_bos=True,
    )
    tiny_spec: ClassVar[dict[str, Any]] = {
        "vision": {"hidden": 32, "intermediate": 64, "layers": 2, "global_layers": 1, "heads": 2},
        "text": {"hidden": 64, "intermediate": 128, "layers": 2, "heads": 4, "kv_heads": 2},
        "cross_attention_layers": [1],
        "tile": TILE,
        "max_positions": 8192,
        "init_range": 0.5,
        "gate": 1.0,
        "seed": 3211,
    }

    def tiny_config(self, tokenizer: PreTrainedTokenizerBase) -> PretrainedConfig:
        spec = self.tiny_spec
        vision = {
            "hidden_size": spec["vision"]["hidden"],
            "intermediate_size": spec["vision"]["intermediate"],
            "num_hidden_layers": spec["vision"]["layers"],
            "num_global_layers": spec["vision"]["global_layers"],
            "attention_heads": spec["vision"]["heads"],
            "intermediate_layers_indices": [0],
            "vision_output_dim": 2 * spec["vision"]["hidden"],  # last + one intermediate layer
            "image_size": spec["tile"],
            "patch_size": 14,
            "max_num_tiles": MAX_TILES,
            "initializer_range": spec["init_range"],
        }
        text = {
            "vocab_size": len(tokenizer),
            "hidden_size": spec["text"]["hidden"],
            "intermediate_size": spec["text"]["intermediate"],
            "num_hidden_layers": spec["text"]["layers"],
            "num_attention_heads": spec["text"]["heads"],
            "num_key_value_heads": spec["text"]["kv_heads"],
            "cross_attention_layers": spec["cross_attention_layers"],
            "max_position_embeddings": spec["max_positions"],
            "bos_token_id": tokenizer.bos_token_id,
            "eos_token_id": tokenizer.eos_token_id,
            "pad_token_id": tokenizer.pad_token_id,
            "initializer_range": spec["init_range"],
        }
        return MllamaConfig(
            vision_config=vision,
            text_config=text,
            image_token_index=tokenizer.convert_tokens_to_ids(IMAGE_TOKEN),
        )

    def finish_tiny_model(self, model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> None:
        """Open the tanh gates (cross-attention, global vision layers, tile embeddings): HF
        initialises them to 0, which would hide the image from the decoder entirely."""
        with torch.no_grad():
            for name, parameter in model.named_parameters():
                if name.rsplit(".", 1)[-1].startswith("gate") or "_gate" in name:
                    parameter.fill_(self.tiny_spec["gate"])

    def save_processor(self, tokenizer: PreTrainedTokenizerBase, directory: Path) -> None:
        """The image processor (``MllamaProcessor`` would also want Llama 3's chat template)."""
        size = self.tiny_spec["tile"]
        MllamaImageProcessorPil(
            size={"height": size, "width": size}, max_image_tiles=MAX_TILES
        ).save_pretrained(directory)

    def load_processor(self, directory: Path) -> Any:
        return AutoImageProcessor.from_pretrained(directory, backend="pil")

    def encode_media(
        self,
        model: PreTrainedModel,
        processor: Any,
        images: np.ndarray | None,
        video: np.ndarray | None,
    ) -> MediaFeatures:
        pixels = rgb_image_bytes(self.name, images, video)
        if pixels is not None:
            one_raw_image(self.name, pixels)
        if pixels is None:
            return MediaFeatures.empty()
        inputs = image_inputs(processor, pixels)
        states = cross_attention_states(model, inputs)
        return MediaFeatures((), None, {"states": states, "num_tiles": inputs["num_tiles"]})

    def step_inputs(self, model: PreTrainedModel, prompt: Prompt, features: MediaFeatures) -> Any:
        """Cross-attention mask rows per call; the image states on the first (prefill) call."""
        image_token = model.config.image_token_index
        count = sum(1 for token in prompt.token_ids if token == image_token)
        images = len(features.extra["num_tiles"]) if features.extra else 0
        if count != images:
            raise InvalidRequest(
                f"the text has {count} {IMAGE_TOKEN} token(s) for {images} image(s): "
                f"put one {IMAGE_TOKEN} where each image belongs"
            )
        if not images:
            return None
        device = features.extra["states"].device
        mask = torch.from_numpy(cross_attention_mask(prompt, image_token, features)).to(device)
        states, total = features.extra["states"], len(prompt)

        def inputs(start: int, length: int) -> dict[str, Any]:
            rows = mask[:, start : start + length] if start < total else mask[:, -1:]
            extra: dict[str, Any] = {"cross_attention_mask": rows}
            if start == 0:
                extra["cross_attention_states"] = states
            return extra

        return inputs


def image_inputs(processor: Any, pixels: np.ndarray) -> dict[str, Any]:
    """Tiles ``[1, n, tiles, 3, S, S]``, aspect-ratio ids and mask, tiles per image."""
    batch = processor(images=[list(pixels)], return_tensors="pt", input_data_format="channels_last")
    return {
        "pixel_values": batch["pixel_values"],
        "aspect_ratio_ids": batch["aspect_ratio_ids"],
        "aspect_ratio_mask": batch["aspect_ratio_mask"],
        "num_tiles": list(batch["num_tiles"][0]),
    }


def cross_attention_states(model: PreTrainedModel, inputs: dict[str, Any]) -> torch.Tensor:
    """What ``MllamaModel.forward`` computes from pixels: projected vision states."""
    device, dtype = model_device_dtype(model)
    vision = model.model.vision_model(
        pixel_values=inputs["pixel_values"].to(device=device, dtype=dtype),
        aspect_ratio_ids=inputs["aspect_ratio_ids"].to(device),
        aspect_ratio_mask=inputs["aspect_ratio_mask"].to(device),
    ).last_hidden_state
    projected = model.model.multi_modal_projector(vision)
    return projected.reshape(-1, projected.shape[-2], model.config.text_config.hidden_size)


def cross_attention_mask(prompt: Prompt, image_token: int, features: MediaFeatures) -> np.ndarray:
    """``[1, T, n_images, max_tiles]``: from each ``<|image|>`` on, attend to that image's tiles."""
    spans = get_cross_attention_token_mask(list(prompt.token_ids), image_token)
    return convert_sparse_cross_attention_mask_to_dense(
        [spans], [features.extra["num_tiles"]], MAX_TILES, len(prompt)
    )
