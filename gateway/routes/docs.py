"""``/docs`` (Swagger UI) served from the gateway itself, and ``GET /version``.

FastAPI's default ``/docs`` page loads Swagger UI from a CDN, which an air-gapped cluster
cannot reach; here its files come from the ``fastapi-swagger`` wheel, so "Try it out" works
offline against ``/openapi.json``. That wheel is used for its files only: it follows
swagger-ui-dist's releases (0.4.64 ships Swagger UI 5.34.0), and Swagger UI reads OpenAPI 3.1
(what FastAPI writes) only from 5.0 on; ``swagger-ui-bundle``, the older packaging, stopped at
4.15.5, which answers "does not specify a valid version field".
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from importlib.resources import files
from pathlib import Path

from fastapi import APIRouter
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

ASSETS = "/docs/assets"
router = APIRouter()


def assets() -> StaticFiles:
    """Swagger UI's own files, to mount at ``ASSETS``."""
    return StaticFiles(directory=Path(str(files("fastapi_swagger") / "resources")))


@router.get("/docs", include_in_schema=False)
async def docs() -> HTMLResponse:
    return get_swagger_ui_html(
        openapi_url="/openapi.json",
        title="multimodal-gateway",
        swagger_js_url=f"{ASSETS}/swagger-ui-bundle.js",
        swagger_css_url=f"{ASSETS}/swagger-ui.css",
        swagger_favicon_url=f"{ASSETS}/favicon-32x32.png",
        swagger_ui_parameters={"filter": True},
    )


def gateway_version() -> str:
    try:
        return version("multimodal-gateway")
    except PackageNotFoundError:  # run from a checkout without installing it
        return "0+unknown"


@router.get("/version")
async def get_version() -> dict[str, str]:
    """The gateway's version, as vLLM's ``/version`` answers."""
    return {"version": gateway_version()}
