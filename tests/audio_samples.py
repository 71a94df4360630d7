"""Speech-like test clips made with numpy and encoded with PyAV: no downloads, no TTS.

"Syllables" are short harmonic bursts with a random pitch and a little noise; a few of them
make a "phrase", and phrases are separated by pauses of near silence, where a good splitter
should cut. Deterministic per seed.
"""

from __future__ import annotations

import io
from fractions import Fraction
from pathlib import Path

import av
import numpy as np

from tests.gateway.media.samples import encode_audio

RATE = 16_000


def _syllable(rng: np.random.Generator, rate: int) -> np.ndarray:
    length = int(rate * rng.uniform(0.12, 0.3))
    t = np.arange(length) / rate
    pitch = rng.uniform(110, 240)
    wave = sum(np.sin(2 * np.pi * pitch * k * t) / k for k in range(1, 5))
    wave = wave + 0.2 * rng.standard_normal(length)
    return (0.25 * wave * np.hanning(length)).astype(np.float32)


def speech_like(seconds: float, seed: int = 0, rate: int = RATE) -> np.ndarray:
    """Mono float32 ``[samples]``: phrases of 1.5-4 s separated by 0.4-0.9 s pauses."""
    rng = np.random.default_rng(seed)
    total = int(seconds * rate)
    pieces: list[np.ndarray] = []
    size = 0
    while size < total:
        phrase_end = size + int(rate * rng.uniform(1.5, 4.0))
        while size < phrase_end:
            pieces.append(_syllable(rng, rate))
            pieces.append(np.zeros(int(rate * rng.uniform(0.03, 0.08)), np.float32))
            size += pieces[-2].size + pieces[-1].size
        pause = np.zeros(int(rate * rng.uniform(0.4, 0.9)), np.float32)
        pieces.append(pause + 0.001 * rng.standard_normal(pause.size).astype(np.float32))
        size += pause.size
    return np.concatenate(pieces)[:total]


def encode(samples: np.ndarray, fmt: str = "wav", rate: int = RATE) -> bytes:
    """``samples`` (mono, at ``rate``) as a wav, mp3, ogg, flac, webm or m4a file."""
    if fmt == "m4a":
        return _encode_m4a(samples, rate)
    if fmt in ("ogg", "webm") and rate != 48_000:
        samples, rate = np.repeat(samples, 3), 48_000  # Opus wants 48 kHz; a crude upsample
    return encode_audio(samples[None], rate, fmt)


def _encode_m4a(samples: np.ndarray, rate: int) -> bytes:
    """AAC in an MP4 (``.m4a``) container."""
    buffer = io.BytesIO()
    with av.open(buffer, "w", format="ipod") as output:
        stream = output.add_stream("aac", rate=rate, layout="mono")
        for start in range(0, samples.size, 1024):
            chunk = np.ascontiguousarray(samples[None, start : start + 1024])
            frame = av.AudioFrame.from_ndarray(chunk, format="fltp", layout="mono")
            frame.sample_rate, frame.pts, frame.time_base = rate, start, Fraction(1, rate)
            output.mux(stream.encode(frame))
        output.mux(stream.encode())
    return buffer.getvalue()


SPOKEN_FILE = Path(__file__).parent / "speech_sample.flac"


def spoken() -> np.ndarray:
    """3.06 s of synthetic English speech, 16 kHz mono float32: "Live speech goes in, and the
    words come back." made with CMU Flite 2.2 (Debian's ``flite``; its voices are free to use
    and redistribute) and trimmed to the speech. Voice-activity detectors hear it as speech,
    which the harmonic bursts of ``speech_like`` are not meant to fool."""
    from gateway.media.audio import AudioLimits, decode_audio

    return decode_audio(SPOKEN_FILE.read_bytes(), AudioLimits())


def pcm24k(samples: np.ndarray) -> bytes:
    """16 kHz float32 samples as OpenAI's realtime ``audio/pcm``: 24 kHz 16-bit little-endian."""
    positions = np.arange(int(samples.size * 1.5)) / 1.5
    wide = np.interp(positions, np.arange(samples.size), samples)
    return (np.clip(wide, -1, 1) * 32767).astype("<i2").tobytes()
