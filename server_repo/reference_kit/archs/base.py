"""What one reference architecture provides: tiny config, tokenizer spec, template, vision path.

An ``Arch`` is data plus a few functions, like a gateway family. ``weights.py`` uses the tiny
config and tokenizer spec to generate a checkpoint; ``engine.py`` uses the template and
``encode_media`` to turn a request into token ids and feature vectors. Running the language model
is left to ``generate.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch
from transformers import (
    CLIPVisionConfig,
    LlamaConfig,
    LlavaConfig,
    PretrainedConfig,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)

from server_repo.reference_kit.request import InvalidRequest
from server_repo.reference_kit.templates import MediaSlot, Prompt, PromptTemplate, build_prompt
from server_repo.reference_kit.tiny_tokenizer import SpecialTokens, build_hf_tokenizer


@dataclass(frozen=True)
class MediaFeatures:
    """Projected visual features, in prompt order, with the slots they fill."""

    slots: tuple[MediaSlot, ...]
    embeds: torch.Tensor | None  # [sum of slot lengths, hidden] or None when no media
    # What else the language model needs (cross-attention states, grids, encoder masks).
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def empty(cls) -> MediaFeatures:
        return cls((), None)


@dataclass(frozen=True)
class EncoderOutput:
    """What an encoder-decoder model's decoder cross-attends to: ``[1, S, d]`` and a mask."""

    hidden: torch.Tensor
    mask: torch.Tensor | None = None


class Arch:
    """Base class: subclasses set the class attributes and implement the hooks."""

    name: ClassVar[str]  # the Triton model name, e.g. "reference_llava"
    family: ClassVar[str]  # "llava" / "llava_onevision"
    model_class: ClassVar[type[PreTrainedModel]]
    template: ClassVar[PromptTemplate]
    special_tokens: ClassVar[SpecialTokens]
    tiny_spec: ClassVar[dict[str, Any]]  # sizes of the tiny model; hashed into the cache folder

    def build_tokenizer(self) -> PreTrainedTokenizerBase:
        """The tiny tokenizer (default: the ASCII BPE with ``special_tokens`` on top)."""
        return build_hf_tokenizer(self.special_tokens)

    def tiny_config(self, tokenizer: PreTrainedTokenizerBase) -> PretrainedConfig:
        """The tiny config, with special-token ids taken from ``tokenizer``."""
        raise NotImplementedError

    def finish_tiny_model(self, model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> None:
        """Adjust freshly initialised tiny weights before they are saved (default: nothing)."""

    def save_processor(self, tokenizer: PreTrainedTokenizerBase, directory: Path) -> None:
        """Write processor files so ``AutoProcessor.from_pretrained(directory)`` works."""
        raise NotImplementedError

    def load_processor(self, directory: Path) -> Any:
        """What ``encode_media`` needs from the checkpoint (an image processor or None)."""
        return None

    def encode_media(
        self,
        model: PreTrainedModel,
        processor: Any,
        images: np.ndarray | None,
        video: np.ndarray | None,
    ) -> MediaFeatures:
        """Validate the media tensors and compute their projected features."""
        raise NotImplementedError

    # Hooks with defaults that fit decoder-only models whose features fill prompt positions.
    # Encoder-decoder models (``encoder_decoder``) are run by ``seq2seq.py`` instead.
    encoder_decoder: ClassVar[bool] = False
    # Prefix KV reuse is only sound when a position's KV depends on the tokens before it alone;
    # cross-attention to the image (Mllama) breaks that.
    reuse_prefix: ClassVar[bool] = True

    def encode_request(self, model: PreTrainedModel, processor: Any, request: Any) -> MediaFeatures:
        """The request's media features (default: ``encode_media`` on images and video)."""
        return self.encode_media(model, processor, request.images, request.video)

    def build_prompt(
        self, tokenizer: PreTrainedTokenizerBase, text: str, slots: tuple[MediaSlot, ...]
    ) -> Prompt:
        """Token ids and media mask: the server-side template around ``text``."""
        return build_prompt(tokenizer, self.template, text, slots)

    def language_model(self, model: PreTrainedModel) -> PreTrainedModel:
        """The module the step loop calls with ``inputs_embeds`` (default: the model)."""
        return model

    def step_inputs(
        self, model: PreTrainedModel, prompt: Prompt, features: MediaFeatures
    ) -> Callable[[int, int], dict[str, Any]] | None:
        """Extra model arguments for positions ``[start, start + length)`` of one call (M-RoPE
        positions, cross-attention), or None when ``inputs_embeds`` is all the model needs."""
        return None

    # Encoder-decoder hooks, used by ``seq2seq.Seq2SeqEngine`` when ``encoder_decoder`` is set.
    def encode(
        self, model: PreTrainedModel, embeds: torch.Tensor, features: MediaFeatures
    ) -> EncoderOutput:
        """What the decoder cross-attends to, from the prompt embeddings and features."""
        raise NotImplementedError

    def decoder(self, model: PreTrainedModel) -> PreTrainedModel:
        """The module taking ``encoder_outputs`` and ``decoder_input_ids`` (default: the model)."""
        return model

    def decoder_start_id(self, model: PreTrainedModel) -> int:
        """The model's own decoder start token (what Hugging Face and NVIDIA's runner start
        from; the Triton path starts at the pad id unless ``decoder_text_input`` says)."""
        return int(model.config.decoder_start_token_id)


def expect_array(value: Any, name: str, ndim: int, dtypes: tuple[type, ...]) -> np.ndarray:
    """``value`` as an ndarray of rank ``ndim`` and one of ``dtypes``, else InvalidRequest."""
    if not isinstance(value, np.ndarray):
        raise InvalidRequest(f"{name} must be a numpy array")
    if value.ndim != ndim:
        raise InvalidRequest(f"{name} must be {ndim}-D per request, got shape {list(value.shape)}")
    if not any(value.dtype == np.dtype(d) for d in dtypes):
        allowed = ", ".join(np.dtype(d).name for d in dtypes)
        raise InvalidRequest(f"{name} must be {allowed}, got {value.dtype.name}")
    if 0 in value.shape:
        raise InvalidRequest(f"{name} must be non-empty, got shape {list(value.shape)}")
    return value


def decoder_settings(
    spec: dict[str, Any], tokenizer: PreTrainedTokenizerBase, **overrides: Any
) -> dict[str, Any]:
    """The text decoder's config arguments every tiny spec shares: sizes from ``spec``,
    special ids from the tokenizer; ``overrides`` for an architecture's own."""
    text = spec["text"]
    settings = {
        "vocab_size": len(tokenizer),
        "hidden_size": text["hidden"],
        "intermediate_size": text["intermediate"],
        "num_hidden_layers": text["layers"],
        "num_attention_heads": text["heads"],
        "max_position_embeddings": spec["max_positions"],
        "bos_token_id": tokenizer.bos_token_id,
        "eos_token_id": tokenizer.eos_token_id,
        "pad_token_id": tokenizer.pad_token_id,
        "initializer_range": spec["init_range"],
    }
    if "kv_heads" in text:
        settings["num_key_value_heads"] = text["kv_heads"]
    return settings | overrides


def clip_vision_config(
    spec: dict[str, Any], image_size: int | None = None, patch_size: int = 14
) -> CLIPVisionConfig:
    """The CLIP vision tower every tiny LLaVA-shaped spec shares: sizes from ``spec["vision"]``,
    its image side unless ``image_size`` is given (a tile or crop of the architecture's own)."""
    vision = spec["vision"]
    return CLIPVisionConfig(
        hidden_size=vision["hidden"],
        intermediate_size=vision["intermediate"],
        num_hidden_layers=vision["layers"],
        num_attention_heads=vision["heads"],
        image_size=vision["image"] if image_size is None else image_size,
        patch_size=patch_size,
        projection_dim=vision["hidden"],
        initializer_range=spec["init_range"],
    )


def tiny_llava_config(
    spec: dict[str, Any], tokenizer: PreTrainedTokenizerBase, slot: str, image_seq_length: int
) -> LlavaConfig:
    """A tiny LLaVA of the common shape: ``clip_vision_config(spec)``'s tower, a Llama decoder,
    the penultimate layer's patch features, ``image_seq_length`` of them at each ``slot``."""
    return LlavaConfig(
        vision_config=clip_vision_config(spec),
        text_config=LlamaConfig(**decoder_settings(spec, tokenizer)),
        image_token_index=tokenizer.convert_tokens_to_ids(slot),
        image_seq_length=image_seq_length,
        vision_feature_layer=-2,
        vision_feature_select_strategy="default",
        pad_token_id=tokenizer.pad_token_id,
    )


def image_array(
    arch: str,
    images: Any,
    video: Any,
    name: str,
    dtypes: tuple[type, ...],
    needed: str | None = None,
) -> np.ndarray | None:
    """The request's images as a 4-D array the model can read, for image-only models: video
    is refused; no images is None, or the refusal ``needed`` for a model that needs one."""
    if video is not None:
        raise InvalidRequest(f"video input is not supported by {arch}")
    if images is None:
        if needed:
            raise InvalidRequest(needed)
        return None
    return expect_array(images, name, 4, dtypes)


def rgb_image_bytes(arch: str, images: Any, video: Any) -> np.ndarray | None:
    """``image_bytes_input`` as uint8 RGB ``[n, H, W, 3]`` for image-only models, or None."""
    pixels = image_array(arch, images, video, "image_bytes_input", (np.uint8,))
    if pixels is not None and pixels.shape[-1] != 3:
        raise InvalidRequest(f"image_bytes_input must be RGB [n, H, W, 3], got {pixels.shape}")
    return pixels


def model_device_dtype(model: PreTrainedModel) -> tuple[torch.device, torch.dtype]:
    parameter = next(model.parameters())
    return parameter.device, parameter.dtype


def one_raw_image(arch: str, pixels: np.ndarray) -> np.ndarray:
    """Refuse a second ``image_bytes_input`` image, as NVIDIA's preprocessing cannot take one:
    its ``VisionPreProcessor`` (tensorrtllm_backend all_models/inflight_batcher_llm/
    preprocessing/1/model.py @c2e65b88d85255be30cf50440a91662abeb497dd) pairs image i with
    query i, so image 2 of one request fails there (IndexError, or its batch-size assert)."""
    if pixels.shape[0] > 1:
        raise InvalidRequest(
            f"{arch}: image_bytes_input holds {pixels.shape[0]} images; NVIDIA's "
            "preprocessing for this family reads one per request"
        )
    return pixels
