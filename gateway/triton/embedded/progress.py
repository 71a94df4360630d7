"""How far the co-launched Triton is with loading its models, reported while the user waits.

The first start generates the reference weights and every start loads the Python models:
tens of seconds on a small machine, which with Triton's output kept out of the gateway's
(``output.py``) would be silence. Triton opens its HTTP and gRPC endpoints only once every
model is loaded, so the count comes from its output instead, which names each model as it
starts loading it (``loading: reference_llava:1``) and when it is done (``successfully loaded
'reference_llava'``). The launcher reads what was added to the file since the last look and
logs one line whenever the count of loaded models moved, at most every ``INTERVAL_S``, and
again every ``HEARTBEAT_S`` while it does not (a first start generating the reference
weights is said so).
"""

from __future__ import annotations

import logging
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger("gateway.triton.embedded")

INTERVAL_S = 2.0
HEARTBEAT_S = 10.0
_GENERATING = "generating tiny reference weights"
_LOADING = re.compile(r'"loading: ([^":]+):\d+"')
_LOADED = re.compile(r"\"successfully loaded '([^']+)'")


@dataclass
class LoadProgress:
    """Models Triton started loading and finished loading, read from its output file."""

    output: Path
    interval_s: float = INTERVAL_S
    heartbeat_s: float = HEARTBEAT_S
    loading: set[str] = field(default_factory=set)
    loaded: set[str] = field(default_factory=set)
    generating: bool = False
    _started: float = field(default_factory=time.monotonic)
    _offset: int = 0
    _partial: str = ""
    _reported: int = -1
    _reported_at: float = float("-inf")

    def summary(self) -> str:
        total = len(self.loading | self.loaded)
        return f"{len(self.loaded)} of {total} models loaded" if total else "no model loading yet"

    def _line(self, now: float) -> str:
        first = "; generating the tiny reference weights (first start only)"
        return (
            f"loading the embedded models: {self.summary()} ({now - self._started:.0f} s)"
            f"{first if self.generating else ''}"
        )

    def read(self) -> None:
        """Take in the lines written since the last call."""
        try:
            with self.output.open("rb") as file:
                file.seek(self._offset)
                data = file.read()
        except OSError:
            return
        self._offset += len(data)
        text = self._partial + data.decode("utf-8", errors="replace")
        *lines, self._partial = text.split("\n")
        for line in lines:
            if match := _LOADING.search(line):
                self.loading.add(match.group(1))
            elif match := _LOADED.search(line):
                self.loaded.add(match.group(1))
            elif _GENERATING in line:
                self.generating = True

    def report(self) -> None:
        """Read, and log a line when the count moved (at most every ``interval_s``) or
        nothing was said for ``heartbeat_s``."""
        self.read()
        now = time.monotonic()
        if not self.loading:
            return
        since = now - self._reported_at
        moved = len(self.loaded) != self._reported
        if (moved and since >= self.interval_s) or since >= self.heartbeat_s:
            self._reported, self._reported_at = len(self.loaded), now
            log.info(self._line(now))
