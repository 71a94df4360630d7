"""Health: ``/health`` is ready only when Triton is; ``/health/live`` only says the process runs."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from gateway.routes.state import RuntimeDep

router = APIRouter()

_STATUS = {"type": "object", "required": ["status"], "properties": {"status": {"type": "string"}}}
_NOT_READY: dict[int | str, dict[str, Any]] = {
    "503": {
        "description": "Triton is not ready (the probe's own body, not an OpenAI error object)",
        "content": {"application/json": {"schema": _STATUS}},
    }
}


@router.get("/health", responses=_NOT_READY)
async def health(runtime: RuntimeDep) -> JSONResponse:
    if await runtime.ready():
        return JSONResponse({"status": "ready"})
    return JSONResponse({"status": "unavailable", "detail": "Triton is not ready"}, status_code=503)


@router.get("/health/live")
async def live() -> dict[str, str]:
    return {"status": "live"}
