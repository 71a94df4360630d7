"""The reference Whisper engine, its tokenizer, and the parsing of both Triton contracts."""

from __future__ import annotations

import numpy as np
import pytest

from gateway.families.whisper.mel import log_mel
from gateway.families.whisper.tokens import load_tokenizer
from server_repo.reference_kit.archs.whisper import build_byte_tokenizer, whisper_special_tokens
from server_repo.reference_kit.request import InvalidRequest
from server_repo.reference_kit.whisper import DEFAULT_PREFIX, Decoding, WhisperEngine
from server_repo.reference_kit.whisper_triton import (
    BLS_MAX_NEW_TOKENS,
    Limits,
    ids_outputs,
    parse_bls,
    parse_direct,
)
from tests.audio_samples import speech_like


def test_reference_tokenizer_and_gateway_bytes_vocabulary_agree() -> None:
    """Two independent builds (Hugging Face tokenizers here, tiktoken in the gateway)."""
    reference = build_byte_tokenizer(99)
    gateway = load_tokenizer("bytes", 99)
    assert len(reference) == gateway.encoding.n_vocab == 256 + len(whisper_special_tokens(99))
    for token in ("<|endoftext|>", "<|startoftranscript|>", "<|en|>", "<|su|>", "<|translate|>",
                  "<|transcribe|>", "<|startofprev|>", "<|notimestamps|>", "<|0.00|>",
                  "<|12.34|>", "<|30.00|>"):  # fmt: skip
        assert reference.convert_tokens_to_ids(token) == gateway.special(token), token
    for text in (" Hello, world!", "Grüße, 你好 ~\n\t", "<|en|> is text here"):
        ids = reference(text, add_special_tokens=False, split_special_tokens=True)["input_ids"]
        assert ids == gateway.encode(text)
        assert gateway.decode(ids) == text == reference.decode(ids)


def _mel(seed: int, seconds: float = 4.0) -> np.ndarray:
    return log_mel(speech_like(seconds, seed))


def test_greedy_is_deterministic_and_depends_on_the_sound(whisper_engine: WhisperEngine) -> None:
    prompt = whisper_engine.encode_prefix(DEFAULT_PREFIX)
    first = whisper_engine.complete(_mel(1), prompt, 20)
    assert first == whisper_engine.complete(_mel(1), prompt, 20)
    assert first != whisper_engine.complete(_mel(2), prompt, 20)
    assert 1 <= len(first) <= 20
    assert whisper_engine.transcript(first).isprintable()


def test_the_prompt_steers_the_decoder(whisper_engine: WhisperEngine) -> None:
    mel = _mel(3)
    transcribe = whisper_engine.encode_prefix(DEFAULT_PREFIX)
    translate = whisper_engine.encode_prefix(
        "<|startoftranscript|><|de|><|translate|><|notimestamps|>"
    )
    assert whisper_engine.complete(mel, transcribe, 12) != whisper_engine.complete(
        mel, translate, 12
    )


def test_seeded_sampling_replays(whisper_engine: WhisperEngine) -> None:
    prompt = whisper_engine.encode_prefix(DEFAULT_PREFIX)
    decoding = Decoding(16, temperature=1.0, top_p=1.0, seed=7)
    runs = [list(whisper_engine.generate(_mel(4), prompt, decoding)) for _ in range(2)]
    assert runs[0] == runs[1]


def test_features_pad_to_30_s_and_refuse_longer(whisper_engine: WhisperEngine) -> None:
    samples = speech_like(3.0, 5)
    features = whisper_engine.features(samples)
    assert features.shape == (80, 3000)
    # Hugging Face's extractor and the gateway's numpy recipe agree.
    assert np.abs(features - log_mel(samples)).max() < 1e-3
    with pytest.raises(InvalidRequest, match="30 s"):
        whisper_engine.features(np.zeros(480_001, np.float32))


def test_prompt_plus_output_must_fit_the_decoder(whisper_engine: WhisperEngine) -> None:
    with pytest.raises(InvalidRequest, match="positions"):
        whisper_engine.generate(_mel(1), [257] * 40, Decoding(420))


def _direct(**overrides: np.ndarray) -> dict[str, np.ndarray]:
    mel = log_mel(speech_like(2.0, 9)).T[None].astype(np.float16)
    tensors = {
        "encoder_input_features": mel,
        "input_lengths": np.array([[3000]], np.int32),
        "encoder_output_lengths": np.array([[1500]], np.int32),
        "decoder_input_ids": np.array([[257, 258, 358, 362]], np.int32),
        "request_output_len": np.array([[30]], np.int32),
        "streaming": np.array([[True]]),
    }
    return {**tensors, **overrides}


def test_parse_direct_reads_the_tensorrt_llm_inputs() -> None:
    job = parse_direct(_direct(runtime_top_k=np.array([[1]], np.int32)), Limits(), 80)
    assert job.features.shape == (80, 3000) and job.features.dtype == np.float32
    assert job.prompt == [257, 258, 358, 362] and job.stream and job.exclude_input
    assert job.decoding.max_new_tokens == 30 and job.decoding.top_k == 1


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"input_lengths": np.array([[2999]], np.int32)}, "input_lengths"),
        ({"encoder_output_lengths": np.array([[3000]], np.int32)}, "encoder_output_lengths"),
        ({"decoder_input_ids": np.zeros((1, 65), np.int32)}, "decoder_input_ids"),
        ({"request_output_len": np.array([[190]], np.int32)}, "max_seq_len"),
        ({"encoder_input_features": np.zeros((1, 3000, 128), np.float16)}, "80"),
    ],
)
def test_parse_direct_refuses_what_the_engine_was_not_built_for(
    overrides: dict[str, np.ndarray], message: str
) -> None:
    with pytest.raises(InvalidRequest, match=message):
        parse_direct(_direct(**overrides), Limits(), 80)


def test_parse_bls_cuts_to_wav_lens_and_defaults_the_prefix() -> None:
    wav = np.arange(100, dtype=np.float32)[None]
    job = parse_bls(
        {"WAV": wav, "WAV_LENS": np.array([[60]], np.int32), "TEXT_PREFIX": np.array([[b""]])},
        stream=True,
    )
    assert job.samples.size == 60 and job.prefix == DEFAULT_PREFIX and job.stream
    with pytest.raises(InvalidRequest, match="WAV_LENS"):
        parse_bls({"WAV": wav, "WAV_LENS": np.array([[101]], np.int32),
                   "TEXT_PREFIX": np.array([[b""]])}, stream=False)  # fmt: skip


def test_output_ids_have_a_beam_dimension() -> None:
    outputs = ids_outputs([5, 6, 7])
    assert outputs["output_ids"].shape == (1, 1, 3)
    assert outputs["sequence_length"].tolist() == [[3]]
    assert BLS_MAX_NEW_TOKENS == 50
