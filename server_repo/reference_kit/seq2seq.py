"""The encoder-decoder generation path: BLIP2-T5, Pix2Struct (Deplot) and Nougat.

TensorRT-LLM runs these as an encoder engine (or, for Nougat and Deplot, the vision encoder
alone) whose output the decoder cross-attends to. ``Seq2SeqEngine`` keeps the decoder-only
engine's request handling (validation, template, features, statistics, stop rules, sampling)
and replaces the step loop: encode once, then feed the decoder its start token(s) and one token
per step through an ``EncoderDecoderCache``.

There is no prefix KV reuse here (NVIDIA builds these engines without a paged KV cache), so
``reused_blocks`` stays 0. ``input_tokens`` counts the encoder positions, as TensorRT-LLM's
input length does. What the encoder reads is the architecture's business (``encode`` hook):
the T5 encoder over ``[query features, text]`` for BLIP2-T5, the vision encoder's output as is
for Pix2Struct and Nougat.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import torch
from transformers import DynamicCache, EncoderDecoderCache, PreTrainedModel
from transformers.modeling_outputs import BaseModelOutput

from server_repo.reference_kit.archs.base import EncoderOutput
from server_repo.reference_kit.engine import PreparedRequest, ReferenceEngine
from server_repo.reference_kit.generate import StopRule, decode_loop
from server_repo.reference_kit.request import (
    GenerationRequest,
    GenerationStats,
    InvalidRequest,
    Step,
)
from server_repo.reference_kit.sampling import Sampled, Sampler
from server_repo.reference_kit.templates import Prompt

# Decoders with relative position biases (T5, Pix2Struct) have no position table; this bounds
# the decoded length the way TensorRT-LLM's max_seq_len would.
DEFAULT_MAX_DECODER_POSITIONS = 4096


class Seq2SeqEngine(ReferenceEngine):
    """A reference engine whose architecture is an encoder plus a cross-attending decoder."""

    @property
    def max_positions(self) -> int:
        """The decoder's positions (what ``max_tokens`` spends), not the encoder's."""
        config = self.model.config.get_text_config(decoder=True)
        found = getattr(config, "max_position_embeddings", None)
        return int(found or DEFAULT_MAX_DECODER_POSITIONS)

    def check_length(self, prompt: Prompt, request: GenerationRequest) -> int:
        """``max_tokens`` within the decoder's positions (reduced, as TensorRT-LLM does)."""
        start = len(self.decoder_start(request))
        room = self.max_positions - start
        if room < 1:
            raise InvalidRequest(
                f"decoder prompt ({start} tokens) leaves no room in the decoder's "
                f"{self.max_positions} positions"
            )
        return min(request.max_tokens, room)

    def decoder_start(self, request: GenerationRequest) -> list[int]:
        """``decoder_text_input`` tokenized, else the pad id, as NVIDIA's Triton preprocessing
        starts the decoder when no ``DECODER_QUERY`` comes (``decoder_input_id = pad_id``:
        the request's ``pad_id``, else the tokenizer's; tensorrtllm_backend all_models/
        inflight_batcher_llm/preprocessing/1/model.py @c2e65b88d85255be30cf50440a91662abeb497dd).
        For T5 and Pix2Struct that is their own decoder start; Nougat's is ``<s>``, which a
        client must send as the decoder prompt."""
        if request.decoder_text:
            ids = self.encode(request.decoder_text)
            if ids:
                return ids
        pad = request.pad_id if request.pad_id is not None else self.tokenizer.pad_token_id
        return [int(pad)]

    def _steps(
        self,
        prepared: PreparedRequest,
        stats: GenerationStats,
        is_cancelled: Callable[[], bool] | None,
    ) -> Iterator[Step]:
        request = prepared.request
        start = self.decoder_start(request)
        sampler = Sampler(
            request,
            prepared.end_id,
            start,
            [self.encode(word) for word in request.bad_words],
            self.assets.device,
            self.normalize_log_probs,
            prepared.guide,
        )
        stop = StopRule(
            prepared.end_id,
            tuple(tuple(self.encode(word)) for word in request.stop_words),
            request.max_tokens,
        )
        decoder = self.arch.decoder(self.model)
        encode = lambda: self.arch.encode(self.model, prepared.embeds, prepared.features)  # noqa: E731
        yield from self._scored_steps(
            run_decoder(decoder, encode, start, sampler, stop, stats, is_cancelled)
        )


def _decoder_logits(
    decoder: PreTrainedModel, encoder: EncoderOutput, ids: list[int], past: EncoderDecoderCache
) -> torch.Tensor:
    """The decoder's last logits after ``ids``, cross-attending to ``encoder``."""
    tensor = torch.tensor([ids], device=encoder.hidden.device)
    output = decoder(
        encoder_outputs=BaseModelOutput(last_hidden_state=encoder.hidden),
        attention_mask=encoder.mask,
        decoder_input_ids=tensor,
        past_key_values=past,
        use_cache=True,
    )
    return output.logits[0, -1]


def run_decoder(
    decoder: PreTrainedModel,
    encode: Callable[[], EncoderOutput],
    start: list[int],
    sampler: Sampler,
    stop: StopRule,
    stats: GenerationStats,
    is_cancelled: Callable[[], bool] | None = None,
) -> Iterator[Sampled]:
    """Yield generated tokens; the same stopping and statistics as ``generate.run_steps``.

    Inference mode is entered around each computation, never across a ``yield``.
    """
    if is_cancelled is not None and is_cancelled():
        stats.cancelled, stats.finish_reason = True, "cancelled"
        return
    with torch.inference_mode():
        encoder = encode()
        past = EncoderDecoderCache(DynamicCache(), DynamicCache())
        logits = _decoder_logits(decoder, encoder, start, past)
    yield from decode_loop(
        logits,
        lambda token, _generated: _decoder_logits(decoder, encoder, [token], past),
        sampler,
        stop,
        stats,
        is_cancelled,
    )
