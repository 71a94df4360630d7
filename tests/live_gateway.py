"""A real gateway listening on a loopback port, in the test's own event loop."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import uvicorn

from gateway.app import create_app
from gateway.config import Settings
from gateway.triton.embedded import free_loopback_port


@contextlib.asynccontextmanager
async def serving(settings: Settings) -> AsyncIterator[str]:
    """A gateway with ``settings`` served by uvicorn; its URL; stopped (its lifespan closed)
    on exit."""
    port = free_loopback_port()
    config = uvicorn.Config(create_app(settings), host="127.0.0.1", port=port, log_level="warning")
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            task.result()
        await asyncio.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task
