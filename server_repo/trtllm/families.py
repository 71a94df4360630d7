"""Per-family facts the repository tool checks and fills: adding a family is one table entry.

Every number here comes from NVIDIA's multimodal and Whisper guides for the TensorRT-LLM
Triton backend (``shared/seeds``), and the engine-build recipes in ``deploy/engines/`` read
the same numbers, so a recipe's engine always passes this tool's checks. What the gateway's
family states as well (the image tensor it fills, its end and pad ids) is read from that
family (``gateway/families/``), never copied: the two cannot drift.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from gateway.families.base import Family
from gateway.families.registry import SUPPORTED_FAMILIES as GATEWAY_FAMILIES

Layout = Literal["multimodal", "whisper"]

#: trtllm-build stores ``--max_multimodal_len`` under this name in the engine's config.json.
PROMPT_TABLE_FIELD = "max_prompt_embedding_table_size"
#: Encoder-decoder engines (mllama) budget visual features as encoder input instead.
ENCODER_INPUT_FIELD = "max_encoder_input_len"


@dataclass(frozen=True)
class FamilySpec:
    """What one model family needs from its engines and its Triton repository."""

    name: str
    layout: Layout
    gateway_family: str
    #: visual features one image adds (0: the family takes no images)
    features_per_image: int = 0
    #: the build_config field of the LLM engine that holds the visual-feature budget
    budget_field: str = PROMPT_TABLE_FIELD
    #: True when the budget is per batch (prompt tables), False when per request (encoder input)
    budget_scales_with_batch: bool = True
    #: the LLM (or decoder) engine's ``pretrained_config.dtype`` the backend configs assume
    engine_dtype: str = "float16"
    encoder_features_type: str = "TYPE_FP16"
    #: cross-attention models split the KV cache: ``cross_kv_cache_fraction`` is required
    encoder_decoder: bool = False
    #: ``builder_config.model_type`` values of a matching visual engine
    visual_model_types: tuple[str, ...] = ()

    @property
    def gateway(self) -> type[Family]:
        """The gateway's family this repository serves (the one source of its facts)."""
        return GATEWAY_FAMILIES[self.gateway_family]

    @property
    def image_tensor(self) -> str | None:
        """The ensemble input the gateway fills; NVIDIA's BLS accepts only ``image_input``."""
        return self.gateway.image_tensor

    @property
    def end_id(self) -> int | None:
        return self.gateway.default_end_id

    @property
    def pad_id(self) -> int | None:
        return self.gateway.default_pad_id

    def feature_budget(
        self, max_batch_size: int, max_images: int, features: int | None = None
    ) -> int:
        """The engine budget NVIDIA's rule demands: batch x features x images (per request for
        encoder-input budgets, which the batch does not multiply)."""
        batch = max_batch_size if self.budget_scales_with_batch else 1
        return batch * (features or self.features_per_image) * max_images


SUPPORTED_FAMILIES: dict[str, FamilySpec] = {
    spec.name: spec
    for spec in (
        FamilySpec(
            name="llava",
            layout="multimodal",
            gateway_family="llava",
            features_per_image=576,  # LLaVA-1.5: 336 px / patch 14 = 24 x 24
            visual_model_types=("llava",),
        ),
        FamilySpec(
            name="vila",
            layout="multimodal",
            gateway_family="vila",
            features_per_image=196,
            visual_model_types=("vila",),
        ),
        FamilySpec(
            name="llava_onevision",
            layout="multimodal",
            gateway_family="llava_onevision",
            # One anyres image: base view plus up to 9 tiles of 729 features and row
            # separators. 7300 is the budget NVIDIA's guide builds for max_batch_size 1.
            features_per_image=7300,
            visual_model_types=("llava_onevision",),
        ),
        FamilySpec(
            name="mllama",
            layout="multimodal",
            gateway_family="mllama",
            features_per_image=6404,  # 4 tiles x 1601 vision tokens
            budget_field=ENCODER_INPUT_FIELD,
            budget_scales_with_batch=False,
            engine_dtype="bfloat16",
            encoder_features_type="TYPE_BF16",
            encoder_decoder=True,
            visual_model_types=("mllama",),
        ),
        FamilySpec(
            name="whisper",
            layout="whisper",
            gateway_family="whisper",
            encoder_decoder=True,
        ),
    )
}

#: Triton model directories per layout: (template path under all_models/, model name).
LAYOUT_MODELS: dict[Layout, tuple[tuple[str, str], ...]] = {
    "multimodal": (
        ("inflight_batcher_llm/preprocessing", "preprocessing"),
        ("inflight_batcher_llm/postprocessing", "postprocessing"),
        ("inflight_batcher_llm/tensorrt_llm", "tensorrt_llm"),
        ("inflight_batcher_llm/tensorrt_llm_bls", "tensorrt_llm_bls"),
        ("multimodal/ensemble", "ensemble"),
        ("multimodal/multimodal_encoders", "multimodal_encoders"),
    ),
    "whisper": (
        ("inflight_batcher_llm/tensorrt_llm", "tensorrt_llm"),
        ("whisper/whisper_bls", "whisper_bls"),
    ),
}

#: Models that launch_triton_server.py must load on every MPI rank, per layout.
RANK_MODELS: dict[Layout, str] = {
    "multimodal": "tensorrt_llm,multimodal_encoders",
    "whisper": "tensorrt_llm,whisper_bls",
}

#: Whisper's 30 s window is 3000 mel frames: the encoder must accept that many.
WHISPER_FRAMES = 3000
WHISPER_ASSETS = ("multilingual.tiktoken", "mel_filters.npz")


def get_spec(name: str) -> FamilySpec:
    """The spec called ``name``; an unknown family names the known ones."""
    try:
        return SUPPORTED_FAMILIES[name]
    except KeyError:
        known = ", ".join(sorted(SUPPORTED_FAMILIES))
        raise ValueError(f"unknown family {name!r}; known: {known}") from None
