"""The app's running state, typed: ``app.state`` and ``request.state`` are untyped bags, read
here only.

``runtime_of`` is the routes' dependency (``RuntimeDep``: ``Depends`` on it); ``name_fields``
/ ``field_names_of`` carry the endpoint's ``errors.FieldNames`` from the route that knows them
to the error handler that writes the body.
"""

from __future__ import annotations

from typing import Annotated, TypeVar

from fastapi import Depends
from starlette.requests import HTTPConnection

from gateway.location import FieldNames, same_names
from gateway.observability.metrics import GatewayMetrics
from gateway.runtime import Runtime

__all__ = ["MetricsDep", "RuntimeDep", "field_names_of", "metrics_of", "name_fields", "runtime_of"]


T = TypeVar("T")


def _app_state(connection: HTTPConnection, name: str, kind: type[T]) -> T:
    value = getattr(connection.app.state, name, None)
    if not isinstance(value, kind):
        raise RuntimeError(f"the app has no {name}: it is not started")
    return value


def runtime_of(connection: HTTPConnection) -> Runtime:
    """The runtime the app's lifespan built (a request's or a WebSocket's app)."""
    return _app_state(connection, "runtime", Runtime)


def metrics_of(connection: HTTPConnection) -> GatewayMetrics:
    """The app's metrics (made with the app, before its runtime: /metrics answers without it)."""
    return _app_state(connection, "metrics", GatewayMetrics)


# FastAPI runs a plain function dependency on its thread pool, a hop per request: these are
# coroutines. A route's parameter ``runtime: RuntimeDep`` is the app's runtime, typed.
async def _runtime(connection: HTTPConnection) -> Runtime:
    return runtime_of(connection)


async def _metrics(connection: HTTPConnection) -> GatewayMetrics:
    return metrics_of(connection)


RuntimeDep = Annotated[Runtime, Depends(_runtime)]
MetricsDep = Annotated[GatewayMetrics, Depends(_metrics)]


def name_fields(connection: HTTPConnection, names: FieldNames) -> None:
    """Write this request's errors with ``names`` (an endpoint whose fields chat's pipeline
    names otherwise)."""
    connection.state.field_names = names


def field_names_of(connection: HTTPConnection) -> FieldNames:
    """The names this request's errors are written with (chat's own unless a route said)."""
    names = getattr(connection.state, "field_names", None)
    return names if callable(names) else same_names
