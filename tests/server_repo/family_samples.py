"""One deterministic request per reference family: the tensors a client sends, per seed.

``family_media(family, seed)`` returns the image tensor the family's deployment takes (without
the batch dimension) and its extras; the kit tests and the real-Triton tests build their
requests from the same arrays, so an answer can be compared across the two. Sizes are small
where the family allows (test time), real where its contract fixes them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from server_repo.reference_kit import GenerationRequest
from tests.server_repo.samples import rgb_image

PROMPTS = {
    "blip2_opt": "Question: what is in the picture? Answer:",
    "blip2_t5": "Question: what is in the picture? Answer:",
    "llava_next": "What is shown here?",
    "mllama": "<|image|>Describe the picture.",
    "qwen2_vl": "What is shown here?",
    "kosmos2": "<grounding>An image of",
    "fuyu": "What is shown here?",
    "deplot": "",
    "nougat": "",
    "vila": "<image>\nWhat is shown here?",
    "neva": "<extra_id_0>System\n\n<extra_id_1>User\n<image>\nWhat is shown here?\n"
    "<extra_id_1>Assistant\n",
    "video_neva": "<extra_id_0>System\nBe brief.\n\n<extra_id_1>User<video>\nWhat happens?\n"
    "<extra_id_1>Assistant\n",
    "internlm_xcomposer2": "[UNUSED_TOKEN_146]system\nBe brief.[UNUSED_TOKEN_145]\n"
    "[UNUSED_TOKEN_146]user\n<ImageHere>What is shown here?[UNUSED_TOKEN_145]\n"
    "[UNUSED_TOKEN_146]assistant\n",
}
FAMILIES = tuple(PROMPTS)
ENCODER_DECODER = ("blip2_t5", "deplot", "nougat")


@dataclass(frozen=True)
class FamilyMedia:
    """The image tensor (``image_input`` or ``image_bytes_input``) and extra inputs."""

    tensor_name: str
    images: np.ndarray
    image_sizes: np.ndarray | None = None
    extra: dict[str, np.ndarray] = field(default_factory=dict)

    def request(self, family: str, max_tokens: int = 8, **options: object) -> GenerationRequest:
        """The kit request a Triton request with these tensors parses into."""
        return GenerationRequest(
            PROMPTS[family],
            max_tokens,
            images=self.images,
            image_sizes=self.image_sizes,
            **options,
        )

    def tensors(self) -> dict[str, np.ndarray]:
        """Triton input tensors, batch dimension included."""
        found = {self.tensor_name: self.images[None]}
        if self.image_sizes is not None:
            found["image_sizes_input"] = self.image_sizes[None]
        return found


def _normal(seed: int, shape: tuple[int, ...]) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float16)


def deplot_patches(seed: int, rows: int = 12, cols: int = 20, total: int = 2048) -> np.ndarray:
    """Flattened patches ``[1, total, 770]``: row id, column id, pixels; zero rows after."""
    patches = np.zeros((1, total, 770), dtype=np.float32)
    count = rows * cols
    patches[0, :count, 0] = np.repeat(np.arange(1, rows + 1), cols)
    patches[0, :count, 1] = np.tile(np.arange(1, cols + 1), rows)
    patches[0, :count, 2:] = np.random.default_rng(seed).standard_normal((count, 768))
    return patches.astype(np.float16)


def family_media(family: str, seed: int) -> FamilyMedia:
    """The media part of a request to ``family``'s reference model."""
    if family in ("blip2_opt", "blip2_t5", "kosmos2"):
        return FamilyMedia("image_input", _normal(seed, (1, 3, 224, 224)))
    if family == "llava_next":
        # A 300 x 500 image fits the 336 x 672 pinpoint: the whole image plus 2 tiles.
        sizes = np.array([[300, 500]], dtype=np.int64)
        return FamilyMedia("image_input", _normal(seed, (3, 3, 336, 336)), sizes)
    if family == "fuyu":
        return FamilyMedia("image_input", _normal(seed, (1, 3, 90, 120)))
    if family == "deplot":
        return FamilyMedia("image_input", deplot_patches(seed))
    if family == "nougat":
        return FamilyMedia("image_input", _normal(seed, (1, 3, 896, 672)))
    if family in ("vila", "neva"):
        return FamilyMedia("image_input", _normal(seed, (1, 3, 384, 384)))
    if family == "internlm_xcomposer2":
        return FamilyMedia("image_input", _normal(seed, (1, 3, 490, 490)))
    if family == "video_neva":  # three frames of one video
        return FamilyMedia("image_input", _normal(seed, (3, 3, 224, 224)))
    if family == "qwen2_vl":
        return FamilyMedia("image_bytes_input", rgb_image(seed, 112, 140))
    if family == "mllama":
        return FamilyMedia("image_bytes_input", rgb_image(seed, 60, 100))
    raise KeyError(family)


def lora_adapter(
    seed: int, hidden: int = 64, kv: int = 32, layers: int = 2, rank: int = 4
) -> tuple[np.ndarray, np.ndarray]:
    """``hf_lora_convert.py``-shaped tensors: attn_q (1) and attn_v (3) in every layer, each row
    the "in" [rank, hidden] then the "out" [out, rank] matrix, padded to the longest row."""
    rng = np.random.default_rng(seed)
    rows, config = [], []
    for layer in range(layers):
        for module, out in ((1, hidden), (3, kv)):
            row = rng.standard_normal(rank * hidden + out * rank) * 0.5
            rows.append(np.pad(row, (0, rank * hidden + hidden * rank - len(row))))
            config.append([module, layer, rank])
    return np.asarray(rows, np.float16), np.asarray(config, np.int32)
