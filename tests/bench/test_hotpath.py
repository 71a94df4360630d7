"""``bench hotpath --idle-ms``: one request's wall time and the part before its Triton call,
back to back and after an idle gap."""

from __future__ import annotations

import math

from bench.hotpath import time_idle


def test_the_idle_figure_times_one_request_each_way() -> None:
    figures = time_idle(20.0, samples=3)
    assert list(figures) == [
        "app, one request's wall time, back to back",
        "app, to the Triton call, back to back",
        "app, one request's wall time, after 20 ms idle",
        "app, to the Triton call, after 20 ms idle",
    ]
    # A request through the whole app (middleware, route, relay, SSE) takes some tens of
    # microseconds at the very least, and well under a second here.
    assert all(math.isfinite(us) and 20.0 < us < 1_000_000 for us in figures.values())
    walls, to_call = list(figures.values())[::2], list(figures.values())[1::2]
    assert all(0 < part < whole for part, whole in zip(to_call, walls, strict=True))
