"""The options ``mmgw serve`` (one process, or each worker) passes to uvicorn."""

from __future__ import annotations

import importlib.util
import math
from typing import TYPE_CHECKING, Any

from gateway.config import Settings

if TYPE_CHECKING:
    from fastapi import FastAPI


def fast_server_options() -> dict[str, Any]:
    """uvloop when installed (``uvicorn[standard]`` brings it), said explicitly.

    uvicorn's ``auto`` picks it when it imports and silently falls back to asyncio otherwise;
    naming it keeps the per-chunk path the benchmarks measured. The HTTP protocol is always
    the gateway's own (httptools, which ``uvicorn[standard]`` brings too, with the request
    head bounded: ``gateway/server/``).
    """
    options: dict[str, Any] = {}
    if importlib.util.find_spec("uvloop") is not None:
        options["loop"] = "uvloop"
    return options


def uvicorn_options(settings: Settings, app: FastAPI, log_level: str) -> dict[str, Any]:
    """Everything ``mmgw serve`` passes to ``uvicorn.run`` besides the app."""
    from gateway.server.protocol import protocol_class

    return {
        "host": settings.server.host,
        "port": settings.server.port,
        **fast_server_options(),
        "http": protocol_class(settings.server, app),
        "log_level": log_level,
        "log_config": None,  # configure_logging owns the handlers: one format for all
        "access_log": False,  # the gateway writes its own access line, with timings and sizes
        "timeout_graceful_shutdown": math.ceil(settings.server.drain_timeout_s),
        # A /v1/realtime append of max_append_bytes of audio, in base64 inside its JSON event.
        "ws_max_size": settings.realtime.max_append_bytes * 4 // 3 + 64 * 1024,
    }
