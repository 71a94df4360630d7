"""``create_app(settings)``: the lifespan that builds the runtime, routers, middleware, errors.

Each call builds an independent app (tests build several); nothing is created at import.
"""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from gateway.auth import ApiKeyMiddleware
from gateway.config import Settings
from gateway.drain import Drain, DrainMiddleware
from gateway.errors import ClientError, GatewayError, StartupAborted
from gateway.location import FieldNames, same_names
from gateway.observability.access import AccessMiddleware
from gateway.observability.deadline import BodyDeadlineMiddleware, MinRate
from gateway.observability.metrics import GatewayMetrics
from gateway.observability.middleware import InFlightLimitMiddleware, RequestIdMiddleware
from gateway.observability.tracing import tracing_from
from gateway.pipeline.realtime.registry import Sessions
from gateway.protocol.invalid import invalid_request
from gateway.routes import (
    audio,
    background,
    chat,
    completions,
    conversations,
    docs,
    health,
    metrics,
    models,
    openapi,
    realtime,
    responses,
    ui,
)
from gateway.routes.direct import DirectRoutes, direct_routes
from gateway.routes.state import field_names_of
from gateway.runtime import Runtime, build_runtime

log = logging.getLogger(__name__)

# Served by ``routes/direct.py`` past FastAPI's router: the endpoints a generation goes through.
DIRECT_ENDPOINTS = (
    chat.chat_completions,
    completions.completions,
    responses.create_response,
    audio.transcriptions,
    audio.translations,
)


def _error_response(
    error: GatewayError, status: int | None = None, names: FieldNames = same_names
) -> JSONResponse:
    return JSONResponse(error.to_body(names), status_code=status or error.status_code)


async def _gateway_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, GatewayError)
    if exc.status_code >= 500:
        log.warning("request failed: %s", exc.message)
    response = _error_response(exc, names=field_names_of(request))  # param named as sent
    if exc.retry_after_s is not None:
        response.headers["Retry-After"] = str(exc.retry_after_s)
    return response


# Starlette's own HTTP errors (routing), as OpenAI-style codes.
_HTTP_CODES = {404: "not_found", 405: "method_not_allowed", 415: "unsupported_media_type"}


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    code = _HTTP_CODES.get(exc.status_code, f"http_{exc.status_code}")
    kind = ClientError if exc.status_code < 500 else GatewayError  # the error's "type"
    error = kind(str(exc.detail), code=code)
    response = _error_response(error, exc.status_code)
    response.headers.update(exc.headers or {})  # a 405's Allow, as RFC 9110 requires
    return response


async def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    """FastAPI's own validation (a path or query parameter): the one translator's 400."""
    assert isinstance(exc, RequestValidationError)
    return _error_response(invalid_request(exc.errors()))


async def _unexpected_error(request: Request, exc: Exception) -> JSONResponse:
    log.exception("unhandled error")
    return _error_response(GatewayError("internal server error"))


def freeze_startup_objects() -> None:
    """Keep what start-up made (about 100,000 objects: modules, the app, pydantic's schemas)
    out of the garbage collector's full passes. Without it a full collection walks them all,
    some 50 ms on a busy 2-core host, and a request that allocates many objects (a large JSON
    body) sets one off: every stream of the process stalls for it. ``gc.freeze`` is the
    standard remedy; nothing frozen here was ever going to be freed."""
    gc.collect()
    gc.freeze()


def create_app(settings: Settings, runtime: Runtime | None = None) -> FastAPI:
    """The gateway app. Pass ``runtime`` to share one (tests); else the lifespan builds it."""
    # Built here, not in the lifespan: the middleware below needs it before start-up.
    gateway_metrics = runtime.metrics if runtime is not None else GatewayMetrics()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        owned = runtime is None
        try:
            app.state.runtime = runtime or await build_runtime(settings, gateway_metrics)
        except (GatewayError, ValueError, OSError) as exc:
            reason = exc.message if isinstance(exc, GatewayError) else str(exc)
            log.error("mmgw could not start: %s", reason)
            raise StartupAborted(reason) from None
        if owned:
            app.state.runtime.start_watching()
        freeze_startup_objects()
        try:
            yield
        finally:
            if owned:
                await app.state.runtime.aclose()
            if app.state.tracing is not None:  # flushes the last batch of spans
                await asyncio.to_thread(app.state.tracing.shutdown)

    app = FastAPI(
        title="multimodal-gateway",
        version=docs.gateway_version(),
        lifespan=lifespan,
        docs_url=None,  # served offline by routes/docs.py
        redoc_url=None,  # ReDoc would load from a CDN
    )
    app.mount(docs.ASSETS, docs.assets(), name="docs-assets")
    app.openapi = lambda: openapi.build(app)  # type: ignore[method-assign]
    app.state.metrics = gateway_metrics
    _add_routes(app, settings)
    app.add_exception_handler(GatewayError, _gateway_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(Exception, _unexpected_error)
    _add_middleware(app, settings, gateway_metrics)
    return app


def _add_routes(app: FastAPI, settings: Settings) -> None:
    routers = [
        chat.router,
        completions.router,
        responses.router,
        background.router,
        conversations.router,
        audio.router,
        realtime.router,
        models.router,
        health.router,
        ui.router,
        docs.router,
    ]
    if settings.observability.metrics:
        routers.append(metrics.router)
    for router in routers:
        app.include_router(router)
    # What a request refused before routing (401, 429; the protocol's 408 and 431) is counted
    # under: the endpoint its method and path match.
    app.state.endpoints = [route for router in routers for route in router.routes]


def _add_middleware(app: FastAPI, settings: Settings, gateway_metrics: GatewayMetrics) -> None:
    """Added innermost first: request id -> access log and metrics -> drain -> API key -> body
    deadlines -> in-flight cap (a slot is taken once the body is in, so the deadlines bound
    the phase before it) -> the generation endpoints, served past FastAPI's router."""
    server = settings.server
    direct = direct_routes(app.state.endpoints, DIRECT_ENDPOINTS)
    app.add_middleware(DirectRoutes, routes=direct, on_error=_gateway_error)
    app.add_middleware(
        InFlightLimitMiddleware, limit=server.max_in_flight, gauge=gateway_metrics.in_flight
    )
    app.add_middleware(
        BodyDeadlineMiddleware,
        total_s=server.body_timeout_s,
        idle_s=server.body_idle_timeout_s,
        min_rate=MinRate(server.body_min_rate_bytes_s, server.body_min_rate_grace_s),
    )
    app.add_middleware(ApiKeyMiddleware, keys=settings.api_keys)
    app.state.drain = Drain()  # started by the server on SIGTERM (drain.draining_server)
    sessions = Sessions(settings.realtime, gateway_metrics.realtime)
    app.state.realtime_sessions = sessions  # /v1/realtime's, finished on SIGTERM
    app.state.drain.finishers.append(sessions.finish_all)
    app.add_middleware(DrainMiddleware, drain=app.state.drain)
    observability = settings.observability
    body_bytes = observability.log_body_max_bytes if observability.log_bodies else 0
    tracing = tracing_from(observability.tracing, observability.otlp_traces_endpoint)
    app.state.tracing = tracing  # shut down (its batch flushed) with the app
    app.add_middleware(
        AccessMiddleware,
        metrics=gateway_metrics,
        log_body_bytes=body_bytes,
        routes=app.state.endpoints,
        tracing=tracing,
    )
    app.add_middleware(RequestIdMiddleware)
