"""Window planning: windows cover the clip exactly, fit the limit, and cut in the pauses."""

from __future__ import annotations

from itertools import pairwise

import numpy as np
import pytest

from gateway.families.whisper.windows import SAMPLE_RATE, plan_windows
from tests.audio_samples import speech_like


def test_short_audio_is_one_window() -> None:
    windows = plan_windows(np.ones(SAMPLE_RATE * 5, np.float32), 30.0)
    assert [(w.start, w.end) for w in windows] == [(0, SAMPLE_RATE * 5)]


@pytest.mark.parametrize(("seconds", "limit"), [(95.0, 30.0), (61.0, 10.0), (30.5, 30.0)])
def test_windows_tile_the_clip_within_the_limit(seconds: float, limit: float) -> None:
    samples = speech_like(seconds, seed=int(seconds))
    windows = plan_windows(samples, limit)
    assert windows[0].start == 0 and windows[-1].end == samples.size
    assert all(a.end == b.start for a, b in pairwise(windows))
    assert all(0 < w.duration_s <= limit for w in windows)
    assert [w.index for w in windows] == list(range(len(windows)))
    assert len(windows) <= int(seconds / (limit * 0.7)) + 1


def test_cuts_fall_in_the_quietest_stretch() -> None:
    loud = np.sin(np.arange(SAMPLE_RATE * 40) * 0.3).astype(np.float32)
    loud[SAMPLE_RATE * 25 : SAMPLE_RATE * 26] = 0.0  # a one-second pause at 25 s
    windows = plan_windows(loud, 30.0)
    assert 25.0 <= windows[0].end_s <= 26.0


def test_a_tiny_limit_is_refused() -> None:
    with pytest.raises(ValueError, match="at least"):
        plan_windows(np.zeros(10), 0.5)


def test_with_a_detector_the_cut_goes_in_its_longest_pause() -> None:
    loud = np.sin(np.arange(SAMPLE_RATE * 40) * 0.3).astype(np.float32)
    loud[SAMPLE_RATE * 25 : SAMPLE_RATE * 26] = 0.0  # the quietest moment by energy...
    # ...but the detector heard speech there, and a pause between 22 and 24 s
    speech = [(0, SAMPLE_RATE * 22), (SAMPLE_RATE * 24, SAMPLE_RATE * 40)]
    asked: list[int] = []

    def find_speech(stretch: np.ndarray) -> list[tuple[int, int]]:
        asked.append(stretch.size)  # the search range only: [21 s, 30 s)
        return [(max(0, a - 21 * SAMPLE_RATE), b - 21 * SAMPLE_RATE) for a, b in speech]

    windows = plan_windows(loud, 30.0, find_speech)
    assert 22.0 <= windows[0].end_s <= 24.0
    assert asked == [9 * SAMPLE_RATE]
    assert windows[-1].end == loud.size and all(w.duration_s <= 30 for w in windows)


def test_speech_filling_the_search_range_falls_back_to_the_quietest_moment() -> None:
    loud = np.sin(np.arange(SAMPLE_RATE * 40) * 0.3).astype(np.float32)
    loud[SAMPLE_RATE * 25 : SAMPLE_RATE * 26] = 0.0
    windows = plan_windows(loud, 30.0, lambda stretch: [(0, stretch.size)])
    assert 25.0 <= windows[0].end_s <= 26.0


def test_a_detector_that_hears_no_speech_leaves_the_quietest_moment() -> None:
    loud = np.sin(np.arange(SAMPLE_RATE * 40) * 0.3).astype(np.float32)
    loud[SAMPLE_RATE * 25 : SAMPLE_RATE * 26] = 0.0
    windows = plan_windows(loud, 30.0, lambda stretch: [])
    assert 25.0 <= windows[0].end_s <= 26.0


def test_one_window_asks_the_detector_nothing() -> None:
    def find_speech(stretch: np.ndarray) -> list[tuple[int, int]]:
        raise AssertionError("a clip of one window needs no cut")

    assert len(plan_windows(np.ones(SAMPLE_RATE * 20, np.float32), 30.0, find_speech)) == 1
