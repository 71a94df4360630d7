"""Each served Triton model's readiness, probed in the background, so new work is refused fast.

A Triton that is restarting, stopped or hung would otherwise take every new request and hold
it until a timeout. One task probes every Triton model the gateway serves (its server ready
and the model loaded: one model failing to load leaves the others served) every
``interval_s``, each probe bounded by the interval; until a probe passes again, requests for
that model get ``503 upstream_unavailable`` with ``Retry-After`` at once. Before the first
probe, and when no probing runs (tests that build a runtime by hand), a model counts as ready.

An answer of "not ready" (or a refused connection) counts at once. A probe that merely took
longer than its bound counts only after ``TIMEOUTS_TO_FAIL`` in a row (Kubernetes'
``failureThreshold`` is 3 too): a Triton busy with work answers its probes late, and refusing
every request to it for that would turn load into an outage; a hung one misses them all.

Calls already waiting on a Triton when it loses its readiness would otherwise wait for their
own silence limits (30 s between tokens, 120 s for a first token, by default). Each call in
flight ``listen``s to its Triton model's readiness, and is told at once when it is lost (the
relay then ends it: a 503 before its first byte, an error event after). That is a set
operation per call, nothing per token.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping, Sequence

from gateway.errors import UpstreamUnavailable
from gateway.triton.backend import TritonBackend

log = logging.getLogger(__name__)

TIMEOUTS_TO_FAIL = 3


class ReadinessWatch:
    """The last probe's verdict per Triton URL."""

    def __init__(self, backends: Mapping[str, tuple[TritonBackend, Sequence[str]]]) -> None:
        self.backends = backends  # url -> (backend, Triton model names served from it)
        self.ready: dict[tuple[str, str], bool] = {
            (url, model): True for url, (_, models) in backends.items() for model in models
        }
        self._task: asyncio.Task[None] | None = None
        self._late: dict[tuple[str, str], int] = {}  # probes in a row that took too long
        self._listeners: dict[tuple[str, str], set[Callable[[], None]]] = {}

    def is_ready(self, url: str, model: str) -> bool:
        return self.ready.get((url, model), True)

    def listen(self, url: str, model: str, lost: Callable[[], None]) -> Callable[[], None]:
        """Call ``lost()`` when the model loses its readiness (at once if it has); returns
        what stops listening."""
        key = (url, model)
        listeners = self._listeners.setdefault(key, set())
        listeners.add(lost)
        if not self.is_ready(url, model):
            lost()
        return lambda: listeners.discard(lost)

    def require(self, url: str, model: str) -> None:
        """Refuse at once when the model failed its last probe."""
        if not self.ready.get((url, model), True):
            raise UpstreamUnavailable("the inference server is not ready; retry shortly")

    async def probe(self, timeout_s: float) -> None:
        """Probe every served model once (concurrently), each within ``timeout_s``."""
        keys = list(self.ready)
        answers = await asyncio.gather(*(self._probe_one(key, timeout_s) for key in keys))
        for key, answer in zip(keys, answers, strict=True):
            late = self._late[key] = self._late.get(key, 0) + 1 if answer is None else 0
            ready = answer if answer is not None else late < TIMEOUTS_TO_FAIL and self.ready[key]
            if ready != self.ready.get(key):
                state = "ready again" if ready else "not ready"
                waiting = len(self._listeners.get(key, ()))
                ended = f"; ending the {waiting} call(s) waiting on it" if not ready else ""
                log.warning("Triton model %s at %s is %s%s", key[1], key[0], state, ended)
            self.ready[key] = ready
            if not ready:
                for lost in list(self._listeners.get(key, ())):
                    lost()

    async def _probe_one(self, key: tuple[str, str], timeout_s: float) -> bool | None:
        """The model's readiness, or None when the probe took longer than ``timeout_s``."""
        url, model = key
        backend, _ = self.backends[url]
        try:
            return await asyncio.wait_for(backend.is_ready([model]), timeout_s)
        except asyncio.TimeoutError:
            return None
        except OSError:
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
