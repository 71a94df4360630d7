"""Whisper's two Triton contracts as wire arrays, and the readers of their responses. Pure.

The "direct" contract is TensorRT-LLM's encoder-decoder ``tensorrt_llm`` model: fp16 log-mel
``encoder_input_features`` ``[1, 3000, n_mels]``, ``input_lengths`` (3000),
``encoder_output_lengths`` (1500: the encoder halves the frames), ``decoder_input_ids``,
``request_output_len``, ``end_id``/``pad_id``, ``streaming``; it answers ``output_ids`` and
``sequence_length``. NVIDIA's ``whisper_bls`` takes ``WAV`` (16 kHz float32), ``WAV_LENS``
(declared optional but always read) and ``TEXT_PREFIX``, and answers ``TRANSCRIPTS``
(cumulative in decoupled mode, special tokens stripped). Every array carries the batch axis
of 1 in front of its declared dims; ``triton/tensors.py`` sends those the model declares.
"""

from __future__ import annotations

import codecs
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gateway.families.whisper.tokens import WhisperTokenizer

DIRECT_REQUIRED = ("encoder_input_features", "decoder_input_ids", "request_output_len")
BLS_REQUIRED = ("WAV", "TEXT_PREFIX")
DIRECT_OUTPUTS = ("output_ids", "sequence_length")
BLS_OUTPUTS = ("TRANSCRIPTS",)


def contract_kind(declared: frozenset[str]) -> str | None:
    """'direct' or 'bls' by the inputs a Whisper deployment declares; None: neither."""
    if all(name in declared for name in DIRECT_REQUIRED):
        return "direct"
    if all(name in declared for name in BLS_REQUIRED):
        return "bls"
    return None


def _scalar(value: int | bool, dtype: type) -> np.ndarray[Any, Any]:
    return np.array([[value]], dtype=dtype)


def direct_arrays(
    features: np.ndarray[Any, Any],
    prompt: tuple[int, ...],
    max_new_tokens: int,
    end_id: int,
    stream: bool,
) -> dict[str, np.ndarray[Any, Any]]:
    """One window for the encoder-decoder model (``features``: fp16 ``[1, frames, n_mels]``)."""
    frames = int(features.shape[1])
    return {
        "encoder_input_features": features,
        "decoder_input_ids": np.array([prompt], np.int32),
        "request_output_len": _scalar(max_new_tokens, np.int32),
        "input_lengths": _scalar(frames, np.int32),
        "encoder_output_lengths": _scalar(frames // 2, np.int32),
        "decoder_input_lengths": _scalar(len(prompt), np.int32),
        "end_id": _scalar(end_id, np.int32),
        "pad_id": _scalar(end_id, np.int32),  # as NVIDIA's BLS sends
        "beam_width": _scalar(1, np.int32),
        "streaming": _scalar(stream, np.bool_),
        "exclude_input_in_output": _scalar(True, np.bool_),
    }


def bls_arrays(samples: np.ndarray[Any, Any], text_prefix: str) -> dict[str, np.ndarray[Any, Any]]:
    """``WAV`` ``[1, n]``, ``WAV_LENS`` ``[1, 1]`` and ``TEXT_PREFIX`` ``[1, 1]``."""
    wav = samples.astype(np.float32, copy=False)[None]
    return {
        "WAV": wav,
        "WAV_LENS": _scalar(wav.shape[1], np.int32),
        "TEXT_PREFIX": np.array([[text_prefix.encode("utf-8")]], dtype=np.object_),
    }


def output_ids(outputs: Mapping[str, np.ndarray[Any, Any]]) -> list[int]:
    """Beam 0's token ids, cut to ``sequence_length`` when the response carries it."""
    ids = outputs.get("output_ids")
    if ids is None or ids.size == 0:
        return []
    beam = ids.reshape(-1, ids.shape[-1])[0] if ids.ndim > 1 else ids
    lengths = outputs.get("sequence_length")
    if lengths is not None and lengths.size:
        beam = beam[: max(0, int(lengths.reshape(-1)[0]))]
    return [int(t) for t in beam]


def transcript_text(outputs: Mapping[str, np.ndarray[Any, Any]]) -> str | None:
    """The ``TRANSCRIPTS`` text of one ``whisper_bls`` response (None: not in this one)."""
    value = outputs.get("TRANSCRIPTS")
    if value is None or value.size == 0:
        return None
    text = value.reshape(-1)[0]
    return text.decode("utf-8", errors="replace") if isinstance(text, bytes) else str(text)


@dataclass(frozen=True)
class WindowOutput:
    """What one window produced: its token ids (direct) and its whole text."""

    tokens: tuple[int, ...]
    text: str
    generated: int  # tokens the decoder wrote (BLS: responses seen, one per token)


@dataclass
class DirectReader:
    """Token ids -> text pieces through an incremental UTF-8 decoder (a character split across
    tokens, as Chinese often is, comes out whole). ``echoed``: the prompt, for a deployment
    that repeats it in a non-streamed answer (no ``exclude_input_in_output`` to ask for)."""

    tokenizer: WhisperTokenizer
    echoed: tuple[int, ...] = ()
    tokens: int = 0
    _kept: list[int] = field(default_factory=list)
    _pieces: list[str] = field(default_factory=list)
    _ended: bool = False
    _decoder: codecs.IncrementalDecoder = field(
        default_factory=lambda: codecs.getincrementaldecoder("utf-8")(errors="replace")
    )

    def feed(self, outputs: Mapping[str, np.ndarray[Any, Any]]) -> str:
        ids = output_ids(outputs)
        if self.echoed and ids[: len(self.echoed)] == list(self.echoed):
            ids = ids[len(self.echoed) :]
        pieces: list[str] = []
        for token in ids:
            if self._ended:
                break
            self.tokens += 1
            self._ended = token == self.tokenizer.eot
            if not self._ended:
                self._kept.append(token)
                pieces.append(self._decoder.decode(self.tokenizer.token_bytes(token)))
        text = "".join(pieces)
        self._pieces.append(text)
        return text

    def close(self) -> WindowOutput:
        # The text is what was streamed: an unfinished character at the very end (a window
        # cut by max_tokens mid-character) is dropped, not written as U+FFFD.
        return WindowOutput(tuple(self._kept), "".join(self._pieces), self.tokens)


@dataclass
class BlsReader:
    """``whisper_bls``'s cumulative transcripts -> the growth of each as a piece."""

    tokens: int = 0
    _text: str = ""

    def feed(self, outputs: Mapping[str, np.ndarray[Any, Any]]) -> str:
        current = transcript_text(outputs)
        if current is None:
            return ""
        self.tokens += 1
        previous, self._text = self._text, current
        return current[len(previous) :] if current.startswith(previous) else current

    def close(self) -> WindowOutput:
        return WindowOutput((), self._text, self.tokens)


@dataclass
class LanguageReader:
    """The language Whisper guesses: the token it writes after ``<|startoftranscript|>``."""

    tokenizer: WhisperTokenizer
    echoed: tuple[int, ...] = ()
    tokens: int = 0
    _ids: list[int] = field(default_factory=list)

    def feed(self, outputs: Mapping[str, np.ndarray[Any, Any]]) -> str:
        ids = output_ids(outputs)
        if self.echoed and ids[: len(self.echoed)] == list(self.echoed):
            ids = ids[len(self.echoed) :]
        self._ids.extend(ids)
        return ""

    def close(self) -> str | None:
        return self.tokenizer.language_of(self._ids[0]) if self._ids else None
