"""A session's uncommitted audio: 16 kHz int16 chunks, placed on the session's audio clock.

OpenAI reports ``audio_start_ms`` and ``audio_end_ms`` from the start of all the audio written
during the session, so the buffer knows where its first sample sits on that clock
(``start``) and cuts by clock position. It holds at most ``max_samples``; an append that would
go past it is refused whole (the caller answers with an error and nothing is half-taken).
While server VAD listens to silence, everything older than the prefix padding is dropped
(``keep_last``), so a connected but silent session holds a fraction of a second of audio.
"""

from __future__ import annotations

from typing import Any

import numpy as np

SAMPLE_RATE = 16_000


class AudioBuffer:
    def __init__(self, max_samples: int) -> None:
        self.max_samples = max_samples
        self.start = 0  # the clock position of the first buffered sample
        self._chunks: list[np.ndarray[Any, Any]] = []
        self._size = 0

    @property
    def size(self) -> int:
        return self._size

    @property
    def end(self) -> int:
        """The clock position just after the last buffered sample."""
        return self.start + self._size

    def room_for(self, samples: int) -> bool:
        return self._size + samples <= self.max_samples

    def append(self, samples: np.ndarray[Any, Any]) -> None:
        if samples.size:
            self._chunks.append(samples)
            self._size += int(samples.size)

    def take(self, until: int | None = None) -> np.ndarray[Any, Any]:
        """The samples up to clock position ``until`` (all of them: None), removed."""
        whole = np.concatenate(self._chunks) if self._chunks else np.zeros(0, np.int16)
        cut = whole.size if until is None else max(0, min(whole.size, until - self.start))
        taken, rest = whole[:cut], whole[cut:]
        self.start += cut
        self._chunks, self._size = ([rest] if rest.size else []), int(rest.size)
        return taken

    def drop_before(self, position: int) -> None:
        """Forget what lies before clock position ``position``."""
        if position > self.start:
            self.take(position)

    def keep_last(self, samples: int) -> None:
        self.drop_before(self.end - samples)

    def clear(self) -> None:
        self.drop_before(self.end)


def to_ms(position: int) -> int:
    return position * 1000 // SAMPLE_RATE
