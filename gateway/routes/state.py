"""The app's running state, typed: ``app.state`` and ``request.state`` are untyped bags, read
here only.

``runtime_of`` is the routes' dependency (``RuntimeDep``: ``Depends`` on it); ``name_fields``
/ ``field_names_of`` carry the endpoint's ``errors.FieldNames`` from the route that knows them
to the error handler that writes the body.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends
from starlette.requests import HTTPConnection

from gateway.errors import FieldNames, same_names
from gateway.observability.metrics import GatewayMetrics
from gateway.runtime import Runtime

__all__ = ["MetricsDep", "RuntimeDep", "field_names_of", "metrics_of", "name_fields", "runtime_of"]


def runtime_of(connection: HTTPConnection) -> Runtime:
    """The runtime the app's lifespan built (a request's or a WebSocket's app)."""
    runtime = connection.app.state.runtime
    if not isinstance(runtime, Runtime):
        raise RuntimeError("the app has no runtime: it is not started")
    return runtime


async def _runtime(connection: HTTPConnection) -> Runtime:
    # async: FastAPI runs a plain function dependency on its thread pool, a hop per request.
    return runtime_of(connection)


# A route's parameter ``runtime: RuntimeDep`` is the app's runtime, typed.
RuntimeDep = Annotated[Runtime, Depends(_runtime)]


def metrics_of(connection: HTTPConnection) -> GatewayMetrics:
    """The app's metrics (made with the app, before its runtime: /metrics answers without it)."""
    metrics = connection.app.state.metrics
    if not isinstance(metrics, GatewayMetrics):
        raise RuntimeError("the app has no metrics")
    return metrics


async def _metrics(connection: HTTPConnection) -> GatewayMetrics:
    return metrics_of(connection)


MetricsDep = Annotated[GatewayMetrics, Depends(_metrics)]


def name_fields(connection: HTTPConnection, names: FieldNames) -> None:
    """Write this request's errors with ``names`` (an endpoint whose fields chat's pipeline
    names otherwise)."""
    connection.state.field_names = names


def field_names_of(connection: HTTPConnection) -> FieldNames:
    """The names this request's errors are written with (chat's own unless a route said)."""
    names = getattr(connection.state, "field_names", None)
    return names if callable(names) else same_names
