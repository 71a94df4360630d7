"""pipeline/realtime/buffer.py: audio on the session's clock."""

from __future__ import annotations

import numpy as np

from gateway.pipeline.realtime.buffer import AudioBuffer, to_ms


def ramp(start: int, size: int) -> np.ndarray:
    return np.arange(start, start + size, dtype=np.int16)


def test_take_cuts_by_clock_position_and_the_clock_goes_on() -> None:
    buffer = AudioBuffer(max_samples=1000)
    buffer.append(ramp(0, 300))
    buffer.append(ramp(300, 300))
    assert buffer.take(until=250).tolist() == list(range(250))
    assert (buffer.start, buffer.end, buffer.size) == (250, 600, 350)
    assert buffer.take().tolist() == list(range(250, 600))
    assert (buffer.start, buffer.size) == (600, 0)


def test_keep_last_drops_older_audio_but_not_the_clock() -> None:
    buffer = AudioBuffer(max_samples=1000)
    buffer.append(ramp(0, 800))
    buffer.keep_last(100)
    assert (buffer.start, buffer.size) == (700, 100)
    assert buffer.take().tolist() == list(range(700, 800))


def test_room_is_counted_against_the_cap() -> None:
    buffer = AudioBuffer(max_samples=500)
    buffer.append(ramp(0, 400))
    assert buffer.room_for(100) and not buffer.room_for(101)
    assert to_ms(16_000) == 1000
