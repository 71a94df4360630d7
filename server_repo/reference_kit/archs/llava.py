"""LLaVA-1.5 (``LlavaForConditionalGeneration``: CLIP ViT-L/14-336 + Llama) for the reference model.

The tiny version keeps the real geometry where the contract depends on it: CLIP at 336 px with
patch 14 gives 24 x 24 = 576 features per image (CLS dropped, second-to-last layer, as 1.5 does);
hidden sizes and depth are tiny. Images arrive already preprocessed (``image_input`` FP16
``[n, 3, 336, 336]``, CLIP resize/crop/normalise done by the client), so there is no image
processor on the serving path; one is saved for the gateway and for ``AutoProcessor``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch
from transformers import (
    CLIPImageProcessorPil,
    LlavaForConditionalGeneration,
    LlavaProcessor,
    PretrainedConfig,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)

from server_repo.reference_kit.archs.base import (
    Arch,
    MediaFeatures,
    image_array,
    model_device_dtype,
    tiny_llava_config,
)
from server_repo.reference_kit.request import InvalidRequest
from server_repo.reference_kit.templates import LLAVA, MediaSlot
from server_repo.reference_kit.tiny_tokenizer import SpecialTokens


class LlavaArch(Arch):
    name: ClassVar[str] = "reference_llava"
    family: ClassVar[str] = "llava"
    model_class = LlavaForConditionalGeneration
    template = LLAVA
    special_tokens = SpecialTokens(
        bos="<s>", eos="</s>", unk="<unk>", pad="<pad>", extra=("<image>",), add_bos=True
    )
    tiny_spec: ClassVar[dict[str, Any]] = {
        "vision": {"hidden": 32, "intermediate": 64, "layers": 2, "heads": 2, "image": 336},
        "text": {"hidden": 64, "intermediate": 128, "layers": 2, "heads": 4, "kv_heads": 2},
        "max_positions": 4096,
        "init_range": 0.5,
        "seed": 1234,
    }

    def tiny_config(self, tokenizer: PreTrainedTokenizerBase) -> PretrainedConfig:
        return tiny_llava_config(self.tiny_spec, tokenizer, "<image>", 576)

    def save_processor(self, tokenizer: PreTrainedTokenizerBase, directory: Path) -> None:
        image_processor = CLIPImageProcessorPil(
            size={"shortest_edge": 336}, crop_size={"height": 336, "width": 336}
        )
        processor = LlavaProcessor(
            image_processor=image_processor,
            tokenizer=tokenizer,
            patch_size=14,
            vision_feature_select_strategy="default",
            num_additional_image_tokens=1,
        )
        processor.save_pretrained(directory)

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
        size = model.config.vision_config.image_size
        if pixels.shape[1:] != (3, size, size):
            raise InvalidRequest(
                f"image_input must be [n, 3, {size}, {size}] per request, got {list(pixels.shape)}"
            )
        device, dtype = model_device_dtype(model)
        tensor = torch.from_numpy(np.ascontiguousarray(pixels)).to(device=device, dtype=dtype)
        features = model.model.get_image_features(pixel_values=tensor, return_dict=True)
        per_image = list(features.pooler_output)
        image_token = model.config.image_token_index
        slots = tuple(MediaSlot(image_token, int(item.shape[0])) for item in per_image)
        return MediaFeatures(slots, torch.cat(per_image, dim=0))
