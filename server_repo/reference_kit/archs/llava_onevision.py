"""LLaVA-OneVision (``LlavaOnevisionForConditionalGeneration``: SigLIP + Qwen2) for the reference.

Like NVIDIA's ``multimodal_encoders``, the model preprocesses raw pixels itself:

- images (``image_bytes_input`` uint8 ``[n, H, W, 3]``) go through the checkpoint's image
  processor, PIL backend (transformers' default one needs torchvision, absent here). One image
  is tiled "anyres" over ``image_grid_pinpoints`` (base 384 px view + tiles, unpadded, a newline
  feature per row); several images get the base view only plus one newline each (729 + 1), as HF
  does for multi-image prompts;
- video (``video_bytes_input`` uint8 ``[frames, H, W, 3]``) frames are resized to 384 x 384
  (bicubic) and normalised with numpy/PIL, because HF's video processor requires torchvision;
  each frame's 27 x 27 features are pooled to 14 x 14 = 196, plus one newline per video.

The tiny version keeps SigLIP's 384 px / patch 14 geometry (729 features per tile) but allows at
most 2 x 2 tiles so CPU tests stay fast.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch
from PIL import Image
from transformers import (
    AutoImageProcessor,
    LlavaOnevisionConfig,
    LlavaOnevisionForConditionalGeneration,
    PretrainedConfig,
    PreTrainedModel,
    PreTrainedTokenizerBase,
    Qwen2Config,
    SiglipVisionConfig,
)
from transformers.image_processing_utils import select_best_resolution
from transformers.models.llava_onevision.image_processing_pil_llava_onevision import (
    LlavaOnevisionImageProcessorPil,
)

from server_repo.reference_kit.archs.base import (
    Arch,
    MediaFeatures,
    decoder_settings,
    expect_array,
    model_device_dtype,
    one_raw_image,
)
from server_repo.reference_kit.request import InvalidRequest
from server_repo.reference_kit.templates import LLAVA_ONEVISION, MediaSlot
from server_repo.reference_kit.tiny_tokenizer import SpecialTokens

TINY_PINPOINTS = [[384, 384], [384, 768], [768, 384], [768, 768]]
SIGLIP_MEAN_STD = [0.5, 0.5, 0.5]


class LlavaOnevisionArch(Arch):
    name: ClassVar[str] = "reference_llava_onevision"
    family: ClassVar[str] = "llava_onevision"
    model_class = LlavaOnevisionForConditionalGeneration
    template = LLAVA_ONEVISION
    special_tokens = SpecialTokens(
        bos=None,
        eos="<|im_end|>",
        unk="<unk>",
        pad="<|endoftext|>",
        extra=("<|im_start|>", "<|im_end|>", "<|endoftext|>", "<image>", "<video>"),
        add_bos=False,
    )
    tiny_spec: ClassVar[dict[str, Any]] = {
        "vision": {"hidden": 32, "intermediate": 64, "layers": 1, "heads": 2, "image": 384},
        "text": {"hidden": 64, "intermediate": 128, "layers": 2, "heads": 4, "kv_heads": 2},
        "max_positions": 16384,
        "pinpoints": TINY_PINPOINTS,
        "init_range": 0.5,
        "seed": 4321,
    }

    def tiny_config(self, tokenizer: PreTrainedTokenizerBase) -> PretrainedConfig:
        spec = self.tiny_spec
        vision = SiglipVisionConfig(
            hidden_size=spec["vision"]["hidden"],
            intermediate_size=spec["vision"]["intermediate"],
            num_hidden_layers=spec["vision"]["layers"],
            num_attention_heads=spec["vision"]["heads"],
            image_size=spec["vision"]["image"],
            patch_size=14,
            vision_use_head=False,
        )
        text = Qwen2Config(**decoder_settings(spec, tokenizer, bos_token_id=tokenizer.eos_token_id))
        return LlavaOnevisionConfig(
            vision_config=vision,
            text_config=text,
            image_token_index=tokenizer.convert_tokens_to_ids("<image>"),
            video_token_index=tokenizer.convert_tokens_to_ids("<video>"),
            vision_feature_layer=-1,
            vision_feature_select_strategy="full",
            image_grid_pinpoints=spec["pinpoints"],
            vision_aspect_ratio="anyres_max_9",
        )

    def save_processor(self, tokenizer: PreTrainedTokenizerBase, directory: Path) -> None:
        """Write ``processor_config.json`` by hand: transformers cannot even construct a
        ``LlavaOnevisionProcessor`` without torchvision (its video processor needs it), but the
        file is what ``AutoProcessor`` reads where torchvision is installed."""
        image_processor = LlavaOnevisionImageProcessorPil(
            image_grid_pinpoints=self.tiny_spec["pinpoints"],
            image_mean=SIGLIP_MEAN_STD,
            image_std=SIGLIP_MEAN_STD,
        )
        size = self.tiny_spec["vision"]["image"]
        video_processor = {
            "video_processor_type": "LlavaOnevisionVideoProcessor",
            "size": {"height": size, "width": size},
            "resample": 3,
            "do_resize": True,
            "do_rescale": True,
            "rescale_factor": 1 / 255,
            "do_normalize": True,
            "do_convert_rgb": True,
            "do_sample_frames": False,
            "image_mean": SIGLIP_MEAN_STD,
            "image_std": SIGLIP_MEAN_STD,
        }
        config = {
            "processor_class": "LlavaOnevisionProcessor",
            "image_processor": json.loads(image_processor.to_json_string()),
            "video_processor": video_processor,
            "num_image_tokens": (size // 14) ** 2,
            "vision_feature_select_strategy": "full",
            "vision_aspect_ratio": "anyres_max_9",
            "image_token": "<image>",
            "video_token": "<video>",
        }
        text = json.dumps(config, indent=2, sort_keys=True) + "\n"
        (directory / "processor_config.json").write_text(text)

    def load_processor(self, directory: Path) -> Any:
        return AutoImageProcessor.from_pretrained(directory, backend="pil")

    def encode_media(
        self,
        model: PreTrainedModel,
        processor: Any,
        images: np.ndarray | None,
        video: np.ndarray | None,
    ) -> MediaFeatures:
        slots: list[MediaSlot] = []
        embeds: list[torch.Tensor] = []
        if images is not None:
            pixels = expect_array(images, "image_bytes_input", 4, (np.uint8,))
            _expect_rgb(pixels, "image_bytes_input")
            one_raw_image(self.name, pixels)
            for item in image_features(model, processor, pixels):
                slots.append(MediaSlot(model.config.image_token_index, int(item.shape[0])))
                embeds.append(item)
        if video is not None:
            frames = expect_array(video, "video_bytes_input", 4, (np.uint8,))
            _expect_rgb(frames, "video_bytes_input")
            item = video_features(model, processor, frames)
            slots.append(MediaSlot(model.config.video_token_index, int(item.shape[0])))
            embeds.append(item)
        if not slots:
            return MediaFeatures.empty()
        return MediaFeatures(tuple(slots), torch.cat(embeds, dim=0))


def _expect_rgb(array: np.ndarray, name: str) -> None:
    if array.shape[-1] != 3:
        raise InvalidRequest(f"{name} must be RGB [n, H, W, 3], got {list(array.shape)}")


def image_inputs(processor: Any, pixels: np.ndarray) -> dict[str, torch.Tensor]:
    """The image processor's tensors for ``pixels`` [n, H, W, 3] as one multi-image sample."""
    batch = processor(images=[list(pixels)], return_tensors="pt", input_data_format="channels_last")
    return {key: batch[key] for key in ("pixel_values", "image_sizes", "batch_num_images")}


def image_features(
    model: PreTrainedModel, processor: Any, pixels: np.ndarray
) -> list[torch.Tensor]:
    """Projected, packed features per image (anyres for one image, base view for several)."""
    device, dtype = model_device_dtype(model)
    inputs = image_inputs(processor, pixels)
    output = model.model.get_image_features(
        pixel_values=inputs["pixel_values"].to(device=device, dtype=dtype),
        image_sizes=inputs["image_sizes"].to(device),
        batch_num_images=inputs["batch_num_images"],
        return_dict=True,
    )
    return list(output.pooler_output)


def video_pixels(processor: Any, frames: np.ndarray, size: int) -> torch.Tensor:
    """Resize each frame to ``size`` x ``size`` (bicubic) and normalise: ``[1, F, 3, S, S]``."""
    mean = np.asarray(processor.image_mean, dtype=np.float32).reshape(1, 1, 3)
    std = np.asarray(processor.image_std, dtype=np.float32).reshape(1, 1, 3)
    out = []
    for frame in frames:
        resized = Image.fromarray(frame).resize((size, size), Image.Resampling.BICUBIC)
        array = (np.asarray(resized, dtype=np.float32) / 255.0 - mean) / std
        out.append(array.transpose(2, 0, 1))
    return torch.from_numpy(np.stack(out))[None]


def video_features(model: PreTrainedModel, processor: Any, frames: np.ndarray) -> torch.Tensor:
    """Pooled frame features plus one newline feature: ``[F * 196 + 1, hidden]`` at 384 px."""
    device, dtype = model_device_dtype(model)
    pixels = video_pixels(processor, frames, model.config.vision_config.image_size)
    # Positional: the keyword is ``pixel_values_videos`` in newer transformers, ``pixel_values``
    # in older 5.x releases.
    output = model.model.get_video_features(pixels.to(device=device, dtype=dtype), return_dict=True)
    features = output.pooler_output[0]
    side = model.config.vision_config.image_size // model.config.vision_config.patch_size
    if features.shape[0] == len(frames) * math.ceil(side / 2) ** 2:
        # Older 5.x releases append the newline in forward(), not in get_video_features().
        newline = model.model.image_newline[None].to(features)
        features = torch.cat([features, newline], dim=0)
    return features


def image_feature_count(
    height: int,
    width: int,
    n_images: int = 1,
    pinpoints: list[list[int]] | None = None,
    tile: int = 384,
    patch: int = 14,
    max_tiles: int = 9,
) -> int:
    """Features HF LLaVA-OneVision gives one ``height`` x ``width`` image (pure arithmetic).

    Several images in one request: the base view only, ``(tile // patch) ** 2 + 1``. One image:
    base view + the unpadded anyres grid (``anyres_max_9`` downscaling) + one newline per row.
    Defaults are the tiny model's; pass the checkpoint's pinpoints for a real one.
    """
    side = tile // patch
    base = side * side
    if n_images > 1:
        return base + 1
    best_h, best_w = select_best_resolution((height, width), pinpoints or TINY_PINPOINTS)
    rows, cols = side * (best_h // tile), side * (best_w // tile)
    if width / height > cols / rows:
        padding = (rows - int(round(height * (cols / width), 7))) // 2
        rows -= 2 * padding
    else:
        padding = (cols - int(round(width * (rows / height), 7))) // 2
        cols -= 2 * padding
    ratio = math.sqrt(rows * cols / (max_tiles * side * side))
    if ratio > 1.1:
        rows, cols = int(rows // ratio), int(cols // ratio)
    return base + rows * cols + rows


def video_feature_count(frames: int, tile: int = 384, patch: int = 14) -> int:
    """Features for a video: each frame pooled 2x2 (ceil), plus one newline for the video."""
    pooled = math.ceil((tile // patch) / 2)
    return frames * pooled * pooled + 1
