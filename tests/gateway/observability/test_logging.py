"""JSON log lines: one object per line, the request id from the context, fields merged; text
lines carry the same fields as ``key=value``."""

from __future__ import annotations

import io
import json
import logging

from gateway.observability.logging import (
    REQUEST_ID,
    JsonFormatter,
    TextFormatter,
    configure_logging,
)


def format_line(record: logging.LogRecord) -> dict:
    line = JsonFormatter().format(record)
    assert "\n" not in line
    return json.loads(line)


def make_record(message: str, **fields: object) -> logging.LogRecord:
    record = logging.LogRecord("gateway.test", logging.INFO, __file__, 1, message, (), None)
    if fields:
        record.fields = fields
    return record


def test_line_carries_level_logger_message_and_fields() -> None:
    entry = format_line(make_record("request", status=200, model="m"))
    assert entry["level"] == "info"
    assert entry["logger"] == "gateway.test"
    assert entry["msg"] == "request"
    assert entry["status"] == 200 and entry["model"] == "m"
    assert entry["ts"].endswith("Z")
    assert "request_id" not in entry


def test_request_id_comes_from_the_context() -> None:
    token = REQUEST_ID.set("req-123")
    try:
        entry = format_line(make_record("inside a request"))
    finally:
        REQUEST_ID.reset(token)
    assert entry["request_id"] == "req-123"


def test_exceptions_stay_on_one_line() -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        import sys

        record = make_record("failed")
        record.exc_info = sys.exc_info()
    entry = format_line(record)
    assert "ValueError: boom" in entry["exc"]


def test_configure_logging_routes_uvicorn_through_the_json_handler() -> None:
    stream = io.StringIO()
    loggers = [logging.getLogger(n) for n in ("", "uvicorn", "uvicorn.error", "uvicorn.access")]
    saved = [(list(lg.handlers), lg.level, lg.propagate) for lg in loggers]
    try:
        logging.getLogger("uvicorn.error").setLevel(logging.WARNING)  # as uvicorn.Config leaves it
        configure_logging("json", "info", stream=stream)
        logging.getLogger("uvicorn.error").info("started")
        assert json.loads(stream.getvalue())["msg"] == "started"
    finally:
        for logger, (handlers, level, propagate) in zip(loggers, saved, strict=True):
            logger.handlers[:] = handlers
            logger.setLevel(level)
            logger.propagate = propagate


def test_a_text_access_line_keeps_its_fields() -> None:
    stream = io.StringIO()
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    try:
        configure_logging("text", "info", stream=stream)
        fields = {
            "method": "POST",
            "path": "/v1/chat/completions",
            "status": 200,
            "model": "reference llava",
            "stream": True,
            "error_code": None,
        }
        token = REQUEST_ID.set("req-7")
        try:
            logging.getLogger("gateway.access").info("request", extra={"fields": fields})
        finally:
            REQUEST_ID.reset(token)
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
    line = stream.getvalue().rstrip("\n")
    assert " INFO gateway.access: request request_id=req-7 method=POST " in line
    assert line.endswith(
        'path=/v1/chat/completions status=200 model="reference llava" stream=true error_code=-'
    )


def test_a_text_line_keeps_its_traceback_below_the_fields() -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        import sys

        record = make_record("failed", status=500)
        record.exc_info = sys.exc_info()
    first, *rest = TextFormatter().format(record).splitlines()
    assert first.endswith("gateway.test: failed status=500")
    assert rest[-1] == "ValueError: boom"
