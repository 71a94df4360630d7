"""The generation endpoints served straight from the middleware stack, past FastAPI's router.

Why: a streamed chat request spent about a fifth of its gateway CPU in the framework between
the last middleware and the endpoint: Starlette's exception and exit-stack wrappers, the
router's match over every route, FastAPI's dependency solver and its request wrapper
(``python -m bench hotpath``). The generation endpoints need none of it: each takes the
request and the runtime and reads its own body (``routes/body.py``), so there is nothing to
inject or validate on the way in. A paced load pays that code cold, per request, on an idle
core (issue 28's added-TTFT goal).

``DirectRoutes`` is the innermost middleware. A request whose method and path are exactly a
direct route's (no root path) runs the same endpoint function with the same ``Request``, and
its ``GatewayError`` gets the same handler the app registered, so the answer is byte for byte
what the router would give; anything else, and every other request, goes on to FastAPI. The
routes stay registered with FastAPI for the OpenAPI document and as that fallback.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from fastapi.routing import APIRoute
from starlette.requests import Request
from starlette.responses import Response

from gateway.errors import GatewayError
from gateway.observability.middleware import ASGIApp, Receive, Scope, Send
from gateway.routes.state import runtime_of
from gateway.runtime import Runtime

__all__ = ["DirectRoutes", "direct_routes"]

Endpoint = Callable[[Request, Runtime], Awaitable[Response]]
ErrorHandler = Callable[[Request, Exception], Awaitable[Response]]

# The one signature a direct endpoint may have: what it needs, nothing for FastAPI to solve.
_PARAMETERS = ("request", "runtime")


def direct_routes(
    routes: Iterable[object], endpoints: Iterable[Callable[..., Any]]
) -> dict[tuple[str, str], APIRoute]:
    """(method, path) -> route for each of ``endpoints``, found among ``routes``.

    Raises ``ValueError`` for an endpoint with path parameters or another signature: the
    dispatcher would call it without what FastAPI would have given it."""
    wanted = set(endpoints)
    found: dict[tuple[str, str], APIRoute] = {}
    for route in routes:
        if not isinstance(route, APIRoute) or route.endpoint not in wanted:
            continue
        parameters = tuple(inspect.signature(route.endpoint).parameters)
        if parameters != _PARAMETERS or route.param_convertors:
            raise ValueError(f"{route.path} cannot be served directly: {parameters}")
        for method in route.methods or ():
            found[(method, route.path)] = route
        wanted.discard(route.endpoint)
    if wanted:
        raise ValueError(f"no route for {sorted(e.__name__ for e in wanted)}")
    return found


class DirectRoutes:
    """Serves ``routes`` itself; passes every other request to ``app`` (FastAPI's inner app)."""

    def __init__(
        self,
        app: ASGIApp,
        routes: Mapping[tuple[str, str], APIRoute],
        on_error: ErrorHandler,
    ) -> None:
        self.app = app
        self.routes = routes
        self.on_error = on_error  # the app's GatewayError handler

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        route = None
        if scope["type"] == "http" and not scope.get("root_path"):
            route = self.routes.get((scope["method"], scope["path"]))
        if route is None:
            await self.app(scope, receive, send)
            return
        scope["route"] = route  # the access line's endpoint label, as the router sets it
        scope["endpoint"] = route.endpoint
        request = Request(scope, receive, send)
        try:
            response = await route.endpoint(request, runtime_of(request))
        except GatewayError as exc:
            response = await self.on_error(request, exc)
        await response(scope, receive, send)
