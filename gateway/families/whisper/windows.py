"""Split long audio into windows an encoder can take, cutting where it is quietest.

Whisper hears 30 s at a time (less when its output budget is small: NVIDIA's BLS writes at most
50 tokens). Cutting blindly at the limit splits words, and a split word is lost or garbled on
both sides. So each cut is placed at the quietest moment (lowest short-time energy, smoothed
over 200 ms) in the last stretch before the limit; with no quiet moment there, the cut still
falls at the lowest-energy point found. When the caller asked for VAD chunking, a
voice-activity detector is passed in and asked about each search range, and the cut goes at
the quietest moment of the longest stretch it hears no speech in. Pure numpy, no model
knowledge beyond the lengths.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["Window", "plan_windows"]

SAMPLE_RATE = 16_000
_FRAME = 160  # 10 ms energy frames
_SMOOTH_FRAMES = 20  # 200 ms
SEARCH_FRACTION = 0.3  # look for the cut in the last 30% of a window
MIN_WINDOW_S = 1.0


@dataclass(frozen=True)
class Window:
    """Samples ``[start, end)`` of the clip."""

    index: int
    start: int
    end: int

    @property
    def start_s(self) -> float:
        return self.start / SAMPLE_RATE

    @property
    def end_s(self) -> float:
        return self.end / SAMPLE_RATE

    @property
    def duration_s(self) -> float:
        return (self.end - self.start) / SAMPLE_RATE


def _energy(samples: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Smoothed mean-square energy per 10 ms frame."""
    frames = samples.size // _FRAME
    power = np.square(samples[: frames * _FRAME].astype(np.float32)).reshape(frames, _FRAME)
    energy = power.mean(axis=1)
    kernel = np.ones(_SMOOTH_FRAMES, np.float32) / _SMOOTH_FRAMES
    return np.convolve(energy, kernel, mode="same")


def _longest_gap(speech: Sequence[tuple[int, int]], lo: int, hi: int) -> tuple[int, int] | None:
    """The longest stretch of ``[lo, hi)`` outside every speech span; None when speech fills
    it, or when the detector heard no speech there at all (it then has no opinion)."""
    if not speech:
        return None
    best: tuple[int, int] | None = None
    edge = lo
    for start, end in sorted(speech):
        if end <= edge:
            continue
        if start > edge and (best is None or min(start, hi) - edge > best[1] - best[0]):
            best = (edge, min(start, hi))
        edge = max(edge, end)
        if edge >= hi:
            break
    if edge < hi and (best is None or hi - edge > best[1] - best[0]):
        best = (edge, hi)
    return best


def plan_windows(
    samples: np.ndarray[Any, Any],
    max_window_s: float,
    find_speech: Callable[[np.ndarray[Any, Any]], Sequence[tuple[int, int]]] | None = None,
) -> list[Window]:
    """Consecutive windows covering ``samples`` exactly, none longer than ``max_window_s``.

    ``find_speech``: a voice-activity detector, asked where it hears speech in each cut's
    search range (spans within the stretch it is given); the cut then falls at the quietest
    moment of the longest stretch without speech there (of the whole range where speech
    fills it, or where it hears none). A clip of one window asks it nothing."""
    if max_window_s < MIN_WINDOW_S:
        raise ValueError(f"windows must be at least {MIN_WINDOW_S} s")
    total = int(samples.size)
    limit = int(max_window_s * SAMPLE_RATE) // _FRAME * _FRAME
    if total <= limit:
        return [Window(0, 0, total)]
    energy = _energy(samples)
    windows: list[Window] = []
    start = 0
    while total - start > limit:
        lo = start + int(limit * (1 - SEARCH_FRACTION))
        hi = start + limit
        if find_speech is not None:  # search the detector's longest pause instead
            speech = [(lo + a, lo + b) for a, b in find_speech(samples[lo:hi])]
            lo, hi = _longest_gap(speech, lo, hi) or (lo, hi)
        frames = energy[lo // _FRAME : hi // _FRAME]
        cut = lo + int(np.argmin(frames)) * _FRAME + _FRAME // 2 if frames.size else hi
        windows.append(Window(len(windows), start, cut))
        start = cut
    windows.append(Window(len(windows), start, total))
    return windows
