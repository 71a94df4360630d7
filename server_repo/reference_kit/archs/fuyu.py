"""Fuyu (``FuyuForCausalLM``: a linear patch embedding feeding Persimmon) for the reference.

Fuyu has no vision tower: each 30 x 30 pixel patch is flattened and projected by one linear
layer into the decoder's embedding space. NVIDIA's runner takes the HF processor's output
(resize to fit 1080 x 1920, pad, normalise to [-1, 1], patchify); behind the ensemble contract
the client sends ``image_input`` FP16 ``[1, n, 3, H, W]``: each image resized (never up) to fit
1080 x 1920 and normalised, *not* padded. The server pads the bottom and right edges up to a
multiple of 30 with the processor's padding value (white before normalisation, so
``(1/255 - 0.5) / 0.5`` after it), exactly what the HF processor's patches hold there.

Features per image: ``rows x cols`` patches plus one ``|NEWLINE|`` token per row, in the order
the processor lays them out (at most 36 x 64 + 36 = 2340). The newline positions carry the
``|NEWLINE|`` token embedding; they belong to the image's slot, so they are keyed with the
extra id like the patches. Template (the processor's): features, ``<s>``, the text, ``<0x04>``
(Fuyu's beginning-of-answer token).

Shrunk vs fuyu-8b: width (4096 -> 64) and depth (36 -> 2 layers); the geometry (patch 30,
1080 x 1920 canvas) is real.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch
from transformers import (
    AutoTokenizer,
    FuyuConfig,
    FuyuForCausalLM,
    PersimmonConfig,
    PretrainedConfig,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)
from transformers.models.fuyu.image_processing_pil_fuyu import FuyuImageProcessorPil

from server_repo.reference_kit.archs.base import (
    Arch,
    MediaFeatures,
    decoder_settings,
    image_array,
    model_device_dtype,
)
from server_repo.reference_kit.request import InvalidRequest
from server_repo.reference_kit.templates import FUYU, MediaSlot
from server_repo.reference_kit.tiny_tokenizer import SpecialTokens

PATCH = 30
CANVAS = (1080, 1920)  # (height, width) the processor fits images into
# The processor pads with 1.0 on the 0-255 scale, then rescales by 1/255 and normalises
# with mean 0.5 and std 0.5.
PAD_VALUE = (1.0 / 255 - 0.5) / 0.5
IMAGE_TOKEN, NEWLINE_TOKEN = "|SPEAKER|", "|NEWLINE|"


class FuyuArch(Arch):
    name: ClassVar[str] = "reference_fuyu"
    family: ClassVar[str] = "fuyu"
    model_class = FuyuForCausalLM
    template = FUYU
    special_tokens = SpecialTokens(
        bos="<s>",
        eos="|ENDOFTEXT|",
        unk="<unk>",
        pad="<pad>",
        extra=(IMAGE_TOKEN, NEWLINE_TOKEN, "<0x04>"),
        add_bos=True,
    )
    tiny_spec: ClassVar[dict[str, Any]] = {
        "text": {"hidden": 64, "intermediate": 128, "layers": 2, "heads": 4},
        "max_positions": 8192,
        "init_range": 0.5,
        "seed": 8008,
    }

    def tiny_config(self, tokenizer: PreTrainedTokenizerBase) -> PretrainedConfig:
        spec = self.tiny_spec
        text = PersimmonConfig(**decoder_settings(spec, tokenizer))
        return FuyuConfig(
            text_config=text,
            patch_size=PATCH,
            num_channels=3,
            image_token_id=tokenizer.convert_tokens_to_ids(IMAGE_TOKEN),
            initializer_range=spec["init_range"],
        )

    def save_processor(self, tokenizer: PreTrainedTokenizerBase, directory: Path) -> None:
        """The image processor only: ``FuyuProcessor`` insists on a Llama tokenizer class."""
        FuyuImageProcessorPil(size={"height": CANVAS[0], "width": CANVAS[1]}).save_pretrained(
            directory
        )

    def load_processor(self, directory: Path) -> Any:
        """The ``|NEWLINE|`` token id (each row of patches ends with its embedding)."""
        tokenizer = AutoTokenizer.from_pretrained(directory)
        return {"newline_id": tokenizer.convert_tokens_to_ids(NEWLINE_TOKEN)}

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
        _, channels, height, width = pixels.shape
        if channels != 3 or height > CANVAS[0] or width > CANVAS[1]:
            raise InvalidRequest(
                f"image_input must be [n, 3, H, W] with H <= {CANVAS[0]} and W <= {CANVAS[1]} "
                f"(resized to fit, not padded), got {list(pixels.shape)}"
            )
        device, dtype = model_device_dtype(model)
        newline_id = torch.tensor([processor["newline_id"]], device=device)
        newline = model.get_input_embeddings()(newline_id)[0]
        slots, embeds = [], []
        for image in pixels:
            patches, rows, cols = patchify(image)
            tensor = torch.from_numpy(patches).to(device=device, dtype=dtype)
            features = model.model.get_image_features(tensor).last_hidden_state
            grid = features.reshape(rows, cols, -1)
            lines = torch.cat([grid, newline.expand(rows, 1, -1)], dim=1).reshape(
                -1, grid.shape[-1]
            )
            slots.append(MediaSlot(model.config.image_token_id, int(lines.shape[0])))
            embeds.append(lines)
        return MediaFeatures(tuple(slots), torch.cat(embeds, dim=0))


def padded_size(height: int, width: int) -> tuple[int, int]:
    """``height`` x ``width`` rounded up to whole patches."""
    return math.ceil(height / PATCH) * PATCH, math.ceil(width / PATCH) * PATCH


def patchify(image: np.ndarray) -> tuple[np.ndarray, int, int]:
    """One normalised ``[3, H, W]`` image -> ``[rows * cols, 30 * 30 * 3]`` patches, row-major,
    each flattened as (y, x, channel) like the HF processor; padded bottom/right first."""
    _, height, width = image.shape
    full_h, full_w = padded_size(height, width)
    canvas = np.full((3, full_h, full_w), PAD_VALUE, dtype=np.float32)
    canvas[:, :height, :width] = image
    rows, cols = full_h // PATCH, full_w // PATCH
    blocks = canvas.reshape(3, rows, PATCH, cols, PATCH).transpose(1, 3, 2, 4, 0)
    return np.ascontiguousarray(blocks.reshape(rows * cols, PATCH * PATCH * 3)), rows, cols


def image_feature_count(height: int, width: int) -> int:
    """Positions one resized ``height`` x ``width`` image takes: patches plus a newline per row."""
    full_h, full_w = padded_size(height, width)
    return (full_h // PATCH) * (full_w // PATCH + 1)
