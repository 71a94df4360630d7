"""A real gateway listening on a loopback port, in the test's own event loop."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import uvicorn
from fastapi import FastAPI

from gateway.app import create_app
from gateway.config import ServerSettings, Settings
from gateway.server.protocol import protocol_class
from gateway.triton.embedded import free_loopback_port


@contextlib.asynccontextmanager
async def serving(settings: Settings) -> AsyncIterator[str]:
    """A gateway with ``settings`` served by uvicorn; its URL; stopped (its lifespan closed)
    on exit."""
    async with serving_app(create_app(settings)) as url:
        yield url


@contextlib.asynccontextmanager
async def serving_app(
    app: FastAPI, server_settings: ServerSettings | None = None
) -> AsyncIterator[str]:
    """``app`` served by uvicorn on loopback (with the gateway's own HTTP protocol when
    ``server_settings`` are given, as ``mmgw serve`` runs it); its URL."""
    port = free_loopback_port()
    options: dict[str, Any] = {}
    if server_settings is not None:
        options["http"] = protocol_class(server_settings, app)
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", **options)
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
