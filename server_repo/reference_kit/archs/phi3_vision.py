"""Phi-3-vision stand-in: a CLIP tower at 336 px (144 features a crop) and a Llama, with the
runner's HD feature transform.

Phi-3-vision is remote code, not a transformers class, and NVIDIA ships no Triton
preprocessing for it. This model stands for the deployment docs/families.md asks for: fp16
``image_input`` ``[1, 17, 3, 336, 336]`` (the global view, the HD crops row by row, zero crops
to 17) with ``image_sizes_input`` (the HD image's height and width), the features placed at
``<|image_1|>``. The features follow NVIDIA's runner (tensorrt_llm/runtime/
multimodal_model_runner.py @033f406702a726877a9df9eb4931f0661cf0a39a, ``PhiMMUtils``
``hd_feature_transform``): the crops' 12 x 12 grids laid out as one (rows x 12, cols x 12) grid
with a newline vector after each row, then a separator vector, then the global view's grid with
its newlines: ``(crops + 1) x 144 + 1 + (rows + 1) x 12`` features. The patch size is 28 so a
crop gives the 12 x 12 grid directly (Phi-3-vision pools 24 x 24 CLIP patches 2 x 2); the two
learned vectors are the embeddings of two reserved tokens here. The text is tokenized as the
processor does: the chunks around ``<|image_1|>``, one BOS in front.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch
from transformers import (
    CLIPImageProcessorPil,
    LlamaConfig,
    LlavaConfig,
    PretrainedConfig,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)

from server_repo.reference_kit.archs.base import (
    MediaFeatures,
    clip_vision_config,
    decoder_settings,
    expect_array,
    image_array,
    model_device_dtype,
)
from server_repo.reference_kit.archs.llava import LlavaArch
from server_repo.reference_kit.archs.vila import SLOT
from server_repo.reference_kit.request import GenerationRequest, InvalidRequest
from server_repo.reference_kit.templates import MediaSlot, Prompt
from server_repo.reference_kit.tiny_tokenizer import SpecialTokens

CROP, GRID, STACK = 336, 12, 17
IMAGE = "<|image_1|>"
SUB_GN, GLB_GN = "<|sub_gn|>", "<|glb_gn|>"  # stand-ins for the learned newline/separator
TURNS = ("<|system|>", "<|user|>", "<|assistant|>", "<|end|>")


def hd_feature_transform(
    crops: torch.Tensor, rows: int, cols: int, sub_gn: torch.Tensor, glb_gn: torch.Tensor
) -> torch.Tensor:
    """[1 + rows * cols, 144, d] crop features -> the runner's HD sequence, [N, d]."""
    dim = crops.shape[-1]

    def with_newlines(grid: torch.Tensor) -> torch.Tensor:
        height = grid.shape[0]
        return torch.cat([grid, sub_gn.expand(height, 1, dim)], dim=1).flatten(0, 1)

    glb = with_newlines(crops[0].reshape(GRID, GRID, dim))
    sub = crops[1 : 1 + rows * cols].reshape(rows, cols, GRID, GRID, dim)
    sub = sub.permute(0, 2, 1, 3, 4).reshape(rows * GRID, cols * GRID, dim)
    return torch.cat([with_newlines(sub), glb_gn.view(1, dim), glb])


class Phi3VisionArch(LlavaArch):
    name: ClassVar[str] = "reference_phi3_vision"
    family: ClassVar[str] = "phi3_vision"
    special_tokens = SpecialTokens(
        bos="<s>",
        eos="<|endoftext|>",
        unk="<unk>",
        pad="<pad>",
        extra=(SLOT, SUB_GN, GLB_GN, *TURNS),
        add_bos=True,
    )
    tiny_spec: ClassVar[dict[str, Any]] = {
        "vision": {"hidden": 32, "intermediate": 64, "layers": 2, "heads": 2, "image": CROP},
        "text": {"hidden": 64, "intermediate": 128, "layers": 2, "heads": 4, "kv_heads": 2},
        "max_positions": 8192,
        "init_range": 0.5,
        "seed": 3030,
    }

    def tiny_config(self, tokenizer: PreTrainedTokenizerBase) -> PretrainedConfig:
        spec = self.tiny_spec
        vision = clip_vision_config(spec, CROP, patch_size=CROP // GRID)
        return LlavaConfig(
            vision_config=vision,
            text_config=LlamaConfig(**decoder_settings(spec, tokenizer)),
            image_token_index=tokenizer.convert_tokens_to_ids(SLOT),
            image_seq_length=GRID * GRID,
            vision_feature_layer=-2,
            vision_feature_select_strategy="default",
            pad_token_id=tokenizer.pad_token_id,
            sub_gn_token_id=tokenizer.convert_tokens_to_ids(SUB_GN),
            glb_gn_token_id=tokenizer.convert_tokens_to_ids(GLB_GN),
        )

    def save_processor(self, tokenizer: PreTrainedTokenizerBase, directory: Path) -> None:
        CLIPImageProcessorPil(size={"height": CROP, "width": CROP}).save_pretrained(directory)
        tokenizer.save_pretrained(directory)

    def encode_request(
        self, model: PreTrainedModel, processor: Any, request: GenerationRequest
    ) -> MediaFeatures:
        name = "image_input"
        pixels = image_array(self.name, request.images, request.video, name, (np.float16,))
        if pixels is None:
            return MediaFeatures.empty()
        if pixels.shape != (STACK, 3, CROP, CROP):
            raise InvalidRequest(f"{name} must be [{STACK}, 3, {CROP}, {CROP}] per request")
        rows, cols = self._grid(request.image_sizes)
        device, dtype = model_device_dtype(model)
        used = torch.from_numpy(np.ascontiguousarray(pixels[: 1 + rows * cols]))
        output = model.model.get_image_features(
            pixel_values=used.to(device=device, dtype=dtype), return_dict=True
        )
        crops = torch.stack(list(output.pooler_output))  # [1 + rows * cols, 144, d]
        config = model.config
        ids = torch.tensor([config.sub_gn_token_id, config.glb_gn_token_id], device=device)
        sub_gn, glb_gn = model.get_input_embeddings()(ids)
        features = hd_feature_transform(crops, rows, cols, sub_gn, glb_gn)
        slot = MediaSlot(model.config.image_token_index, int(features.shape[0]))
        return MediaFeatures((slot,), features)

    def _grid(self, sizes: Any) -> tuple[int, int]:
        if sizes is None:
            raise InvalidRequest("image_sizes_input (the HD image's height, width) is required")
        sizes = expect_array(np.asarray(sizes), "image_sizes_input", 2, (np.int64, np.int32))
        height, width = (int(v) for v in sizes[0])
        rows, cols = height // CROP, width // CROP
        if sizes.shape != (1, 2) or height % CROP or width % CROP or not 1 <= rows * cols <= 16:
            raise InvalidRequest(
                f"image_sizes_input must be one HD size, multiples of {CROP} with at most 16 "
                f"crops; got {sizes.tolist()}"
            )
        return rows, cols

    def build_prompt(
        self, tokenizer: PreTrainedTokenizerBase, text: str, slots: tuple[MediaSlot, ...]
    ) -> Prompt:
        parts = text.split(IMAGE)
        if len(parts) - 1 != len(slots) or len(slots) > 1:
            raise InvalidRequest(
                f"{self.name}: {len(parts) - 1} {IMAGE} markers for {len(slots)} images "
                "(one of each, at most)"
            )
        bos = tokenizer.bos_token_id
        chunks = [list(tokenizer(part, add_special_tokens=False)["input_ids"]) for part in parts]
        ids, mask = [bos, *chunks[0]], [False] * (1 + len(chunks[0]))
        for slot, chunk in zip(slots, chunks[1:], strict=True):
            ids += [slot.token_id] * slot.length + chunk
            mask += [True] * slot.length + [False] * len(chunk)
        return Prompt(tuple(ids), tuple(mask))
