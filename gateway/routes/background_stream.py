"""Streamed background responses (``background: true, stream: true``) and resuming them
(``GET /v1/responses/{id}?stream=true&starting_after=N``).

The run writes its stream's events, each with its ``sequence_number``, to the response store
(``EventLog``: batched every ``FLUSH_S``), so every gateway sharing the store can serve them.
A client, the one that created the response or any later one, reads the events after N from
the store and then follows the new ones (``follow``: polling every ``POLL_S``) until the
terminal event (``response.completed``, ``.incomplete``, ``.failed``); a response that ends
without one (cancelled) ends the stream once its status is final. A client that leaves
stops only its own reading: the run goes on. No follow outlives ``[upstream]
request_timeout_s``.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator

from fastapi.responses import Response, StreamingResponse

from gateway.errors import InvalidRequest, NotFound, StoreError, echoed
from gateway.observability.record import RequestRecord
from gateway.pipeline.relay import Prepared
from gateway.pipeline.responses_job import ResponseJob, stored
from gateway.routes.answer import SSE_HEADERS, relays
from gateway.runtime import Runtime
from gateway.store import ResponseStore
from gateway.store.base import UNFINISHED
from gateway.streaming.response_events import ResponseEvents, event_frame
from gateway.streaming.sse import first_item, stream_events

FLUSH_S = 0.1  # how long the run's events wait to be written together
POLL_S = 0.1  # how often a follower reads the store for new events
SETTLE_S = 1.0  # how long a follower waits for the last events once the response is final
TERMINAL = (b"event: response.completed", b"event: response.incomplete", b"event: response.failed")


class EventLog:
    """The run's SSE frames, split into events and written to the store in batches."""

    def __init__(self, store: ResponseStore, response_id: str) -> None:
        self.store, self.response_id = store, response_id
        self.pending: list[tuple[int, str]] = []
        self.flushed = time.monotonic()

    async def add(self, chunk: bytes) -> None:
        for frame in chunk.split(b"\n\n"):
            if frame.strip():
                data = frame.split(b"\ndata: ", 1)[1]
                self.pending.append((json.loads(data)["sequence_number"], frame.decode() + "\n\n"))
        if time.monotonic() - self.flushed >= FLUSH_S:
            await self.flush()

    async def flush(self) -> None:
        if self.pending:
            await self.store.add_events(self.response_id, self.pending)
            self.pending = []
        self.flushed = time.monotonic()


async def produce(
    job: ResponseJob, prepared: list[Prepared], runtime: Runtime, request_id: str,
    record: RequestRecord,
) -> None:  # fmt: skip
    """The run of a streamed background response: its events into the store."""
    log = EventLog(runtime.store, job.builder.id)
    events = stored(relays(prepared, request_id, record), job, runtime.store)
    try:
        first = await first_item(events)
        async for chunk in stream_events(first, events, ResponseEvents(job.builder)):
            await log.add(chunk)
    finally:
        await asyncio.shield(log.flush())  # what it has, even when cancelled


async def follow(
    runtime: Runtime, response_id: str, scope: str, after: int
) -> AsyncIterator[bytes]:
    """The response's events after ``after``, then the new ones, to its end."""
    store = runtime.store
    deadline = time.monotonic() + runtime.settings.upstream.request_timeout_s
    final_since: float | None = None
    while time.monotonic() < deadline:
        try:
            events = await store.events_after(response_id, scope, after)
            if not events and final_since is None:
                found = await store.get(response_id, scope)
                if found is None or found.response.get("status") not in UNFINISHED:
                    final_since = time.monotonic()
        except StoreError as exc:
            yield event_frame({"type": "error", "code": exc.code, "message": exc.message,
                               "param": None, "sequence_number": after + 1})  # fmt: skip
            return
        for sequence, frame in events or ():
            yield frame.encode()
            after = sequence
            if frame.encode().startswith(TERMINAL):
                return
        if events is None or (final_since and time.monotonic() - final_since > SETTLE_S):
            return
        await asyncio.sleep(POLL_S)


def stream_response(frames: AsyncIterator[bytes]) -> Response:
    return StreamingResponse(frames, media_type="text/event-stream", headers=SSE_HEADERS)


async def replay(runtime: Runtime, response_id: str, scope: str, raw_after: str | None) -> Response:
    """``GET /v1/responses/{id}?stream=true[&starting_after=N]``."""
    after = -1
    if raw_after is not None:
        if not raw_after.lstrip("-").isdigit() or int(raw_after) < -1:
            raise InvalidRequest("starting_after must be an event's sequence number",
                                 param="starting_after")  # fmt: skip
        after = int(raw_after)
    found = await runtime.store.get(response_id, scope)
    if found is None:
        raise NotFound(f"No response with id {echoed(response_id)} was found", param="response_id")
    if not found.response.get("background") or (
        not await runtime.store.events_after(response_id, scope, -1)
        and found.response.get("status") not in UNFINISHED
    ):
        raise InvalidRequest(
            "only a response created with background and stream can be streamed again",
            param="stream", code="unsupported_parameter",
        )  # fmt: skip
    return stream_response(follow(runtime, response_id, scope, after))
