"""Ends a relay whose Triton has gone silent, at almost no cost per token.

One timer per request, not one per token: each token only notes the time (and which task is
reading, since a streamed answer is read by one task up to its first token and by another
after). When the timer fires it checks how long the stream has been silent; if the first
token, the gap since the last one or the whole request has run past its limit, it cancels the
reading task, and the relay turns that cancellation into ``UpstreamTimeout`` (a client's own
disconnect stays a plain cancellation). A Triton that is hung (stopped, deadlocked) or whose
connection silently died therefore ends every stream with an error within the limits.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from gateway.config import UpstreamSettings
from gateway.errors import UpstreamTimeout


@dataclass(frozen=True)
class Timeouts:
    first_token_s: float
    token_s: float
    request_s: float

    @classmethod
    def of(cls, upstream: UpstreamSettings) -> Timeouts:
        return cls(
            upstream.first_token_timeout_s, upstream.token_timeout_s, upstream.request_timeout_s
        )


class SilenceWatch:
    """Watches one request's stream from ``start()`` until ``stop()``."""

    def __init__(self, timeouts: Timeouts) -> None:
        self.timeouts = timeouts
        self.fired: str | None = None  # why it cancelled, once it has
        self._loop = asyncio.get_running_loop()
        self._started = self._last = 0.0
        self._tokens = 0
        self._task: asyncio.Task[object] | None = None
        self._handle: asyncio.TimerHandle | None = None

    def start(self) -> None:
        self._started = self._last = self._loop.time()
        self._task = asyncio.current_task()
        self._arm(self._started + min(self.timeouts.first_token_s, self.timeouts.request_s))

    def token(self) -> None:
        """A token arrived (called once per token: keep it cheap)."""
        self._last = self._loop.time()
        self._tokens += 1
        if self._tokens == 1 and self._handle is not None:  # from now on, the gap limit
            self._handle.cancel()
            self._arm(self._due()[0])

    def reading(self) -> None:
        """The stream is read by the current task from now on."""
        self._task = asyncio.current_task()

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def timeout_error(self) -> UpstreamTimeout:
        return UpstreamTimeout(f"the inference server {self.fired}; the request was ended")

    def _due(self) -> tuple[float, str]:
        limits = self.timeouts
        if self._tokens == 0:
            silent = (self._started + limits.first_token_s, "sent no first token in time")
        else:
            silent = (self._last + limits.token_s, "went silent between tokens")
        deadline = (self._started + limits.request_s, "ran past the request deadline")
        return min(silent, deadline)

    def _arm(self, when: float) -> None:
        self._handle = self._loop.call_at(when, self._check)

    def _check(self) -> None:
        due, why = self._due()
        if self._loop.time() < due:
            self._arm(due)
            return
        self.fired = why
        self._handle = None
        if self._task is not None and not self._task.done():
            self._task.cancel()


def as_timeout(watch: SilenceWatch | None) -> UpstreamTimeout | None:
    """The error a cancellation stands for, when the watch caused it (then the task's
    cancellation is taken back, so only the error travels on)."""
    if watch is None or watch.fired is None:
        return None
    task = asyncio.current_task()
    uncancel = getattr(task, "uncancel", None)  # Python 3.11+
    if uncancel is not None:
        uncancel()
    return watch.timeout_error()
