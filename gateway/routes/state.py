"""The app's running state, typed: ``app.state`` is an untyped bag, read once here."""

from __future__ import annotations

from starlette.requests import HTTPConnection

from gateway.runtime import Runtime


def runtime_of(connection: HTTPConnection) -> Runtime:
    """The runtime the app's lifespan built (a request's or a WebSocket's app)."""
    runtime = connection.app.state.runtime
    if not isinstance(runtime, Runtime):
        raise RuntimeError("the app has no runtime: it is not started")
    return runtime
