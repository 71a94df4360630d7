"""A replica's health: passive ejection with doubling backoff, probes that re-admit."""

from __future__ import annotations

from gateway.triton.replicas.health import MAX_EJECT_BACKOFF_S, Health


def test_failures_eject_for_a_doubling_capped_backoff_and_success_resets_it() -> None:
    health = Health(backoff_s=1.0)
    assert health.available(now=0.0)
    assert [health.failed(now=0.0) for _ in range(3)] == [1.0, 2.0, 4.0]
    assert not health.available(now=3.9) and health.available(now=4.0)
    for _ in range(10):
        health.failed(now=0.0)
    assert health.ejected_until == MAX_EJECT_BACKOFF_S
    health.succeeded()
    assert health.failed(now=100.0) == 1.0
    assert health.ejections == 14


def test_a_failing_probe_takes_it_out_and_a_passing_one_brings_it_back_at_once() -> None:
    health = Health(backoff_s=1.0)
    for _ in range(5):
        health.failed(now=0.0)  # ejected for 16 s
    assert health.probed(False) and not health.available(now=100.0)
    assert not health.probed(False)  # no change, nothing to log
    assert health.probed(True)  # a restarted server: the backoff it earned is over
    assert health.available(now=0.1)
