"""The sessions one gateway process holds: their caps, and the graceful stop of all of them.

A session is admitted only under both caps (``max_sessions`` in all, ``max_sessions_per_key``
per API key, or per client address when no keys are configured); a refusal is a 429 before the
WebSocket is accepted. On SIGTERM (``drain.py``) no new session is admitted (503) and every
open one is asked to finish: its committed utterances end, then it closes with 1012.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from gateway.config.realtime import RealtimeSettings
from gateway.errors import RateLimited, UpstreamUnavailable
from gateway.observability.realtime_metrics import RealtimeMetrics
from gateway.pipeline.realtime.session import RealtimeSession


class Sessions:
    def __init__(self, limits: RealtimeSettings, metrics: RealtimeMetrics) -> None:
        self.limits = limits
        self.metrics = metrics
        self.open: set[RealtimeSession] = set()
        self.per_key: Counter[str] = Counter()
        self.draining = False

    def admit(self, owner: str) -> None:
        """Take a place for ``owner``'s new session, or refuse it (429, or 503 when stopping)."""
        if self.draining:
            self.metrics.sessions.labels("shutting_down").inc()
            raise UpstreamUnavailable("the server is shutting down", code="server_shutting_down")
        if sum(self.per_key.values()) >= self.limits.max_sessions:
            self.metrics.sessions.labels("server_full").inc()
            raise RateLimited(
                f"this server holds {self.limits.max_sessions} realtime sessions already; retry "
                "shortly",
                code="too_many_sessions",
            )
        if self.per_key[owner] >= self.limits.max_sessions_per_key:
            self.metrics.sessions.labels("key_full").inc()
            raise RateLimited(
                f"this API key has {self.limits.max_sessions_per_key} realtime sessions open "
                "already; close one first",
                code="too_many_sessions",
            )
        self.per_key[owner] += 1
        self.metrics.sessions.labels("accepted").inc()
        self.metrics.sessions_open.inc()

    def release(self, owner: str) -> None:
        self.per_key[owner] -= 1
        if self.per_key[owner] <= 0:
            del self.per_key[owner]
        self.metrics.sessions_open.dec()

    @asynccontextmanager
    async def holding(self, session: RealtimeSession) -> AsyncIterator[RealtimeSession]:
        """``session`` counted as open (for ``finish_all``) while the block runs."""
        self.open.add(session)
        try:
            yield session
        finally:
            self.open.discard(session)

    async def finish_all(self, timeout_s: float) -> None:
        """Refuse new sessions; let the open ones finish their utterances, for at most
        ``timeout_s`` (those still busy then are closed by the server's own shutdown)."""
        self.draining = True
        if not self.open:
            return
        finishing = [asyncio.ensure_future(s.finish()) for s in list(self.open)]
        _, late = await asyncio.wait(finishing, timeout=max(0.0, timeout_s))
        for task in late:
            task.cancel()
        for session in list(self.open):  # past the deadline: close without the transcript
            session.outbox.close(1012, "server shutting down")
