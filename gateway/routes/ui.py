"""The browser chat page: ``/`` and its few static files from ``gateway/ui/``.

Only a fixed list of files is served (no directory walking), each with a strict Content
Security Policy: scripts and styles from this origin only, no inline script, no plugins,
no framing. The page never turns model output or file names into HTML (it uses
``textContent``), and the policy is the second line of defence if that ever slips.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import FileResponse, Response

router = APIRouter()

UI_DIR = Path(__file__).resolve().parent.parent / "ui"
FILES = {
    "index.html": "text/html; charset=utf-8",
    "app.js": "text/javascript; charset=utf-8",
    "markdown.js": "text/javascript; charset=utf-8",
    "mic.js": "text/javascript; charset=utf-8",
    "mic-worklet.js": "text/javascript; charset=utf-8",
    "style.css": "text/css; charset=utf-8",
}
CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data: blob:",
        "media-src 'self' data: blob:",
        "connect-src 'self'",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
    ]
)
HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


def _file(name: str) -> Response:
    return FileResponse(UI_DIR / name, media_type=FILES[name], headers=HEADERS)


@router.get("/", include_in_schema=False)
async def index() -> Response:
    return _file("index.html")


@router.get("/ui/{name}", include_in_schema=False)
async def asset(name: str) -> Response:
    if name not in FILES:
        return Response("not found", status_code=404, media_type="text/plain")
    return _file(name)
