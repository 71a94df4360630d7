"""The in-process Whisper engine the two reference Whisper models share.

``WhisperEngine`` does what TensorRT-LLM's encoder-decoder ``tensorrt_llm`` model does for
Whisper: encode log-mel features once, prefill the decoder prompt, then choose one token per
step (``Sampler``, TensorRT-LLM's rules: no Whisper-specific timestamp or suppression rules)
until ``end_id`` or the token budget. ``features`` is what NVIDIA's ``whisper_bls`` adds in
front: 16 kHz samples -> log-mel with the checkpoint's own feature extractor (Hugging Face's),
padded to 30 s. The Triton tensors are ``whisper_triton.py``'s business.

    engine = load_whisper_engine(cache_dir=None, device="cpu")
    ids = engine.complete(engine.features(samples), engine.encode_prefix(DEFAULT_PREFIX), 50)
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from transformers.modeling_outputs import BaseModelOutput

from server_repo.reference_kit.archs import get_arch
from server_repo.reference_kit.archs.base import model_device_dtype
from server_repo.reference_kit.generate import StopRule
from server_repo.reference_kit.request import GenerationRequest, GenerationStats, InvalidRequest
from server_repo.reference_kit.sampling import Sampler
from server_repo.reference_kit.weights import ModelAssets, load_assets

SAMPLE_RATE = 16_000
MAX_SAMPLES = 30 * SAMPLE_RATE  # the encoder is built for one 30 s window
ENCODER_FRAMES = 3000
DEFAULT_PREFIX = "<|startoftranscript|><|en|><|transcribe|><|notimestamps|>"
_SPECIAL = re.compile(r"<\|.*?\|>")


@dataclass(frozen=True)
class Decoding:
    """How to choose tokens: TensorRT-LLM's sampling inputs (top_k 0 and top_p 0: greedy)."""

    max_new_tokens: int
    end_id: int | None = None
    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 0.0
    seed: int = 0

    def sampler_request(self) -> GenerationRequest:
        return GenerationRequest(
            text_input="",
            max_tokens=self.max_new_tokens,
            temperature=self.temperature,
            top_k=self.top_k,
            top_p=self.top_p,
            seed=self.seed,
        )


@dataclass
class WhisperRun:
    """Iterator of generated token ids (``end_id`` included when reached) with live stats."""

    tokens: Iterator[int]
    stats: GenerationStats
    generated: list[int] = field(default_factory=list)

    def __iter__(self) -> Iterator[int]:
        for token in self.tokens:
            self.generated.append(token)
            yield token


class WhisperEngine:
    """One loaded Whisper checkpoint (tiny or real) with its tokenizer and feature extractor."""

    def __init__(self, assets: ModelAssets) -> None:
        self.assets = assets
        self._tokenizer_lock = threading.Lock()  # fast tokenizers are not thread-safe

    @property
    def model(self):
        return self.assets.model

    @property
    def n_mels(self) -> int:
        return int(self.model.config.num_mel_bins)

    @property
    def max_positions(self) -> int:
        return int(self.model.config.max_target_positions)

    @property
    def eot(self) -> int:
        return int(self.assets.tokenizer.eos_token_id)

    def encode_prefix(self, text: str) -> list[int]:
        """A decoder prompt written as text with special tokens (``whisper_bls``'s TEXT_PREFIX)."""
        with self._tokenizer_lock:
            return list(self.assets.tokenizer(text, add_special_tokens=False)["input_ids"])

    def transcript(self, token_ids: Sequence[int]) -> str:
        """NVIDIA's BLS text: decode everything, then strip ``<|...|>`` tokens and spaces."""
        with self._tokenizer_lock:
            text = self.assets.tokenizer.decode(list(token_ids), skip_special_tokens=False)
        return _SPECIAL.sub("", text).strip()

    def features(self, samples: np.ndarray) -> np.ndarray:
        """16 kHz mono samples (<= 30 s) -> log-mel ``[n_mels, 3000]`` float32, padded to 30 s."""
        if samples.ndim != 1 or samples.size == 0:
            raise InvalidRequest("WAV must hold at least one sample")
        if samples.size > MAX_SAMPLES:
            raise InvalidRequest(
                f"WAV holds {samples.size} samples; audio longer than 30 s ({MAX_SAMPLES} "
                "samples) is not supported"
            )
        extracted = self.assets.processor(
            samples.astype(np.float32),
            sampling_rate=SAMPLE_RATE,
            padding="max_length",
            return_tensors="np",
        )
        return np.asarray(extracted["input_features"][0], dtype=np.float32)

    def generate(
        self,
        features: np.ndarray,
        prompt: Sequence[int],
        decoding: Decoding,
        is_cancelled: Callable[[], bool] | None = None,
    ) -> WhisperRun:
        """Validate now (raising ``InvalidRequest``), then decode lazily."""
        self._check(features, prompt, decoding)
        end_id = self.eot if decoding.end_id is None else decoding.end_id
        stats = GenerationStats(tokens_per_block=1, input_tokens=len(prompt))
        steps = self._steps(features, list(prompt), decoding, end_id, stats, is_cancelled)
        return WhisperRun(steps, stats)

    def complete(self, features: np.ndarray, prompt: Sequence[int], max_new: int) -> list[int]:
        """Greedy token ids to the end (the in-process oracle the tests compare with)."""
        return list(self.generate(features, prompt, Decoding(max_new)))

    def _check(self, features: np.ndarray, prompt: Sequence[int], decoding: Decoding) -> None:
        expected = (self.n_mels, ENCODER_FRAMES)
        if features.shape != expected:
            raise InvalidRequest(
                f"mel features must be {list(expected)}, got {list(features.shape)}"
            )
        if not prompt:
            raise InvalidRequest("the decoder prompt must not be empty")
        vocab = int(self.model.config.vocab_size)
        if min(prompt) < 0 or max(prompt) >= vocab:
            raise InvalidRequest(f"decoder prompt ids must be within [0, {vocab})")
        if decoding.max_new_tokens < 1:
            raise InvalidRequest("request_output_len must be >= 1")
        if len(prompt) + decoding.max_new_tokens > self.max_positions:
            raise InvalidRequest(
                f"prompt ({len(prompt)} tokens) + output ({decoding.max_new_tokens}) exceeds "
                f"the decoder's {self.max_positions} positions"
            )
        decoding.sampler_request().validate()

    def _steps(
        self,
        features: np.ndarray,
        prompt: list[int],
        decoding: Decoding,
        end_id: int,
        stats: GenerationStats,
        is_cancelled: Callable[[], bool] | None,
    ) -> Iterator[int]:
        """Token ids one by one; inference mode is never held across a ``yield``."""
        device, dtype = model_device_dtype(self.model)
        sampler = Sampler(decoding.sampler_request(), end_id, prompt, [], device)
        stop = StopRule(end_id, (), decoding.max_new_tokens)
        with torch.inference_mode():
            mel = torch.from_numpy(features)[None].to(device=device, dtype=dtype)
            encoded = BaseModelOutput(last_hidden_state=self.model.model.encoder(mel)[0])
            ids = torch.tensor([prompt], device=device)
            output = self.model(encoder_outputs=encoded, decoder_input_ids=ids, use_cache=True)
        generated: list[int] = []
        while True:
            if is_cancelled is not None and is_cancelled():
                stats.cancelled, stats.finish_reason = True, "cancelled"
                return
            with torch.inference_mode():
                token = sampler.choose(output.logits[0, -1], generated)
            generated.append(token)
            stats.output_tokens = len(generated)
            yield token
            stats.finish_reason = stop.reason(generated)
            if stats.finish_reason is not None:
                return
            with torch.inference_mode():
                step = torch.tensor([[token]], device=device)
                output = self.model(
                    encoder_outputs=encoded,
                    decoder_input_ids=step,
                    past_key_values=output.past_key_values,
                    use_cache=True,
                )


def load_whisper_engine(
    cache_dir: Path | str | None = None,
    checkpoint: str | None = None,
    device: str | None = None,
) -> WhisperEngine:
    """The tiny generated Whisper, or a real Hugging Face Whisper checkpoint folder."""
    arch = get_arch("whisper")
    return WhisperEngine(
        load_assets(arch, cache_dir=cache_dir, checkpoint=checkpoint, device=device)
    )
