"""BLIP-2 (``Blip2ForConditionalGeneration``: ViT + Q-Former + OPT or Flan-T5) for the reference.

The client preprocesses (``image_input`` FP16 ``[1, 3, 224, 224]``, BLIP's 224 px bicubic resize
and OpenAI-CLIP normalisation); the ViT (patch 14: 256 patches) feeds the Q-Former, whose 32
query outputs are projected into the language model: 32 features per image, as in the real
model. One image per request: NVIDIA's preprocessing sizes the prompt table for 32 features.

Layout is TensorRT-LLM's for prompts without a post-prompt: features first, then the text as
the tokenizer encodes it (OPT puts its BOS ``</s>`` in front; T5 appends ``</s>``). OPT is a
decoder (the usual step loop, on ``model.language_model``); T5 is an encoder-decoder: its
encoder reads ``[features, text]`` and the decoder starts from T5's start token (its pad id),
which ``seq2seq.py`` runs.

Shrunk vs the real checkpoints: widths (ViT 1408 -> 32, Q-Former 768 -> 32, OPT-2.7b 2560 ->
64, Flan-T5-XL 2048 -> 32) and depths (39 / 12 / 32 / 24 layers -> 1-2); the geometry (224 px,
patch 14, 32 queries) is real. Q-Former queries are drawn at random (HF zeroes them) so the 32
features differ from one another.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch
from transformers import (
    Blip2Config,
    Blip2ForConditionalGeneration,
    Blip2Processor,
    Blip2QFormerConfig,
    Blip2VisionConfig,
    BlipImageProcessorPil,
    OPTConfig,
    PretrainedConfig,
    PreTrainedModel,
    PreTrainedTokenizerBase,
    T5Config,
)

from server_repo.reference_kit.archs.base import (
    Arch,
    EncoderOutput,
    MediaFeatures,
    image_array,
    model_device_dtype,
)
from server_repo.reference_kit.request import InvalidRequest
from server_repo.reference_kit.templates import BLIP2_OPT, BLIP2_T5, MediaSlot
from server_repo.reference_kit.tiny_tokenizer import SpecialTokens

IMAGE_SIZE = 224
NUM_QUERY_TOKENS = 32


class Blip2OptArch(Arch):
    name: ClassVar[str] = "reference_blip2_opt"
    family: ClassVar[str] = "blip2_opt"
    model_class = Blip2ForConditionalGeneration
    template = BLIP2_OPT
    special_tokens = SpecialTokens(
        bos="</s>", eos="</s>", unk="<unk>", pad="<pad>", extra=("<image>",), add_bos=True
    )
    tiny_spec: ClassVar[dict[str, Any]] = {
        "vision": {"hidden": 32, "intermediate": 64, "layers": 1, "heads": 2},
        "qformer": {"hidden": 32, "intermediate": 64, "layers": 1, "heads": 2},
        "text": {"hidden": 64, "intermediate": 128, "layers": 2, "heads": 4},
        "max_positions": 2048,
        "init_range": 0.2,
        "seed": 2301,
    }

    def text_config(self, tokenizer: PreTrainedTokenizerBase) -> PretrainedConfig:
        spec = self.tiny_spec["text"]
        return OPTConfig(
            vocab_size=len(tokenizer),
            hidden_size=spec["hidden"],
            word_embed_proj_dim=spec["hidden"],
            ffn_dim=spec["intermediate"],
            num_hidden_layers=spec["layers"],
            num_attention_heads=spec["heads"],
            max_position_embeddings=self.tiny_spec["max_positions"],
            bos_token_id=tokenizer.bos_token_id,
            eos_token_id=tokenizer.eos_token_id,
            pad_token_id=tokenizer.pad_token_id,
            init_std=self.tiny_spec["init_range"],
        )

    def tiny_config(self, tokenizer: PreTrainedTokenizerBase) -> PretrainedConfig:
        spec, init = self.tiny_spec, self.tiny_spec["init_range"]
        vision = Blip2VisionConfig(
            hidden_size=spec["vision"]["hidden"],
            intermediate_size=spec["vision"]["intermediate"],
            num_hidden_layers=spec["vision"]["layers"],
            num_attention_heads=spec["vision"]["heads"],
            image_size=IMAGE_SIZE,
            patch_size=14,
            initializer_range=init,
        )
        qformer = Blip2QFormerConfig(
            hidden_size=spec["qformer"]["hidden"],
            intermediate_size=spec["qformer"]["intermediate"],
            num_hidden_layers=spec["qformer"]["layers"],
            num_attention_heads=spec["qformer"]["heads"],
            cross_attention_frequency=1,
            encoder_hidden_size=spec["vision"]["hidden"],
            initializer_range=init,
        )
        return Blip2Config(
            vision_config=vision,
            qformer_config=qformer,
            text_config=self.text_config(tokenizer),
            num_query_tokens=NUM_QUERY_TOKENS,
            image_token_index=tokenizer.convert_tokens_to_ids("<image>"),
            initializer_range=init,
        )

    def finish_tiny_model(self, model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> None:
        """Distinct Q-Former queries (HF initialises them to zeros: 32 identical features)."""
        with torch.no_grad():
            model.query_tokens.normal_(0.0, 1.0)

    def save_processor(self, tokenizer: PreTrainedTokenizerBase, directory: Path) -> None:
        image_processor = BlipImageProcessorPil(
            size={"height": IMAGE_SIZE, "width": IMAGE_SIZE},
            image_mean=[0.48145466, 0.4578275, 0.40821073],
            image_std=[0.26862954, 0.26130258, 0.27577711],
        )
        processor = Blip2Processor(
            image_processor=image_processor, tokenizer=tokenizer, num_query_tokens=NUM_QUERY_TOKENS
        )
        processor.save_pretrained(directory)

    def encode_media(
        self,
        model: PreTrainedModel,
        processor: Any,
        images: np.ndarray | None,
        video: np.ndarray | None,
    ) -> MediaFeatures:
        needed = f"{self.name} needs an image (image_input): BLIP2 reads one"
        pixels = image_array(
            self.name, images, video, "image_input", (np.float16, np.float32), needed
        )
        assert pixels is not None
        if pixels.shape != (1, 3, IMAGE_SIZE, IMAGE_SIZE):
            raise InvalidRequest(
                f"image_input must be one image [1, 3, {IMAGE_SIZE}, {IMAGE_SIZE}] per request, "
                f"got {list(pixels.shape)}"
            )
        device, dtype = model_device_dtype(model)
        tensor = torch.from_numpy(np.ascontiguousarray(pixels)).to(device=device, dtype=dtype)
        features = model.get_image_features(pixel_values=tensor, return_dict=True).pooler_output[0]
        slot = MediaSlot(model.config.image_token_index, int(features.shape[0]))
        return MediaFeatures((slot,), features)

    def language_model(self, model: PreTrainedModel) -> PreTrainedModel:
        return model.language_model


class Blip2T5Arch(Blip2OptArch):
    name: ClassVar[str] = "reference_blip2_t5"
    family: ClassVar[str] = "blip2_t5"
    template = BLIP2_T5
    special_tokens = SpecialTokens(
        bos=None, eos="</s>", unk="<unk>", pad="<pad>", extra=("<image>",), add_bos=False
    )
    encoder_decoder: ClassVar[bool] = True
    tiny_spec: ClassVar[dict[str, Any]] = {
        **Blip2OptArch.tiny_spec,
        "text": {"hidden": 32, "kv": 16, "intermediate": 64, "layers": 1, "heads": 2},
        "t5_init_factor": 4.0,  # T5's own init scale; 1.0 leaves the decoder emitting <pad>
        "seed": 2302,
    }

    def text_config(self, tokenizer: PreTrainedTokenizerBase) -> PretrainedConfig:
        spec = self.tiny_spec["text"]
        return T5Config(
            vocab_size=len(tokenizer),
            d_model=spec["hidden"],
            d_kv=spec["kv"],
            d_ff=spec["intermediate"],
            num_layers=spec["layers"],
            num_decoder_layers=spec["layers"],
            num_heads=spec["heads"],
            feed_forward_proj="gated-gelu",
            tie_word_embeddings=False,
            eos_token_id=tokenizer.eos_token_id,
            pad_token_id=tokenizer.pad_token_id,
            decoder_start_token_id=tokenizer.pad_token_id,
            initializer_factor=self.tiny_spec["t5_init_factor"],
        )

    def language_model(self, model: PreTrainedModel) -> PreTrainedModel:
        raise NotImplementedError("BLIP2-T5 runs through seq2seq.Seq2SeqEngine")

    def encode(
        self, model: PreTrainedModel, embeds: torch.Tensor, features: MediaFeatures
    ) -> EncoderOutput:
        encoder = model.language_model.get_encoder()
        return EncoderOutput(encoder(inputs_embeds=embeds, return_dict=True).last_hidden_state)

    def decoder(self, model: PreTrainedModel) -> PreTrainedModel:
        return model.language_model

    def decoder_start_id(self, model: PreTrainedModel) -> int:
        return int(model.config.text_config.decoder_start_token_id)
