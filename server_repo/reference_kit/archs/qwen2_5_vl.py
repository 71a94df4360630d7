"""Qwen2.5-VL (``Qwen2_5_VLForConditionalGeneration``), served the way NVIDIA's ``llmapi`` model
serves it on TensorRT-LLM's PyTorch backend.

The prompt is not a fixed server-side template. A request without images takes ``text_input``
as the finished prompt (tokenized as it is). A request with images gets what NVIDIA's backend
builds through TensorRT-LLM's ``async_build_multimodal_prompt`` (NVIDIA/TensorRT-LLM#18381,
its 1.2.1 stand-in in triton-inference-server/tutorials
Popular_Models_Guide/Qwen2.5-VL/trtllm_121_compat.py): one user message whose content is the
placeholder ``<|vision_start|><|image_pad|><|vision_end|>`` once per image, all *before* the
text, joined by ``"\\n"`` (TensorRT-LLM's registry entry for ``qwen2_5_vl``:
``BEFORE_TEXT``, the default separator, ``ContentFormat.STRING``; placeholders already in the
text are counted and not added again, ``tensorrt_llm/inputs/utils.py``
``add_multimodal_placeholders``), rendered with the checkpoint's own chat template and the
generation prompt. Qwen's template then adds its default system message. Each
``<|image_pad|>`` stands for the image's merged patches, as the input processor expands it.

Prefix reuse: TensorRT-LLM's PyTorch backend keys image blocks by a hash of the image content,
so a repeated image reuses its blocks (``llmapi_request.content_key`` gives the kit's cache it).

Shrunk vs Qwen2.5-VL-3B: widths (ViT 1280 -> 32, text 2048 -> 64) and depths (32 / 36 layers
-> 2 / 2); the geometry (patch 14, merge 2, temporal patch 2, window 112 px, pixel budget) is
real.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import torch
from transformers import (
    PretrainedConfig,
    PreTrainedModel,
    PreTrainedTokenizerBase,
    Qwen2_5_VLConfig,
    Qwen2_5_VLForConditionalGeneration,
)

from server_repo.reference_kit.archs.base import MediaFeatures, model_device_dtype
from server_repo.reference_kit.archs.qwen2_vl import (
    Qwen2VLArch,
    image_inputs,
    media_token_ids,
    qwen_text_config,
)
from server_repo.reference_kit.request import InvalidRequest
from server_repo.reference_kit.templates import QWEN2_VL, MediaSlot, Prompt
from server_repo.reference_kit.tiny_tokenizer import SpecialTokens

IMAGE_PLACEHOLDER = "<|vision_start|><|image_pad|><|vision_end|>"
PLACEHOLDER_SEPARATOR = "\n"
VISION_TOKENS = ("<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>")

# Qwen2-VL / Qwen2.5-VL's chat template, as their checkpoints ship it (images and videos in
# list content, the default system message when the first message is not one).
CHAT_TEMPLATE = (
    "{% set image_count = namespace(value=0) %}{% set video_count = namespace(value=0) %}"
    "{% for message in messages %}{% if loop.first and message['role'] != 'system' %}"
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{% endif %}"
    "<|im_start|>{{ message['role'] }}\n{% if message['content'] is string %}"
    "{{ message['content'] }}<|im_end|>\n{% else %}{% for content in message['content'] %}"
    "{% if content['type'] == 'image' or 'image' in content or 'image_url' in content %}"
    "{% set image_count.value = image_count.value + 1 %}"
    "<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif content['type'] == 'video' or 'video' in content %}"
    "{% set video_count.value = video_count.value + 1 %}"
    "<|vision_start|><|video_pad|><|vision_end|>"
    "{% elif 'text' in content %}{{ content['text'] }}{% endif %}{% endfor %}<|im_end|>\n"
    "{% endif %}{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def user_content(text: str, images: int) -> str:
    """The user message NVIDIA's helper builds: one placeholder per image not already in the
    text, all before it, joined by the registry's separator."""
    missing = max(0, images - text.count(IMAGE_PLACEHOLDER))
    if not missing:
        return text
    return PLACEHOLDER_SEPARATOR.join([IMAGE_PLACEHOLDER] * missing + [text])


class Qwen25VLArch(Qwen2VLArch):
    """Qwen2-VL's processor and M-RoPE positions; its own tower, prompts and image input."""

    name: ClassVar[str] = "reference_qwen2_5_vl"
    family: ClassVar[str] = "qwen2_5_vl"
    model_class = Qwen2_5_VLForConditionalGeneration
    template = QWEN2_VL  # unused: prompts come from the chat template (``build_prompt``)
    special_tokens = SpecialTokens(
        bos=None,
        eos="<|im_end|>",
        unk="<unk>",
        pad="<|endoftext|>",
        extra=("<|im_start|>", "<|im_end|>", "<|endoftext|>", *VISION_TOKENS),
        add_bos=False,
    )
    tiny_spec: ClassVar[dict[str, Any]] = {
        "vision": {"hidden": 32, "intermediate": 64, "depth": 2, "heads": 2, "full": [1]},
        "text": {"hidden": 64, "intermediate": 128, "layers": 2, "heads": 4, "kv_heads": 2},
        "mrope_section": [2, 3, 3],
        "max_positions": 32768,
        "init_range": 0.5,
        "seed": 2502,
        "chat_template": CHAT_TEMPLATE,
    }

    def build_tokenizer(self) -> PreTrainedTokenizerBase:
        tokenizer = super().build_tokenizer()
        tokenizer.chat_template = CHAT_TEMPLATE
        return tokenizer

    def tiny_config(self, tokenizer: PreTrainedTokenizerBase) -> PretrainedConfig:
        spec = self.tiny_spec
        text = qwen_text_config(spec, tokenizer)
        vision = {
            "depth": spec["vision"]["depth"],
            "hidden_size": spec["vision"]["hidden"],
            "intermediate_size": spec["vision"]["intermediate"],
            "num_heads": spec["vision"]["heads"],
            "out_hidden_size": spec["text"]["hidden"],
            "fullatt_block_indexes": spec["vision"]["full"],
            "initializer_range": spec["init_range"],
        }
        return Qwen2_5_VLConfig(
            text_config=text, vision_config=vision, **media_token_ids(tokenizer)
        )

    def encode_request(self, model: PreTrainedModel, processor: Any, request: Any) -> MediaFeatures:
        """Features of ``request.pictures`` (decoded RGB ``[H, W, 3]`` arrays, any sizes)."""
        if request.video is not None or request.images is not None:
            raise InvalidRequest(f"{self.name} takes images through image_url only")
        pictures: tuple[np.ndarray, ...] = getattr(request, "pictures", ())
        if not pictures:
            return MediaFeatures.empty()
        device, dtype = model_device_dtype(model)
        grids, per_image = [], []
        for picture in pictures:  # one at a time: sizes may differ
            inputs = image_inputs(processor, picture[None])
            output = model.model.get_image_features(
                pixel_values=inputs["pixel_values"].to(device=device, dtype=dtype),
                image_grid_thw=inputs["image_grid_thw"].to(device),
                return_dict=True,
            )
            per_image.extend(output.pooler_output)
            grids.append(inputs["image_grid_thw"])
        token = model.config.image_token_id
        slots = tuple(MediaSlot(token, int(item.shape[0])) for item in per_image)
        grid = torch.cat(grids, dim=0)
        return MediaFeatures(slots, torch.cat(per_image, dim=0), {"image_grid_thw": grid})

    def build_prompt(
        self, tokenizer: PreTrainedTokenizerBase, text: str, slots: tuple[MediaSlot, ...]
    ) -> Prompt:
        """``text`` as the finished prompt, or, with images, the chat-templated user message
        with each ``<|image_pad|>`` expanded to its image's feature count."""
        if not slots:
            ids = list(tokenizer(text, add_special_tokens=True)["input_ids"])
            return Prompt(tuple(ids), (False,) * len(ids))
        message = {"role": "user", "content": user_content(text, len(slots))}
        rendered = tokenizer.apply_chat_template(
            [message], tokenize=False, add_generation_prompt=True
        )
        ids = list(tokenizer(rendered, add_special_tokens=False)["input_ids"])
        pad = slots[0].token_id
        if ids.count(pad) != len(slots):
            raise InvalidRequest(
                f"Image placeholder count ({ids.count(pad)}) does not match the number of "
                f"images ({len(slots)})"
            )
        expanded: list[int] = []
        mask: list[bool] = []
        remaining = iter(slots)
        for token in ids:
            if token == pad:
                slot = next(remaining)
                expanded.extend([pad] * slot.length)
                mask.extend([True] * slot.length)
            else:
                expanded.append(token)
                mask.append(False)
        return Prompt(tuple(expanded), tuple(mask))
