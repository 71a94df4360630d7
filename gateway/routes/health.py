"""Health: ``/health`` is ready only when Triton is; ``/health/live`` only says the process runs."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

router = APIRouter()


@router.get("/health")
async def health(request: Request) -> JSONResponse:
    runtime = request.app.state.runtime
    if await runtime.ready():
        return JSONResponse({"status": "ready"})
    return JSONResponse({"status": "unavailable", "detail": "Triton is not ready"}, status_code=503)


@router.get("/health/live")
async def live() -> dict[str, str]:
    return {"status": "live"}
