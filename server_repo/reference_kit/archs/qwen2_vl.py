"""Qwen2-VL (``Qwen2VLForConditionalGeneration``: a ViT with 2D RoPE + Qwen2 with M-RoPE).

Like NVIDIA's preprocessing, the model takes raw pixels (``image_bytes_input`` uint8
``[1, n, H, W, 3]``) and runs the checkpoint's image processor itself (PIL backend): "smart
resize" to multiples of 28 within the pixel budget, 14 px patches, two frames per temporal
patch, then the ViT merges 2 x 2 patches into one feature. NVIDIA's client sends 504 x 504
images: 36 x 36 patches -> 324 features, the real geometry kept here. Each image sits between
``<|vision_start|>`` and ``<|vision_end|>`` inside Qwen2-VL's chat template, which the server
applies (system line, user turn, assistant header).

Positions are M-RoPE: three position ids (time, height, width) per token, computed from the
prompt and the image grids (``get_rope_index``); generated tokens continue from the largest
position. They are always passed explicitly: the model's own fallback keeps ``rope_deltas`` as
state on the module, which concurrent requests would trample. TensorRT-LLM's Qwen2-VL path has
no ``prompt_table_extra_id``, so image blocks are never reused (text blocks before them are).

Shrunk vs Qwen2-VL-7B: widths (ViT 1280 -> 32, Qwen2 3584 -> 64) and depths (32 / 28 layers
-> 1-2); the geometry (patch 14, merge 2, temporal patch 2, pixel budget) is real.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch
from transformers import (
    AutoImageProcessor,
    PretrainedConfig,
    PreTrainedModel,
    PreTrainedTokenizerBase,
    Qwen2VLConfig,
    Qwen2VLForConditionalGeneration,
)
from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

from server_repo.reference_kit.archs.base import (
    Arch,
    MediaFeatures,
    model_device_dtype,
    one_raw_image,
    rgb_image_bytes,
)
from server_repo.reference_kit.templates import QWEN2_VL, MediaSlot, Prompt
from server_repo.reference_kit.tiny_tokenizer import SpecialTokens

VISION_TOKENS = ("<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>")


class Qwen2VLArch(Arch):
    name: ClassVar[str] = "reference_qwen2_vl"
    family: ClassVar[str] = "qwen2_vl"
    model_class = Qwen2VLForConditionalGeneration
    template = QWEN2_VL
    special_tokens = SpecialTokens(
        bos=None,
        eos="<|im_end|>",
        unk="<unk>",
        pad="<|endoftext|>",
        extra=("<|im_start|>", "<|im_end|>", "<|endoftext|>", *VISION_TOKENS),
        add_bos=False,
    )
    tiny_spec: ClassVar[dict[str, Any]] = {
        "vision": {"embed": 32, "depth": 1, "heads": 2, "mlp_ratio": 2},
        "text": {"hidden": 64, "intermediate": 128, "layers": 2, "heads": 4, "kv_heads": 2},
        "mrope_section": [2, 3, 3],  # halves of the 16-wide heads: time, height, width
        "max_positions": 32768,
        "init_range": 0.5,
        "seed": 2409,
    }

    def tiny_config(self, tokenizer: PreTrainedTokenizerBase) -> PretrainedConfig:
        spec = self.tiny_spec
        text = qwen_text_config(spec, tokenizer)
        vision = {
            "depth": spec["vision"]["depth"],
            "embed_dim": spec["vision"]["embed"],
            "hidden_size": spec["text"]["hidden"],
            "num_heads": spec["vision"]["heads"],
            "mlp_ratio": spec["vision"]["mlp_ratio"],
            "initializer_range": spec["init_range"],
        }
        return Qwen2VLConfig(text_config=text, vision_config=vision, **media_token_ids(tokenizer))

    def save_processor(self, tokenizer: PreTrainedTokenizerBase, directory: Path) -> None:
        """The image processor only: ``Qwen2VLProcessor`` needs torchvision for its video part."""
        Qwen2VLImageProcessorPil().save_pretrained(directory)

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
        device, dtype = model_device_dtype(model)
        output = model.model.get_image_features(
            pixel_values=inputs["pixel_values"].to(device=device, dtype=dtype),
            image_grid_thw=inputs["image_grid_thw"].to(device),
            return_dict=True,
        )
        per_image = list(output.pooler_output)
        token = model.config.image_token_id
        slots = tuple(MediaSlot(token, int(item.shape[0])) for item in per_image)
        grid = inputs["image_grid_thw"]
        return MediaFeatures(slots, torch.cat(per_image, dim=0), {"image_grid_thw": grid})

    def step_inputs(self, model: PreTrainedModel, prompt: Prompt, features: MediaFeatures) -> Any:
        """M-RoPE ``position_ids`` ``[3, 1, length]`` for each call."""
        device = next(model.parameters()).device
        positions, delta = rope_positions(model, prompt, features.extra.get("image_grid_thw"))
        positions, total = positions.to(device), len(prompt)

        def inputs(start: int, length: int) -> dict[str, Any]:
            if start + length <= total:
                return {"position_ids": positions[:, :, start : start + length]}
            text = torch.arange(start, start + length, device=device) + delta
            return {"position_ids": text.view(1, 1, -1).expand(3, 1, -1)}

        return inputs


def qwen_text_config(spec: dict[str, Any], tokenizer: PreTrainedTokenizerBase) -> dict[str, Any]:
    """The Qwen2 decoder of a tiny Qwen2-VL or Qwen2.5-VL (M-RoPE over time, height, width)."""
    return {
        "vocab_size": len(tokenizer),
        "hidden_size": spec["text"]["hidden"],
        "intermediate_size": spec["text"]["intermediate"],
        "num_hidden_layers": spec["text"]["layers"],
        "num_attention_heads": spec["text"]["heads"],
        "num_key_value_heads": spec["text"]["kv_heads"],
        "max_position_embeddings": spec["max_positions"],
        "rope_parameters": {
            "rope_type": "default",
            "rope_theta": 1_000_000.0,
            "mrope_section": spec["mrope_section"],
        },
        "bos_token_id": tokenizer.pad_token_id,
        "eos_token_id": tokenizer.eos_token_id,
        "pad_token_id": tokenizer.pad_token_id,
        "initializer_range": spec["init_range"],
    }


def media_token_ids(tokenizer: PreTrainedTokenizerBase) -> dict[str, int]:
    """The ids of the image, video and vision-span tokens, as the Qwen-VL configs name them."""
    ids = tokenizer.convert_tokens_to_ids
    return {
        "image_token_id": ids("<|image_pad|>"),
        "video_token_id": ids("<|video_pad|>"),
        "vision_start_token_id": ids("<|vision_start|>"),
        "vision_end_token_id": ids("<|vision_end|>"),
    }


def image_inputs(processor: Any, pixels: np.ndarray) -> dict[str, torch.Tensor]:
    """The image processor's ``pixel_values`` and ``image_grid_thw`` for ``[n, H, W, 3]``."""
    batch = processor(images=list(pixels), return_tensors="pt", input_data_format="channels_last")
    return {"pixel_values": batch["pixel_values"], "image_grid_thw": batch["image_grid_thw"]}


def rope_positions(
    model: PreTrainedModel, prompt: Prompt, grid: torch.Tensor | None
) -> tuple[torch.Tensor, int]:
    """M-RoPE positions of the prompt ``[3, 1, T]`` and the offset generated tokens continue
    with (their index plus it); plain positions and 0 when there is no image."""
    ids = torch.tensor([prompt.token_ids])
    if grid is None:
        return torch.arange(len(prompt)).view(1, 1, -1).expand(3, 1, -1), 0
    token_types = (ids == model.config.image_token_id).int()
    positions, deltas = model.model.get_rope_index(ids, token_types, image_grid_thw=grid)
    return positions, int(deltas.reshape(-1)[0])
