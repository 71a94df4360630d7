"""The HTTP response that carries Server-Sent Events, stopped when the client goes away.

Starlette's ``StreamingResponse`` (for servers that speak ASGI HTTP below 2.4, uvicorn
included) runs each response in an anyio task group with two tasks, one streaming and one
waiting for ``http.disconnect``; in ``python -m bench hotpath`` that machinery was about a
quarter of the gateway's CPU per request. This does the same with two plain asyncio tasks:
the stream, and the disconnect watcher from ``disconnect.py``. Cancelling the stream
cancels the body iterator at its await, whose ``finally`` closes the Triton call.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Mapping

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from gateway.errors import shutdown_of
from gateway.streaming.disconnect import ClientDisconnected, DisconnectWatch


class EventStreamResponse(Response):
    """``text/event-stream`` from an async iterator of ready-encoded frames."""

    media_type = "text/event-stream"

    def __init__(
        self,
        frames: AsyncGenerator[bytes, None],
        headers: Mapping[str, str],
        watch: DisconnectWatch | None = None,
    ) -> None:
        self.frames = frames
        self.status_code = 200
        self.background = None
        self.init_headers(headers)
        self.watch = watch  # the request's own watch, when it has one already

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        watch = self.watch or DisconnectWatch(receive)
        try:
            await watch.run(self._stream(send))
        except ClientDisconnected:
            pass  # the stream was cancelled; its iterator closed the upstream call
        except OSError:
            pass  # the socket failed while writing: the client is gone as well
        finally:
            await watch.close()

    async def _stream(self, send: Send) -> None:
        frames = self.frames
        try:
            await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
            try:
                async for frame in frames:
                    await send({"type": "http.response.body", "body": frame, "more_body": True})
            except asyncio.CancelledError as cancel:
                # The graceful stop came while a frame was being written: the frames' writer
                # ends the stream its endpoint's way (``sse.stream_events``).
                shutdown = shutdown_of(cancel)
                if shutdown is None:
                    raise
                last = await frames.athrow(shutdown)
                await send({"type": "http.response.body", "body": last, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            await frames.aclose()
