"""One replica's health: what its readiness probes say, and what its requests said.

Two sources, kept apart so neither hides the other:

- the probe (``probed``): the server answers ready with the model loaded, or not. A replica
  whose probe fails is out until a probe passes; a probe that passes again after failing puts
  it back at once (a restarted server rejoins within one probe interval);
- passive detection (``failed``): a request that could not reach the server (connection
  refused, ``UNAVAILABLE``, a deadline) takes the replica out for a backoff that doubles with
  each failure in a row (capped); once the backoff has passed the replica is tried again, and
  one success (``succeeded``) resets it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

DEFAULT_EJECT_BACKOFF_S = 1.0
MAX_EJECT_BACKOFF_S = 30.0


@dataclass
class Health:
    backoff_s: float = DEFAULT_EJECT_BACKOFF_S
    probe_ok: bool = True  # before the first probe a replica counts as ready
    failures: int = 0  # request failures in a row
    ejected_until: float = 0.0  # time.monotonic()
    ejections: int = 0

    def available(self, now: float | None = None) -> bool:
        now = time.monotonic() if now is None else now
        return self.probe_ok and now >= self.ejected_until

    def failed(self, now: float | None = None) -> float:
        """A request could not reach the server: out for the next backoff (returned)."""
        now = time.monotonic() if now is None else now
        self.failures += 1
        self.ejections += 1
        pause: float = min(MAX_EJECT_BACKOFF_S, self.backoff_s * 2 ** (self.failures - 1))
        self.ejected_until = now + pause
        return pause

    def succeeded(self) -> bool:
        """A request reached the server; True when it ends a run of failures."""
        recovered = self.failures > 0
        self.failures = 0
        return recovered

    def probed(self, ready: bool) -> bool:
        """Record a probe; True when it changed the verdict."""
        changed = ready != self.probe_ok
        if ready and not self.probe_ok:
            # The server came back (restarted): the backoff earned while it was down is over.
            self.failures = 0
            self.ejected_until = 0.0
        self.probe_ok = ready
        return changed
