"""Raw audio as the Realtime API sends it -> 16 kHz mono int16, one chunk at a time.

OpenAI's realtime formats (``openai/types/realtime/realtime_audio_formats.py``): ``audio/pcm``
(16-bit little-endian mono at 24 kHz, the only rate the type allows), ``audio/pcmu`` (G.711
mu-law) and ``audio/pcma`` (G.711 A-law), both 8 kHz. Speech models and the voice-activity
detector take 16 kHz, so each appended chunk is converted as it arrives: no container, no
decoder process, a few numpy operations per chunk.

The conversions are streams: a chunk may end mid-sample (an odd byte count) or mid-group of the
resampler (24 kHz -> 16 kHz takes three samples to make two), and what is left over waits for
the next chunk, so the result does not depend on how the client cut its audio.
24 kHz -> 16 kHz is linear interpolation at the 1.5-sample step (the sample, then the mean of
the next two); 8 kHz -> 16 kHz puts the mean of each pair between them. Both are what the
cheap resamplers of the field do for speech; Whisper's own loader uses FFmpeg's, which the
uploaded files here still go through (``audio.py``).
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np

__all__ = ["FORMATS", "PcmFormat", "PcmStream"]

PcmFormat = Literal["audio/pcm", "audio/pcmu", "audio/pcma"]
FORMATS: dict[PcmFormat, int] = {"audio/pcm": 24_000, "audio/pcmu": 8_000, "audio/pcma": 8_000}
TARGET_RATE = 16_000


def _mulaw_table() -> np.ndarray[Any, Any]:
    """ITU-T G.711 mu-law: each of the 256 codes as a 16-bit sample."""
    codes = ~np.arange(256, dtype=np.int32) & 0xFF
    sign, exponent, mantissa = codes & 0x80, (codes >> 4) & 0x07, codes & 0x0F
    magnitude = (((mantissa << 3) + 0x84) << exponent) - 0x84
    return np.where(sign != 0, -magnitude, magnitude).astype(np.int16)


def _alaw_table() -> np.ndarray[Any, Any]:
    """ITU-T G.711 A-law: each of the 256 codes as a 16-bit sample."""
    codes = np.arange(256, dtype=np.int32) ^ 0x55
    sign, exponent, mantissa = codes & 0x80, (codes >> 4) & 0x07, codes & 0x0F
    magnitude = np.where(
        exponent == 0, (mantissa << 4) + 8, ((mantissa << 4) + 0x108) << (exponent - 1)
    )
    return np.where(sign != 0, magnitude, -magnitude).astype(np.int16)


_TABLES = {"audio/pcmu": _mulaw_table(), "audio/pcma": _alaw_table()}


class PcmStream:
    """One session's audio in ``fmt``, converted chunk by chunk to 16 kHz int16."""

    def __init__(self, fmt: PcmFormat) -> None:
        self.format = fmt
        self.rate = FORMATS[fmt]
        self._odd_byte = b""  # PCM16: half a sample
        self._pending = np.zeros(0, np.int16)  # samples waiting for the rest of their group

    @property
    def bytes_per_second(self) -> int:
        return self.rate * (2 if self.format == "audio/pcm" else 1)

    def feed(self, data: bytes) -> np.ndarray[Any, Any]:
        """The 16 kHz samples ``data`` completes (int16; possibly empty)."""
        samples = self._samples(data)
        if self.rate == 24_000:
            return self._from_24k(samples)
        return self._from_8k(samples)

    def reset(self) -> None:
        """Forget a partial sample or group (the buffer was cleared)."""
        self._odd_byte, self._pending = b"", np.zeros(0, np.int16)

    def _samples(self, data: bytes) -> np.ndarray[Any, Any]:
        if self.format == "audio/pcm":
            data = self._odd_byte + data
            whole = len(data) - len(data) % 2
            self._odd_byte = data[whole:]
            return np.frombuffer(data[:whole], dtype="<i2").astype(np.int16)
        return _TABLES[self.format][np.frombuffer(data, dtype=np.uint8)]

    def _from_24k(self, samples: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        samples = np.concatenate([self._pending, samples])
        groups = samples.size // 3
        self._pending = samples[groups * 3 :]
        triples = samples[: groups * 3].reshape(groups, 3).astype(np.int32)
        out = np.empty((groups, 2), np.int32)
        out[:, 0] = triples[:, 0]
        out[:, 1] = (triples[:, 1] + triples[:, 2]) // 2
        return out.reshape(-1).astype(np.int16)

    def _from_8k(self, samples: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        samples = np.concatenate([self._pending, samples])
        if samples.size < 2:
            self._pending = samples
            return np.zeros(0, np.int16)
        self._pending = samples[-1:]  # its midpoint needs the next sample
        wide = samples.astype(np.int32)
        out = np.empty((samples.size - 1, 2), np.int32)
        out[:, 0] = wide[:-1]
        out[:, 1] = (wide[:-1] + wide[1:]) // 2
        return out.reshape(-1).astype(np.int16)
