"""Each Triton's readiness, probed in the background, so new work is refused fast.

A Triton that is restarting, stopped or hung would otherwise take every new request and hold
it until a timeout. One task probes every Triton (server ready, and its served models loaded)
every ``interval_s``, each probe bounded by the interval; until a probe passes again, requests
for its models get ``503 upstream_unavailable`` with ``Retry-After`` at once. Before the first
probe, and when no probing runs (tests that build a runtime by hand), a Triton counts as ready.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping, Sequence

from gateway.errors import UpstreamUnavailable
from gateway.triton.backend import TritonBackend

log = logging.getLogger(__name__)


class ReadinessWatch:
    """The last probe's verdict per Triton URL."""

    def __init__(self, backends: Mapping[str, tuple[TritonBackend, Sequence[str]]]) -> None:
        self.backends = backends  # url -> (backend, Triton model names served from it)
        self.ready: dict[str, bool] = dict.fromkeys(backends, True)
        self._task: asyncio.Task[None] | None = None

    def require(self, url: str) -> None:
        """Refuse at once when ``url``'s Triton failed its last probe."""
        if not self.ready.get(url, True):
            raise UpstreamUnavailable("the inference server is not ready; retry shortly")

    async def probe(self, timeout_s: float) -> None:
        """Probe every Triton once (concurrently), each within ``timeout_s``."""
        urls = list(self.backends)
        verdicts = await asyncio.gather(*(self._probe_one(url, timeout_s) for url in urls))
        for url, ready in zip(urls, verdicts, strict=True):
            if ready != self.ready.get(url):
                log.warning("Triton at %s is %s", url, "ready again" if ready else "not ready")
            self.ready[url] = ready

    async def _probe_one(self, url: str, timeout_s: float) -> bool:
        backend, models = self.backends[url]
        try:
            return await asyncio.wait_for(backend.is_ready(models), timeout_s)
        except (asyncio.TimeoutError, OSError):
            return False

    def start(self, interval_s: float) -> None:
        async def forever() -> None:
            while True:
                await self.probe(interval_s)
                await asyncio.sleep(interval_s)

        if self._task is None:
            self._task = asyncio.ensure_future(forever())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
