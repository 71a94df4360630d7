"""Untrusted audio bytes -> mono float32 samples at 16 kHz, what speech models take.

The container is recognised by its magic bytes (WAV, MP3, Ogg, FLAC, WebM/Matroska, MP4/M4A)
and its demuxer named explicitly, as in ``video.py``; only common speech and music codecs are
decoded. FFmpeg's resampler (swresample) converts the rate, per channel; channels are then
averaged, which is what OpenAI's reference loader (``ffmpeg -ac 1``) gives for 16-bit
output and what Hugging Face pipelines do. (Asking swresample itself for mono in float would
sum channels at 0.707 each, which can clip.) The duration is checked from the header first,
then while decoding, so a lying header costs at most the limit.
Windowing into 30 s chunks and log-mel features are the model family's job. Synchronous: the
caller offloads it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from gateway.errors import MediaDecodeError, MediaError, MediaTooLarge, UnsupportedMedia
from gateway.media import limits
from gateway.media._av import av_errors, codec_ids, open_bytes, pyav

__all__ = ["AUDIO_CODECS", "SAMPLE_RATE", "AudioLimits", "decode_audio", "sniff_audio"]

SAMPLE_RATE = 16_000
AUDIO_CODECS = (
    *("pcm_s16le", "pcm_s16be", "pcm_s24le", "pcm_s32le", "pcm_f32le", "pcm_f64le", "pcm_u8"),
    *("pcm_mulaw", "pcm_alaw", "mp3", "aac", "vorbis", "opus", "flac"),
)
_SUPPORTED = "WAV, MP3, Ogg, FLAC, WebM or M4A"


@dataclass(frozen=True)
class AudioLimits:
    """What one audio clip may cost: encoded bytes and seconds of sound."""

    max_bytes: int = limits.DEFAULT_MAX_BYTES
    max_duration_s: float = limits.DEFAULT_MAX_AUDIO_DURATION_S


def sniff_audio(data: bytes) -> str | None:
    """The FFmpeg demuxer for ``data`` by its magic bytes, if it is a container we accept."""
    if data[:4] == b"RIFF" and data[8:12] == b"WAVE":
        return "wav"
    if data.startswith(b"ID3") or (len(data) > 1 and data[0] == 0xFF and data[1] & 0xE0 == 0xE0):
        return "mp3"
    if data.startswith(b"OggS"):
        return "ogg"
    if data.startswith(b"fLaC"):
        return "flac"
    if data.startswith(b"\x1a\x45\xdf\xa3"):
        return "matroska"
    if data[4:8] == b"ftyp":
        return "mov"
    return None


def decode_audio(data: bytes, limits: AudioLimits) -> np.ndarray[Any, Any]:
    """The first audio stream as mono float32 samples at 16 kHz, shape ``[samples]``.

    Raises UnsupportedMedia (container or codec not allowed), MediaTooLarge (bytes or
    seconds over ``limits``) or MediaDecodeError (empty, truncated, corrupt).
    """
    if not data:
        raise MediaDecodeError("The audio is empty (0 bytes).")
    if len(data) > limits.max_bytes:
        raise MediaTooLarge(
            f"The audio is {len(data)} bytes, over the limit of {limits.max_bytes} bytes."
        )
    demuxer = sniff_audio(data)
    if demuxer is None:
        raise UnsupportedMedia(f"The media is not a supported audio file ({_SUPPORTED}).")
    try:
        with open_bytes(data, demuxer, AUDIO_CODECS) as container:
            samples = _decode(container, limits)
    except MediaError:
        raise
    except av_errors() as exc:
        raise MediaDecodeError(
            "The audio could not be decoded: it is truncated or corrupt."
        ) from exc
    if samples.size == 0:
        raise MediaDecodeError("The audio holds no samples.")
    return samples


def _decode(container: Any, limits: AudioLimits) -> np.ndarray[Any, Any]:
    if not container.streams.audio:
        raise UnsupportedMedia("The media has no audio stream.")
    stream = container.streams.audio[0]
    if stream.codec_context.codec.id not in codec_ids(AUDIO_CODECS):
        raise UnsupportedMedia("The audio codec is not supported.")
    if container.duration is not None:
        _check_duration(container.duration / pyav().time_base, limits)
    max_samples = int(limits.max_duration_s * SAMPLE_RATE) + 1
    resampler = pyav().AudioResampler(format="fltp", rate=SAMPLE_RATE)  # channels kept
    chunks: list[np.ndarray[Any, Any]] = []
    total = 0
    for frame in container.decode(stream):
        for converted in resampler.resample(frame):
            chunks.append(_mono(converted))
            total += chunks[-1].size
        if total > max_samples:  # the header understated it: stop decoding here
            raise MediaTooLarge(
                f"The audio is longer than the limit of {limits.max_duration_s:g} s."
            )
    chunks.extend(_mono(converted) for converted in resampler.resample(None))
    samples = np.concatenate(chunks) if chunks else np.zeros(0, np.float32)
    _check_duration(samples.size / SAMPLE_RATE, limits)
    return samples.astype(np.float32, copy=False)


def _mono(frame: Any) -> np.ndarray[Any, Any]:
    """A planar float frame [channels, samples] -> the channel mean [samples]."""
    planes: np.ndarray[Any, Any] = frame.to_ndarray()
    mono: np.ndarray[Any, Any] = (
        planes[0] if planes.shape[0] == 1 else planes.mean(axis=0, dtype=np.float32)
    )
    return mono


def _check_duration(seconds: float, limits: AudioLimits) -> None:
    if seconds > limits.max_duration_s:
        raise MediaTooLarge(
            f"The audio is {seconds:.1f} s long, over the limit of {limits.max_duration_s:g} s."
        )
