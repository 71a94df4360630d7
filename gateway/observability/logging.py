"""Structured logs: one JSON object per line, carrying the current request's id.

Log shippers parse JSON without regexes, and a request id on every line (not only on the
access line) lets an operator pull one request's story out of a busy log. The id lives in a
``ContextVar`` set by ``RequestIdMiddleware``; pure-ASGI middleware keeps contextvars intact
down to the route and the SSE generator. Structured fields travel in ``extra={"fields": ...}``.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from contextvars import ContextVar
from typing import Any, TextIO

from gateway.errors import StartupAborted

REQUEST_ID: ContextVar[str | None] = ContextVar("mmgw_request_id", default=None)
# uvicorn's start-up lines, which the gateway's one "ready" line replaces (gateway/cli.py).
UVICORN_STARTUP = (
    "Started server process",
    "Waiting for application startup.",
    "Application startup complete.",
    "Uvicorn running on",
)
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class JsonFormatter(logging.Formatter):
    """``{"ts", "level", "logger", "msg", "request_id"?, **fields, "exc"?}`` on one line."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": _iso_time(record.created),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        request_id = REQUEST_ID.get()
        if request_id is not None:
            entry["request_id"] = request_id
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            entry.update(fields)
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str, ensure_ascii=False, separators=(",", ":"))


class TextFormatter(logging.Formatter):
    """``TEXT_FORMAT``, then the request id and the structured fields as ``key=value`` (the
    access line's method, path, status and timings, which ``msg`` alone reduces to
    "request"); a value with spaces or quotes is written as a JSON string."""

    def __init__(self) -> None:
        super().__init__(TEXT_FORMAT)

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        pairs: dict[str, Any] = {}
        request_id = REQUEST_ID.get()
        if request_id is not None:
            pairs["request_id"] = request_id
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            pairs.update(fields)
        if not pairs:
            return line
        head, newline, tail = line.partition("\n")  # a traceback stays below the fields
        rendered = " ".join(f"{key}={_text_value(value)}" for key, value in pairs.items())
        return f"{head} {rendered}{newline}{tail}"


def _text_value(value: Any) -> str:
    if value is None:
        return "-"
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    if isinstance(value, str) and (not text or any(c in text for c in ' "=\n\t')):
        return json.dumps(text, ensure_ascii=False)
    return text


class QuietStartup(logging.Filter):
    """A clean start-up at ``info``: uvicorn's own start-up lines give way to the gateway's
    ready line, and a start-up the gateway already explained (``StartupAborted``) is not
    followed by the traceback that the ASGI lifespan prints for it."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name != "uvicorn.error":
            return True
        if record.levelno <= logging.INFO and str(record.msg).startswith(UVICORN_STARTUP):
            return False
        return not (
            record.levelno >= logging.ERROR and StartupAborted.__name__ in record.getMessage()
        )


def _iso_time(created: float) -> str:
    """UTC, millisecond precision: sortable and unambiguous across hosts."""
    seconds = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(created))
    return f"{seconds}.{int(created % 1 * 1000):03d}Z"


def configure_logging(fmt: str = "json", level: str = "info", stream: TextIO | None = None) -> None:
    """Route every logger (uvicorn's too) through one root handler in the chosen format
    (``auto``: text when ``stream`` is a terminal, JSON otherwise)."""
    stream = stream or sys.stderr
    if fmt == "auto":
        fmt = "text" if stream.isatty() else "json"
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    for existing in list(root.handlers):
        root.removeHandler(existing)
    root.addHandler(handler)
    root.setLevel(level.upper())
    if root.level > logging.DEBUG:
        handler.addFilter(QuietStartup())
    # httpx logs every request at info: the gateway's media fetches (their URLs) and its
    # probes of the embedded Triton. Its warnings still show; at debug, everything does.
    debug = root.level <= logging.DEBUG
    logging.getLogger("httpx").setLevel(logging.NOTSET if debug else logging.WARNING)
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        uvicorn_logger = logging.getLogger(name)
        uvicorn_logger.handlers.clear()
        uvicorn_logger.setLevel(logging.NOTSET)  # the root's level decides, for all alike
        uvicorn_logger.propagate = True
