"""The Whisper family: contract resolution, decoder prompts, window lengths, segments."""

from __future__ import annotations

import pytest

from gateway.errors import ClientError, InvalidRequest, UpstreamUnavailable
from gateway.families.base import Conversation, Turn
from gateway.families.registry import get_family
from gateway.families.whisper import Whisper, WhisperOptions
from gateway.families.whisper.family import resolve
from gateway.families.whisper.prompt import (
    Segment,
    bls_prefix,
    decoder_prompt,
    segments,
    text_of,
)
from gateway.families.whisper.tokens import load_tokenizer

TOKENS = load_tokenizer("bytes", 99)


def contract(*names: str) -> frozenset[str]:
    return frozenset(names)


DIRECT = contract("encoder_input_features", "decoder_input_ids", "request_output_len")
BLS = contract("WAV", "WAV_LENS", "TEXT_PREFIX")


def test_registered_and_refuses_text_only_chat() -> None:
    family = get_family("whisper")
    assert isinstance(family, Whisper) and family.required_inputs == ()
    with pytest.raises(InvalidRequest) as caught:
        family.check_conversation(Conversation(None, (Turn("user", "hi"),)))
    assert caught.value.code == "audio_required"
    with pytest.raises(ClientError) as caught:
        family.check_conversation(Conversation(None, (Turn("user", "hi", audios=2),)))
    assert caught.value.code == "too_many_media_items"


def test_contract_is_read_from_the_declared_inputs_unless_configured() -> None:
    assert resolve(WhisperOptions(), DIRECT, "m").contract == "direct"
    assert resolve(WhisperOptions(), BLS, "m").contract == "bls"
    assert resolve(WhisperOptions(contract="bls"), DIRECT, "m").contract == "bls"
    with pytest.raises(UpstreamUnavailable, match="neither Whisper contract"):
        resolve(WhisperOptions(), contract("text_input", "max_tokens"), "m")


def test_languages_follow_the_mel_bins() -> None:
    assert resolve(WhisperOptions(), DIRECT, "m").num_languages == 99
    assert resolve(WhisperOptions(n_mels=128), DIRECT, "m").num_languages == 100
    assert resolve(WhisperOptions(languages=100), DIRECT, "m").num_languages == 100


def test_windows_fit_the_output_budget() -> None:
    assert resolve(WhisperOptions(), BLS, "m").window_s() == 10.0  # 50 tokens at 5 per second
    nvidia = resolve(WhisperOptions(), DIRECT, "m")  # max_seq_len 114: 110 new tokens
    assert nvidia.window_s() == 22.0 and nvidia.max_new_tokens(4) == 110
    roomy = resolve(WhisperOptions(max_sequence_tokens=448), DIRECT, "m")
    assert roomy.window_s() == 30.0
    assert resolve(WhisperOptions(window_s=12), BLS, "m").window_s() == 12


def test_decoder_prompt_layout() -> None:
    real = load_tokenizer("multilingual", 99)
    assert decoder_prompt(real, "en", "transcribe", False, None, 14) == [50258, 50259, 50359, 50363]
    assert decoder_prompt(real, "de", "translate", True, None, 14) == [50258, 50261, 50358]


def test_previous_text_keeps_its_end_within_the_prompt_budget() -> None:
    prompt = decoder_prompt(TOKENS, "en", "transcribe", False, "abcdefghij", 10)
    assert prompt[0] == TOKENS.special("<|startofprev|>")
    assert len(prompt) == 10 and TOKENS.decode(prompt[1:6]) == "fghij"
    assert prompt[-4:] == decoder_prompt(TOKENS, "en", "transcribe", False, None, 10)
    # NVIDIA's 14-token engines leave room for a few context tokens only; 5 leaves none.
    assert decoder_prompt(TOKENS, "en", "transcribe", False, "abc", 5)[0] == TOKENS.sot


def test_bls_prefix() -> None:
    assert bls_prefix("fr", "translate") == (
        "<|startoftranscript|><|fr|><|translate|><|notimestamps|>"
    )


def ts(seconds: float) -> int:
    return TOKENS.timestamp_begin + round(seconds / 0.02)


def words(text: str) -> list[int]:
    return TOKENS.encode(text)


def test_segments_from_timestamp_pairs() -> None:
    tokens = [ts(0), *words(" one"), ts(1.5), ts(1.5), *words(" two"), ts(3.2), TOKENS.eot]
    assert segments(tokens, TOKENS, 10.0) == [
        Segment(0.0, 1.5, " one", tuple(words(" one"))),
        Segment(1.5, 3.2, " two", tuple(words(" two"))),
    ]
    assert text_of(tokens, TOKENS) == " one two"


def test_unterminated_text_runs_to_the_window_end_and_no_timestamps_is_one_segment() -> None:
    found = segments([ts(2.0), *words(" tail")], TOKENS, 7.5)
    assert [(s.start, s.end, s.text) for s in found] == [(2.0, 7.5, " tail")]
    plain = segments([*words(" all of it"), TOKENS.eot, *words("after")], TOKENS, 4.0)
    assert [(s.start, s.end, s.text) for s in plain] == [(0.0, 4.0, " all of it")]


def test_stray_timestamps_never_go_backwards_or_past_the_window() -> None:
    tokens = [ts(5.0), *words(" a"), ts(3.0), *words(" b"), ts(29.0), ts(1.0), *words(" c")]
    found = segments(tokens, TOKENS, 8.0)
    times = [(s.start, s.end) for s in found]
    assert times == [(5.0, 5.0), (5.0, 8.0), (8.0, 8.0)]
    assert all(s.start <= s.end <= 8.0 for s in found)


def test_specials_and_empty_segments_are_dropped() -> None:
    tokens = [TOKENS.sot, ts(0), ts(1.0), *words("  "), ts(2.0), *words(" x"), ts(3.0)]
    assert [(s.start, s.end, s.text) for s in segments(tokens, TOKENS, 5.0)] == [(2.0, 3.0, " x")]
