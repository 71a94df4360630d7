"""Ends a relay whose Triton has gone silent, at no cost per token.

One timer per request, and nothing per token: the timer wakes every half gap-limit and
compares the relay's token count (which the relay keeps anyway) with what it saw last time.
If the first token, the gap since the last progress or the whole request has run past its
limit, it cancels the reading task, and the relay turns that cancellation into
``UpstreamTimeout`` (a client's own disconnect stays a plain cancellation). So a Triton that
is hung (stopped, deadlocked) or whose connection silently died ends every stream with an
error between one and one and a half limits after its last token.

A Triton that loses its readiness (``triton/readiness.py``) need not be waited for that long:
``lost()`` ends the request at once, with ``upstream_unavailable`` (503 before the first byte,
an error event after), as a Triton that does not answer its probes will not answer this call.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from gateway.config import Timeouts
from gateway.errors import GatewayError, UpstreamTimeout, UpstreamUnavailable

__all__ = ["SilenceWatch", "Timeouts"]

LOST = "stopped answering its readiness probes"


class SilenceWatch:
    """Watches one request's stream from ``start()`` until ``stop()``.

    ``progress`` reads the relay's token count. The request is read by one task from its
    arrival to its last byte (``routes/answer.py``), the one ``start()`` runs in.
    """

    def __init__(self, timeouts: Timeouts, progress: Callable[[], int]) -> None:
        self.timeouts = timeouts
        self.progress = progress
        self.task: asyncio.Task[object] | None = None
        self.fired: str | None = None  # why it cancelled, once it has
        self._loop = asyncio.get_running_loop()
        self._started = self._progress_at = 0.0
        self._seen = 0
        self._handle: asyncio.TimerHandle | None = None

    def start(self) -> None:
        self._started = self._progress_at = self._loop.time()
        self.task = asyncio.current_task()
        self._arm()

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def lost(self) -> None:
        """The Triton this request waits on lost its readiness: end the request now."""
        if self.fired is not None or self.task is None or self.task.done():
            return
        self.fired = LOST
        self.stop()
        self.task.cancel()

    def timeout_error(self) -> GatewayError:
        message = f"the inference server {self.fired}; the request was ended"
        if self.fired == LOST:
            return UpstreamUnavailable(message + "; retry shortly")
        return UpstreamTimeout(message)

    def _arm(self) -> None:
        limits = self.timeouts
        period = limits.token_s / 2  # the first-token limit is checked on these wake-ups too
        wake = min(self._loop.time() + period, self._started + limits.request_s)
        self._handle = self._loop.call_at(wake, self._check)

    def _verdict(self, now: float) -> str | None:
        limits = self.timeouts
        if now >= self._started + limits.request_s:
            return "ran past the request deadline"
        if self._seen == 0:
            silent = now >= self._started + limits.first_token_s
            return "sent no first token in time" if silent else None
        if now >= self._progress_at + limits.token_s:
            return "went silent between tokens"
        return None

    def _check(self) -> None:
        now = self._loop.time()
        tokens = self.progress()
        if tokens != self._seen:
            self._seen, self._progress_at = tokens, now
        self.fired = self._verdict(now)
        if self.fired is None:
            self._arm()
            return
        self._handle = None
        if self.task is not None and not self.task.done():
            self.task.cancel()


def as_timeout(watch: SilenceWatch | None) -> GatewayError | None:
    """The error a cancellation stands for, when the watch caused it (then the task's
    cancellation is taken back, so only the error travels on)."""
    if watch is None or watch.fired is None:
        return None
    task = asyncio.current_task()
    uncancel = getattr(task, "uncancel", None)  # Python 3.11+
    if uncancel is not None:
        uncancel()
    return watch.timeout_error()
