"""pipeline/realtime/outbox.py: a client that does not read is closed, not waited for."""

from __future__ import annotations

from gateway.pipeline.realtime.outbox import Close, Outbox


async def test_events_come_out_in_order_then_the_close() -> None:
    outbox = Outbox(limit=8)
    outbox.put({"n": 1})
    outbox.put({"n": 2})
    outbox.close(1012, "server shutting down")
    outbox.put({"n": 3})  # after the close: dropped
    assert [await outbox.get() for _ in range(3)] == [
        {"n": 1}, {"n": 2}, Close(1012, "server shutting down")
    ]  # fmt: skip
    assert outbox.closed.is_set() and outbox.pending() == 0


async def test_past_the_limit_the_outbox_closes_with_1008() -> None:
    outbox = Outbox(limit=16)
    for n in range(20):
        outbox.put({"n": n})
    assert outbox.closing == Close(1008, "client is not reading its events")
    assert outbox.pending() == 17  # 16 events and the close; nothing grows past it
