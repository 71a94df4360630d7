"""LLaVA-NeXT / v1.6 (``LlavaNextForConditionalGeneration``: CLIP ViT-L/14-336 + Mistral).

NVIDIA's Triton preprocessing has no LLaVA-NeXT path; its multimodal runner takes the HF
processor's anyres patches (``[1 + tiles, 3, 336, 336]``: the whole image squashed to 336 px,
then the 336 px tiles of the best-fitting grid pinpoint) and unpads the tile features with the
original image size. Behind the ensemble contract that is ``image_input`` FP16
``[1, patches, 3, 336, 336]`` plus ``image_sizes_input`` INT64 ``[1, n_images, 2]``
(height, width; the input name newer ensembles declare for Pixtral). Several images send their
patches one after another; each image's patch count follows from its size.

Features per image: 576 for the base view, then the unpadded tile grid with one newline feature
per row (at most 576 + 48 x 49 = 2928). Template: NVIDIA's runner for the Mistral checkpoint,
``[INST] `` + features + ``\\n{q} [/INST]``.

Shrunk vs llava-v1.6-mistral-7b: widths (CLIP 1024 -> 32, Mistral 4096 -> 64) and depths
(24 / 32 layers -> 2); the geometry (336 px, patch 14, the five grid pinpoints) is real.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch
from transformers import (
    LlavaNextConfig,
    LlavaNextForConditionalGeneration,
    LlavaNextProcessor,
    MistralConfig,
    PretrainedConfig,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)
from transformers.models.llava_next.image_processing_pil_llava_next import (
    LlavaNextImageProcessorPil,
)
from transformers.models.llava_next.modeling_llava_next import image_size_to_num_patches

from server_repo.reference_kit.archs.base import (
    Arch,
    MediaFeatures,
    clip_vision_config,
    decoder_settings,
    expect_array,
    image_array,
    model_device_dtype,
)
from server_repo.reference_kit.request import GenerationRequest, InvalidRequest
from server_repo.reference_kit.templates import LLAVA_NEXT, MediaSlot
from server_repo.reference_kit.tiny_tokenizer import SpecialTokens

TILE = 336
# (height, width) canvases of the llava-hf/llava-v1.6-* checkpoints.
GRID_PINPOINTS = [[336, 672], [672, 336], [672, 672], [1008, 336], [336, 1008]]
CLIP_MEAN = [0.48145466, 0.4578275, 0.40821073]
CLIP_STD = [0.26862954, 0.26130258, 0.27577711]


class LlavaNextArch(Arch):
    name: ClassVar[str] = "reference_llava_next"
    family: ClassVar[str] = "llava_next"
    model_class = LlavaNextForConditionalGeneration
    template = LLAVA_NEXT
    special_tokens = SpecialTokens(
        bos="<s>", eos="</s>", unk="<unk>", pad="<pad>", extra=("<image>",), add_bos=True
    )
    tiny_spec: ClassVar[dict[str, Any]] = {
        "vision": {"hidden": 32, "intermediate": 64, "layers": 2, "heads": 2},
        "text": {"hidden": 64, "intermediate": 128, "layers": 2, "heads": 4, "kv_heads": 2},
        "max_positions": 8192,
        "pinpoints": GRID_PINPOINTS,
        "init_range": 0.5,
        "seed": 1606,
    }

    def tiny_config(self, tokenizer: PreTrainedTokenizerBase) -> PretrainedConfig:
        spec = self.tiny_spec
        vision = clip_vision_config(spec, TILE)
        text = MistralConfig(**decoder_settings(spec, tokenizer, sliding_window=None))
        return LlavaNextConfig(
            vision_config=vision,
            text_config=text,
            image_token_index=tokenizer.convert_tokens_to_ids("<image>"),
            image_grid_pinpoints=spec["pinpoints"],
            vision_feature_layer=-2,
            vision_feature_select_strategy="default",
            image_seq_length=(TILE // 14) ** 2,
        )

    def save_processor(self, tokenizer: PreTrainedTokenizerBase, directory: Path) -> None:
        image_processor = LlavaNextImageProcessorPil(
            size={"shortest_edge": TILE},
            crop_size={"height": TILE, "width": TILE},
            image_grid_pinpoints=self.tiny_spec["pinpoints"],
            image_mean=CLIP_MEAN,
            image_std=CLIP_STD,
        )
        processor = LlavaNextProcessor(
            image_processor=image_processor,
            tokenizer=tokenizer,
            patch_size=14,
            vision_feature_select_strategy="default",
        )
        processor.save_pretrained(directory)

    def encode_request(
        self, model: PreTrainedModel, processor: Any, request: GenerationRequest
    ) -> MediaFeatures:
        pixels = image_array(
            self.name, request.images, request.video, "image_input", (np.float16, np.float32)
        )
        if pixels is None:
            return MediaFeatures.empty()
        if pixels.shape[1:] != (3, TILE, TILE):
            raise InvalidRequest(
                f"image_input must be anyres patches [n, 3, {TILE}, {TILE}] per request, "
                f"got {list(pixels.shape)}"
            )
        sizes = self._image_sizes(model, request.image_sizes, len(pixels))
        device, dtype = model_device_dtype(model)
        tensor = torch.from_numpy(np.ascontiguousarray(pixels)).to(device=device, dtype=dtype)
        output = model.model.get_image_features(
            pixel_values=tensor, image_sizes=torch.from_numpy(sizes), return_dict=True
        )
        per_image = list(output.pooler_output)
        image_token = model.config.image_token_index
        slots = tuple(MediaSlot(image_token, int(item.shape[0])) for item in per_image)
        return MediaFeatures(slots, torch.cat(per_image, dim=0))

    def _image_sizes(self, model: PreTrainedModel, sizes: Any, patches: int) -> np.ndarray:
        """``image_sizes_input`` as ``int64 [n, 2]``, checked against the patches sent."""
        if sizes is None:
            raise InvalidRequest(
                "image_sizes_input (height, width per image) must come with image_input: "
                "LLaVA-NeXT unpads the tile features with the original image size"
            )
        sizes = expect_array(np.asarray(sizes), "image_sizes_input", 2, (np.int64, np.int32))
        if sizes.shape[1] != 2 or np.any(sizes < 1):
            raise InvalidRequest("image_sizes_input must be [n, 2] positive (height, width)")
        pinpoints = model.config.image_grid_pinpoints
        expected = sum(image_size_to_num_patches(list(map(int, s)), pinpoints, TILE) for s in sizes)
        if expected != patches:
            raise InvalidRequest(
                f"image_input has {patches} patches but image_sizes_input "
                f"{sizes.tolist()} needs {expected} (the whole image plus its tiles)"
            )
        return sizes.astype(np.int64)


def anyres_patch_count(height: int, width: int) -> int:
    """Patches one ``height`` x ``width`` image becomes: the base view plus its tiles."""
    return image_size_to_num_patches([height, width], GRID_PINPOINTS, TILE)
