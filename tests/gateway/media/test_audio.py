"""decode_audio on sine waves encoded with PyAV: mono float32 at 16 kHz, allowlists, limits."""

from __future__ import annotations

import io

import av
import numpy as np
import pytest

from gateway.errors import MediaDecodeError, MediaTooLarge, UnsupportedMedia
from gateway.media.audio import SAMPLE_RATE, AudioLimits, decode_audio, sniff_audio
from tests.gateway.media.samples import encode_audio, sine

LIMITS = AudioLimits()


def dominant_hz(samples: np.ndarray) -> float:
    spectrum = np.abs(np.fft.rfft(samples))
    return float(np.argmax(spectrum) * SAMPLE_RATE / samples.size)


@pytest.mark.parametrize("fmt", ["wav", "mp3", "ogg", "flac", "webm"])
@pytest.mark.parametrize("channels", [1, 2])
def test_formats_decode_to_mono_16k_float32(fmt: str, channels: int) -> None:
    rate = 48_000 if fmt in ("ogg", "webm") else 44_100  # Opus runs at 48 kHz
    data = encode_audio(sine(1.0, rate, channels), rate, fmt)
    samples = decode_audio(data, LIMITS)
    assert samples.dtype == np.float32 and samples.ndim == 1
    assert abs(samples.size - SAMPLE_RATE) <= 0.02 * SAMPLE_RATE
    if channels == 1:
        assert dominant_hz(samples) == pytest.approx(440, abs=2)
        assert np.abs(samples).max() == pytest.approx(0.5, abs=0.05)


def test_lossless_resampling_matches_the_signal() -> None:
    samples = decode_audio(encode_audio(sine(1.0, 44_100), 44_100, "flac"), LIMITS)
    expected = sine(1.0, SAMPLE_RATE)[0]
    middle = slice(200, -200)  # the resampler's filter edges
    assert np.abs(samples[middle] - expected[middle]).max() < 2e-3


def test_downmix_is_the_channel_mean() -> None:
    left = sine(1.0, 16_000)[0]
    stereo = np.stack([left, -left])  # opposite phases cancel in a mean
    assert np.abs(decode_audio(encode_audio(stereo, 16_000, "wav"), LIMITS)).max() < 1e-3
    half = np.stack([left, np.zeros_like(left)])
    mono = decode_audio(encode_audio(half, 16_000, "wav"), LIMITS)
    assert np.abs(mono - left / 2).max() < 1e-3  # never 0.707 x (L + R), which can clip


@pytest.mark.parametrize("fmt", ["wav", "mp3"])
def test_too_long(fmt: str) -> None:
    data = encode_audio(sine(3.0, 16_000), 16_000, fmt)
    with pytest.raises(MediaTooLarge, match=r"s long, over the limit of 2 s") as caught:
        decode_audio(data, AudioLimits(max_duration_s=2))
    assert caught.value.code == "media_too_large"
    assert decode_audio(data, AudioLimits(max_duration_s=3.5)).size == pytest.approx(48_000, 0.02)


def test_a_lying_header_is_caught_while_decoding() -> None:
    """An MP3 whose Info header claims 3 frames (12 ms) but carries 3 s."""
    data = bytearray(encode_audio(sine(3.0, 16_000), 16_000, "mp3"))
    info = data.index(b"Info")
    data[info + 8 : info + 12] = (3).to_bytes(4, "big")  # the frame count field
    with av.open(io.BytesIO(bytes(data))) as container:
        assert container.duration < 100_000  # under 0.1 s, as declared
    with pytest.raises(MediaTooLarge, match="longer than the limit of 2 s"):
        decode_audio(bytes(data), AudioLimits(max_duration_s=2))


def test_unsupported_containers_and_codecs() -> None:
    assert sniff_audio(b"hello") is None
    with pytest.raises(UnsupportedMedia, match="not a supported audio file") as caught:
        decode_audio(b"#EXTM3U\nhttp://169.254.169.254/a.mp3\n", LIMITS)
    assert caught.value.code == "unsupported_media_type"
    buffer = io.BytesIO()  # ADPCM in WAV: a real codec, but not on the list
    with av.open(buffer, "w", format="wav") as output:
        stream = output.add_stream("adpcm_ms", rate=16_000, layout="mono")
        frame = av.AudioFrame.from_ndarray(np.zeros((1, 2048), np.int16), "s16", layout="mono")
        frame.sample_rate = 16_000
        output.mux(stream.encode(frame))
        output.mux(stream.encode())
    with pytest.raises(UnsupportedMedia, match="audio codec is not supported"):
        decode_audio(buffer.getvalue(), LIMITS)


def test_empty_and_corrupt() -> None:
    with pytest.raises(MediaDecodeError, match="empty"):
        decode_audio(b"", LIMITS)
    with pytest.raises(MediaDecodeError, match="truncated or corrupt") as caught:
        decode_audio(b"RIFF\0\0\0\0WAVEfmt ", LIMITS)
    assert caught.value.code == "invalid_media"
    with pytest.raises(MediaTooLarge):
        decode_audio(b"RIFF" + bytes(200), AudioLimits(max_bytes=100))
