"""Text bookkeeping on the token path: cumulative-to-delta, stop strings, stripped joins.

Triton's stop words act on token ids, so a stop string that straddles token boundaries
or was tokenised differently can slip through. The gateway checks the text itself, holds
back only the tail that could still become a stop string, and truncates at the match.
"""

from __future__ import annotations

from collections.abc import Sequence


class CumulativeToDelta:
    """Turns 'full text so far' responses (BLS accumulate_tokens) into deltas."""

    def __init__(self) -> None:
        self._seen = ""

    def __call__(self, text: str) -> str:
        # A server that revised earlier text (rare) gets its whole text re-sent.
        delta = text[len(self._seen) :] if text.startswith(self._seen) else text
        self._seen = text
        return delta


class StopMatcher:
    """Feeds text through, stopping at the first occurrence of any stop string."""

    def __init__(self, stops: Sequence[str]) -> None:
        self._stops = tuple(s for s in stops if s)
        self._longest = max((len(s) for s in self._stops), default=0)
        self._pending = ""
        self.stopped = False

    def feed(self, text: str) -> str:
        """The text safe to emit now; sets ``stopped`` when a stop string matched."""
        if not self._stops:
            return text
        if self.stopped:
            return ""
        buffer = self._pending + text
        cut = min((i for i in (buffer.find(s) for s in self._stops) if i >= 0), default=-1)
        if cut >= 0:
            self.stopped = True
            self._pending = ""
            return buffer[:cut]
        hold = self._holdback(buffer)
        self._pending = buffer[len(buffer) - hold :] if hold else ""
        return buffer[: len(buffer) - hold]

    def flush(self) -> str:
        """Whatever was held back, once the stream has ended without a match."""
        rest, self._pending = self._pending, ""
        return "" if self.stopped else rest

    def _holdback(self, buffer: str) -> int:
        """Length of the longest suffix of ``buffer`` that is a proper prefix of a stop."""
        for size in range(min(len(buffer), self._longest - 1), 0, -1):
            tail = buffer[-size:]
            if any(stop.startswith(tail) for stop in self._stops):
                return size
        return 0


class StrippedDeltas:
    """Deltas of a text that must come out stripped at both ends, pieces joined by one space.

    Leading whitespace is dropped; trailing whitespace is held back until more text follows
    (so the deltas joined equal the final, stripped text). ``separate()`` marks where a new
    window starts: one space, emitted only if text came before and comes after.
    """

    def __init__(self, separator: str = " ") -> None:
        self._separator = separator
        self._held = ""
        self._started = False
        self._at_boundary = True

    def feed(self, piece: str) -> str:
        if self._at_boundary:
            piece = piece.lstrip()
            if not piece:
                return ""
            self._at_boundary = False
        buffer = self._held + piece
        body = buffer.rstrip()
        self._held = buffer[len(body) :]
        self._started = self._started or bool(body)
        return body

    def separate(self) -> None:
        """A new piece (window) starts: its leading whitespace goes, one space joins it."""
        self._at_boundary = True
        self._held = self._separator if self._started else ""
