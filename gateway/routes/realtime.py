"""``/v1/realtime``: OpenAI's Realtime transcription sessions over a WebSocket.

Thin, like every route: refusals happen before the upgrade is accepted (an unknown or
non-speech ``?model=``: 404/400; too many sessions: 429; shutting down: 503; the API key is
the middleware's, ``auth.py``), then two loops move messages: client events into the session
(``pipeline/realtime/session.py``) and its outbox onto the socket. A connection that goes
away cancels its session's Triton work at once; one that sends nothing (and waits for nothing)
for ``idle_timeout_s`` is closed (1000).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging

from fastapi import APIRouter, WebSocket
from fastapi.responses import JSONResponse
from starlette.websockets import WebSocketDisconnect

from gateway.auth import key_id
from gateway.errors import GatewayError, InvalidRequest
from gateway.media.vad import vad_available
from gateway.pipeline.realtime import speech
from gateway.pipeline.realtime.config import SERVER_VAD, SessionConfig
from gateway.pipeline.realtime.outbox import NORMAL, Close, Outbox
from gateway.pipeline.realtime.registry import Sessions
from gateway.pipeline.realtime.session import RealtimeSession
from gateway.routes.state import RuntimeDep
from gateway.runtime import Runtime

router = APIRouter()
log = logging.getLogger("gateway.access")  # one line per session, beside the request lines

WRITER_GRACE_S = 2.0  # a writer stuck on a client that does not read, once the session closes
BROWSER_PROTOCOL = "realtime"  # offered by browsers with the key as a second subprotocol


@router.websocket("/v1/realtime")
async def realtime(websocket: WebSocket, runtime: RuntimeDep) -> None:
    sessions = sessions_of(websocket)
    owner = key_id(websocket.state) or (websocket.client.host if websocket.client else "")
    try:
        config = await _opening_config(websocket, runtime)
        sessions.admit(owner)
    except GatewayError as exc:
        await _refuse(websocket, exc)
        return
    try:
        offered = websocket.scope.get("subprotocols", [])
        await websocket.accept(BROWSER_PROTOCOL if BROWSER_PROTOCOL in offered else None)
        outbox = Outbox(runtime.settings.realtime.max_pending_events)
        session = RealtimeSession(
            runtime, runtime.settings.realtime, runtime.metrics.realtime, config, outbox
        )
        async with sessions.holding(session):
            await _serve(websocket, session)
        log.info("realtime session", extra={"fields": session.log_fields()})
    finally:
        sessions.release(owner)


def sessions_of(websocket: WebSocket) -> Sessions:
    """The app's session registry (``app.py``: its caps, finished on SIGTERM)."""
    sessions = websocket.app.state.realtime_sessions
    if not isinstance(sessions, Sessions):
        raise RuntimeError("the app has no realtime session registry")
    return sessions


async def _opening_config(websocket: WebSocket, runtime: Runtime) -> SessionConfig:
    """The session as the URL sets it up (``?model=``; ``intent=transcription`` is implied),
    with the served model checked."""
    if not runtime.settings.realtime.enabled:
        raise InvalidRequest("realtime sessions are turned off on this server",
                             code="realtime_disabled")  # fmt: skip
    query = websocket.query_params
    intent = query.get("intent", "transcription")
    if intent != "transcription":
        raise InvalidRequest(
            f"intent '{intent}' is not served: this endpoint serves transcription sessions",
            param="intent",
            code="unsupported_session_type",
        )
    model = query.get("model") or speech.default_model(runtime.models)
    config = SessionConfig(model=model, turn_detection=SERVER_VAD if vad_available() else None)
    if model is not None:
        await speech.check(runtime, config)
    return config


async def _refuse(websocket: WebSocket, error: GatewayError) -> None:
    """An HTTP error response instead of the upgrade (a close before accepting, on a server
    without the denial-response extension)."""
    headers = {"Retry-After": str(error.retry_after_s)} if error.retry_after_s else None
    response = JSONResponse(error.to_body(), status_code=error.status_code, headers=headers)
    if "websocket.http.response" in websocket.scope.get("extensions", {}):
        await websocket.send_denial_response(response)
    else:
        await websocket.close(1008, error.message[:120])


async def _serve(websocket: WebSocket, session: RealtimeSession) -> None:
    session.start()
    reader = asyncio.create_task(_read(websocket, session))
    writer = asyncio.create_task(_write(websocket, session.outbox))
    closed = asyncio.create_task(session.outbox.closed.wait())
    try:
        await asyncio.wait({reader, writer, closed}, return_when=asyncio.FIRST_COMPLETED)
        if not writer.done() and session.outbox.closing is not None:
            await asyncio.wait({writer}, timeout=WRITER_GRACE_S)
    finally:
        for task in (reader, writer, closed):
            task.cancel()
        await asyncio.gather(reader, writer, closed, return_exceptions=True)
        await session.aclose()  # cancels an utterance still in flight, and its Triton calls
        closing = session.outbox.closing
        sent = not writer.cancelled() and writer.exception() is None and writer.result()
        if closing is not None and not sent:  # the writer was stuck on a client not reading
            with contextlib.suppress(Exception):
                await websocket.close(closing.code, closing.reason)


async def _read(websocket: WebSocket, session: RealtimeSession) -> None:
    """Client events into the session until the client leaves or goes idle."""
    idle_s = session.limits.idle_timeout_s
    while session.outbox.closing is None:
        try:
            message = await asyncio.wait_for(websocket.receive(), timeout=idle_s)
        except asyncio.TimeoutError:
            if session.busy:
                continue
            session.outbox.close(NORMAL, f"idle for {idle_s:g} s")
            return
        if message["type"] == "websocket.disconnect":
            return
        data = message.get("text")
        await session.handle(data if data is not None else message.get("bytes") or b"")


async def _write(websocket: WebSocket, outbox: Outbox) -> bool:
    """The session's events onto the socket, in order, then its close (True: sent)."""
    try:
        while True:
            item = await outbox.get()
            if isinstance(item, Close):
                await websocket.close(item.code, item.reason)
                return True
            await websocket.send_text(json.dumps(item, ensure_ascii=False))
    except (WebSocketDisconnect, RuntimeError, OSError):
        return True  # the client is gone: nothing to close
