"""Whisper (``WhisperForConditionalGeneration``) for the two reference Whisper models.

The tiny version keeps the geometry the contracts depend on: 80 mel bins, an encoder that takes
3000 frames (30 s) and, after its stride-2 convolution, attends over 1500 positions, and a
decoder with 448 positions. Widths and depths are tiny.

Its vocabulary is the 256 single bytes (GPT-2's byte order, no merges) followed by Whisper's
special tokens in their real order: ``<|endoftext|>``, ``<|startoftranscript|>``, 99 language
tokens, ``<|translate|>``, ``<|transcribe|>``, ``<|startoflm|>``, ``<|startofprev|>``,
``<|nospeech|>``, ``<|notimestamps|>`` and the 1501 timestamps ``<|0.00|>`` .. ``<|30.00|>``.
The real ``multilingual.tiktoken`` has 50257 ordinary tokens before the same list; only that
offset differs, so the gateway's tokenizer (tiktoken, vocabulary ``"bytes"``) and this one
(Hugging Face ``tokenizers``) are two independent builds of one table, checked against each
other in the tests.

Random weights would mostly emit special tokens (they are 86% of the vocabulary) and
unprintable bytes. The output projection is therefore untied and zeroed for every token except
the printable ASCII bytes and ``<|endoftext|>``; weights are drawn wide (``init_std`` 1.0) so
the sound, through cross-attention, visibly changes the text. The tiny model writes
meaningless printable text that differs per clip, and sometimes ends.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import (
    PretrainedConfig,
    PreTrainedModel,
    PreTrainedTokenizerBase,
    PreTrainedTokenizerFast,
    WhisperConfig,
    WhisperFeatureExtractor,
    WhisperForConditionalGeneration,
)
from transformers.models.whisper.tokenization_whisper import LANGUAGES

from server_repo.reference_kit.archs.base import Arch
from server_repo.reference_kit.tiny_tokenizer import _bytes_to_unicode

EOT = "<|endoftext|>"
SOT = "<|startoftranscript|>"
TIMESTAMPS = 1501
_PRINTABLE = (9, 10, *range(32, 127))


def whisper_special_tokens(num_languages: int) -> list[str]:
    """Whisper's special tokens in id order (as OpenAI's ``get_encoding`` appends them)."""
    return [
        EOT,
        SOT,
        *(f"<|{code}|>" for code in list(LANGUAGES)[:num_languages]),
        "<|translate|>",
        "<|transcribe|>",
        "<|startoflm|>",
        "<|startofprev|>",
        "<|nospeech|>",
        "<|notimestamps|>",
        *(f"<|{i * 0.02:.2f}|>" for i in range(TIMESTAMPS)),
    ]


def build_byte_tokenizer(num_languages: int) -> PreTrainedTokenizerFast:
    """The byte-level Whisper tokenizer: 256 byte tokens, then the special tokens."""
    vocab = {char: rank for rank, char in enumerate(_bytes_to_unicode().values())}
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.add_special_tokens(whisper_special_tokens(num_languages))
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        bos_token=EOT,
        eos_token=EOT,
        unk_token=EOT,
        pad_token=EOT,
        clean_up_tokenization_spaces=False,
        model_max_length=448,
    )


class WhisperArch(Arch):
    name: ClassVar[str] = "reference_whisper"
    family: ClassVar[str] = "whisper"
    model_class = WhisperForConditionalGeneration
    tiny_spec: ClassVar[dict[str, Any]] = {
        "d_model": 32,
        "ffn": 64,
        "encoder_layers": 1,
        "decoder_layers": 1,
        "heads": 2,
        "num_mel_bins": 80,
        "max_source_positions": 1500,
        "max_target_positions": 448,
        "languages": 99,
        "vocabulary": "bytes",
        "init_std": 1.0,
        "seed": 2024,
    }

    def build_tokenizer(self) -> PreTrainedTokenizerFast:
        return build_byte_tokenizer(self.tiny_spec["languages"])

    def tiny_config(self, tokenizer: PreTrainedTokenizerBase) -> PretrainedConfig:
        spec = self.tiny_spec
        eot = tokenizer.convert_tokens_to_ids(EOT)
        return WhisperConfig(
            vocab_size=len(tokenizer),
            num_mel_bins=spec["num_mel_bins"],
            d_model=spec["d_model"],
            encoder_layers=spec["encoder_layers"],
            decoder_layers=spec["decoder_layers"],
            encoder_attention_heads=spec["heads"],
            decoder_attention_heads=spec["heads"],
            encoder_ffn_dim=spec["ffn"],
            decoder_ffn_dim=spec["ffn"],
            max_source_positions=spec["max_source_positions"],
            max_target_positions=spec["max_target_positions"],
            pad_token_id=eot,
            bos_token_id=eot,
            eos_token_id=eot,
            decoder_start_token_id=tokenizer.convert_tokens_to_ids(SOT),
            suppress_tokens=None,
            begin_suppress_tokens=None,
            tie_word_embeddings=False,
            init_std=spec["init_std"],
        )

    def finish_tiny_model(self, model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> None:
        """Keep printable bytes and EOT in the output projection, zero every other row."""
        mapping = _bytes_to_unicode()
        keep = [tokenizer.convert_tokens_to_ids(mapping[b]) for b in _PRINTABLE]
        keep.append(tokenizer.convert_tokens_to_ids(EOT))
        with torch.no_grad():
            weight = model.get_output_embeddings().weight
            kept = weight[keep].clone()
            weight.zero_()
            weight[keep] = kept

    def save_processor(self, tokenizer: PreTrainedTokenizerBase, directory: Path) -> None:
        extractor = WhisperFeatureExtractor(feature_size=self.tiny_spec["num_mel_bins"])
        extractor.save_pretrained(directory)

    def load_processor(self, directory: Path) -> Any:
        return WhisperFeatureExtractor.from_pretrained(directory)
