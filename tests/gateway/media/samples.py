"""Small media files generated with PyAV for tests: no downloads, a few ms each."""

from __future__ import annotations

import io
import math
from fractions import Fraction

import av
import numpy as np

VIDEO_FORMATS = {"libx264": "mp4", "libvpx-vp9": "webm", "libvpx": "webm", "mpeg4": "mp4"}


BITS = 6  # frame numbers up to 63


def frame_pattern(index: int, width: int, height: int) -> np.ndarray:
    """Frame ``index``: its number in binary as black/white cells along the bottom third, and a
    white top-left marker, on grey, so a decoded (even scaled) frame tells which one it was."""
    frame = np.full((height, width, 3), 128, np.uint8)
    frame[: height // 4, : width // 4] = 255
    frame[: height // 4, width // 4 :] = 0
    for bit in range(BITS):
        cell = slice(bit * width // BITS, (bit + 1) * width // BITS)
        frame[2 * height // 3 :, cell] = 255 if index >> bit & 1 else 0
    return frame


def encode_video(
    frames: int = 20,
    size: tuple[int, int] = (64, 48),
    fps: int = 10,
    codec: str = "libx264",
    gop: int | None = None,
    container: str | None = None,
    options: dict[str, str] | None = None,
) -> bytes:
    """A ``frames``-frame video whose frame i is ``frame_pattern(i)``; ``options`` go to the
    encoder (``{"bf": "2"}``: B-frames)."""
    width, height = size
    buffer = io.BytesIO()
    with av.open(buffer, "w", format=container or VIDEO_FORMATS[codec]) as output:
        stream = output.add_stream(codec, rate=fps)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        stream.bit_rate = 2_000_000  # high enough that VP8 keeps every grey level apart
        stream.options = {**({"g": str(gop)} if gop is not None else {}), **(options or {})}
        for index in range(frames):
            image = av.VideoFrame.from_ndarray(frame_pattern(index, width, height), "rgb24")
            output.mux(stream.encode(image))
        output.mux(stream.encode())
    return buffer.getvalue()


def frame_index(frame: np.ndarray) -> int:
    """Which ``frame_pattern`` a decoded frame is, read from the middle of each bit cell."""
    height, width = frame.shape[:2]
    band = frame[5 * height // 6]
    bits = [band[(2 * bit + 1) * width // (2 * BITS)].mean() > 128 for bit in range(BITS)]
    return sum(1 << bit for bit, on in enumerate(bits) if on)


def sine(seconds: float, rate: int = 44_100, channels: int = 1, hz: float = 440.0) -> np.ndarray:
    """float32 [channels, samples]; channel c at ``hz * (c + 1)``, amplitude 0.5."""
    t = np.arange(int(seconds * rate)) / rate
    waves = [0.5 * np.sin(2 * math.pi * hz * (c + 1) * t) for c in range(channels)]
    return np.asarray(waves, dtype=np.float32)


AUDIO_CODECS = {
    "wav": ("pcm_s16le", "s16"),
    "mp3": ("libmp3lame", "fltp"),
    "ogg": ("libopus", "flt"),
    "flac": ("flac", "s16"),
    "webm": ("libopus", "flt"),
}


def encode_audio(samples: np.ndarray, rate: int = 44_100, fmt: str = "wav") -> bytes:
    """Encode float32 [channels, samples] with PyAV into ``fmt`` (wav, mp3, ogg, flac, webm)."""
    codec, sample_format = AUDIO_CODECS[fmt]
    channels = samples.shape[0]
    layout = {1: "mono", 2: "stereo"}[channels]
    if fmt in ("webm", "ogg") and rate not in (8000, 12000, 16000, 24000, 48000):
        raise ValueError("Opus takes 8, 12, 16, 24 or 48 kHz")
    buffer = io.BytesIO()
    with av.open(buffer, "w", format=fmt) as output:
        stream = output.add_stream(codec, rate=rate, layout=layout)
        stream.format = sample_format
        frame_size = 1152 if fmt == "mp3" else 960 if fmt in ("webm", "ogg") else 1024
        resampler = av.AudioResampler(format=sample_format, layout=layout, rate=rate)
        for start in range(0, samples.shape[1], frame_size):
            chunk = np.ascontiguousarray(samples[:, start : start + frame_size])
            frame = av.AudioFrame.from_ndarray(chunk, format="fltp", layout=layout)
            frame.sample_rate, frame.pts, frame.time_base = rate, start, Fraction(1, rate)
            for converted in resampler.resample(frame):
                output.mux(stream.encode(converted))
        output.mux(stream.encode())
    return buffer.getvalue()
