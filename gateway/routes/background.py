"""Background responses (``background: true``): ``POST /v1/responses`` answers at once with
the response ``queued``, the generation runs detached from the HTTP request (at most
``[responses] max_background`` per process; it outlives the client), and ``GET
/v1/responses/{id}`` on any gateway sharing the store shows it ``in_progress``, then finished.
``POST /v1/responses/{id}/cancel`` on any gateway marks it ``cancelled`` in the store; the run
stops its Triton work at once when it runs on that gateway, otherwise within ``WATCH_S`` (its
watch of the store sees the mark).

When the process stops, a run is given the drain time to finish and is then cancelled and
recorded ``failed`` ("the gateway stopped"). A run whose process died without a word (killed)
is shown ``failed`` once it has been unfinished longer than any request may run
(``[upstream] request_timeout_s`` plus ``STALE_MARGIN_S``): never ``in_progress`` for ever.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from gateway.auth import key_id
from gateway.errors import GatewayError, InvalidRequest, NotFound, StoreError, echoed
from gateway.observability.record import RequestRecord
from gateway.pipeline.relay import Prepared
from gateway.pipeline.responses_job import ResponseJob, stored
from gateway.routes import background_stream, openapi
from gateway.routes.answer import collect, relays
from gateway.routes.state import RuntimeDep
from gateway.runtime import Runtime
from gateway.store import StoredResponse
from gateway.store.base import UNFINISHED

log = logging.getLogger(__name__)
router = APIRouter()

WATCH_S = 0.5  # how often a run reads the store for a cancel sent to another gateway
STALE_MARGIN_S = 60.0


async def start(
    job: ResponseJob, prepared: list[Prepared], runtime: Runtime, request_id: str,
    record: RequestRecord,
) -> Response:  # fmt: skip
    """Store the response ``queued``, start its run, answer the queued object."""
    runtime.background.check_room()
    queued = job.builder.snapshot("queued")
    await runtime.store.put(_row(job, queued))
    runtime.background.start(job.builder.id, _run(job, prepared, runtime, request_id, record))
    if job.request.stream:  # the events as the run writes them to the store
        frames = background_stream.follow(runtime, job.builder.id, job.scope, -1)
        return background_stream.stream_response(frames)
    return JSONResponse(queued)


def _row(job: ResponseJob, response: dict[str, Any]) -> StoredResponse:
    return StoredResponse(job.builder.id, job.scope, time.time(),
                          job.request.previous_response_id, response, job.input_items)  # fmt: skip


async def _run(
    job: ResponseJob, prepared: list[Prepared], runtime: Runtime, request_id: str,
    record: RequestRecord,
) -> None:  # fmt: skip
    store, builder = runtime.store, job.builder
    watch: asyncio.Task[None] | None = None
    try:
        if not await store.put(_row(job, builder.snapshot("in_progress")), keep_cancelled=True):
            return  # cancelled while queued
        watch = asyncio.create_task(_watch(runtime, job, asyncio.current_task()))
        if job.request.stream:
            await background_stream.produce(job, prepared, runtime, request_id, record)
        else:
            await collect(stored(relays(prepared, request_id, record), job, runtime.store))
    except asyncio.CancelledError:
        if not _cancelled_by_request(watch):  # the process is stopping
            failed = builder.failed(GatewayError("the gateway stopped before it finished"))
            with contextlib.suppress(GatewayError):
                await store.put(_row(job, failed), keep_cancelled=True)
    except GatewayError as exc:
        log.warning("background response %s failed: %s", builder.id, exc.message)
        with contextlib.suppress(GatewayError):
            await store.put(_row(job, builder.failed(exc)), keep_cancelled=True)
    finally:
        if watch is not None:
            watch.cancel()


_CANCELLED = "cancelled by request"


def _cancelled_by_request(watch: asyncio.Task[None] | None) -> bool:
    task = asyncio.current_task()
    if task is not None and getattr(task, "mmgw_cancel", None) == _CANCELLED:
        return True
    return watch is not None and watch.done() and not watch.cancelled()


async def _watch(runtime: Runtime, job: ResponseJob, run: asyncio.Task[Any] | None) -> None:
    """Cancel ``run`` once the store says the response was cancelled (from any gateway)."""
    while True:
        await asyncio.sleep(WATCH_S)
        try:
            found = await runtime.store.get(job.builder.id, job.scope)
        except StoreError:
            continue  # the store is away: keep running, look again
        if found is None or found.response.get("status") == "cancelled":
            if run is not None:
                run.cancel()
            return


def seen(found: StoredResponse, runtime: Runtime) -> dict[str, Any]:
    """A stored response as ``GET`` shows it: an unfinished background response older than
    any request may run belonged to a process that died, and is shown failed."""
    response = found.response
    limit = runtime.settings.upstream.request_timeout_s + STALE_MARGIN_S
    if response.get("status") in UNFINISHED and time.time() - found.created_at > limit:
        message = "the gateway running this background response stopped before it finished"
        return {**response, "status": "failed",
                "error": {"code": "server_error", "message": message}}  # fmt: skip
    return response


@router.post(
    "/v1/responses/{response_id}/cancel", response_model=None, openapi_extra=openapi.STORED
)
async def cancel_response(request: Request, response_id: str, runtime: RuntimeDep) -> Response:
    """Cancel a background response: it ends ``cancelled`` whichever gateway runs it; one
    that has finished is answered as it is."""
    found = await runtime.store.cancel(response_id, key_id(request.state))
    if found is None:
        raise NotFound(f"No response with id {echoed(response_id)} was found", param="response_id")
    if not found.response.get("background"):
        raise InvalidRequest("only background responses can be cancelled", param="response_id")
    task = runtime.background.tasks.get(response_id)
    if task is not None and found.response.get("status") == "cancelled":
        task.mmgw_cancel = _CANCELLED  # type: ignore[attr-defined]
        task.cancel()  # here: its Triton calls end now
    return JSONResponse(seen(found, runtime))
