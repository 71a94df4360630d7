"""JSON log lines: one object per line, the request id from the context, fields merged; text
lines carry the same fields as ``key=value``."""

from __future__ import annotations

import io
import json
import logging

import pytest

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


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(("stream", "json_lines"), [(Terminal(), False), (io.StringIO(), True)])
def test_auto_is_text_on_a_terminal_and_json_elsewhere(
    stream: io.StringIO, json_lines: bool
) -> None:
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    try:
        configure_logging("auto", "info", stream=stream)
        logging.getLogger("gateway.test").info("hello")
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
    line = stream.getvalue()
    assert line.startswith("{") is json_lines
    assert ("gateway.test: hello" in line) is not json_lines


def test_uvicorns_start_up_lines_give_way_to_the_ready_line() -> None:
    stream = io.StringIO()
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    try:
        configure_logging("json", "info", stream=stream)
        uvicorn_error = logging.getLogger("uvicorn.error")
        uvicorn_error.info("Started server process [%d]", 1)
        uvicorn_error.info("Uvicorn running on %s://%s:%d (Press CTRL+C to quit)", "http", "h", 1)
        uvicorn_error.error("Traceback ...\ngateway.errors.StartupAborted: explained above")
        uvicorn_error.error("Application startup failed. Exiting.")
        uvicorn_error.info("Shutting down")
        logging.getLogger("httpx").info("HTTP Request: GET http://media.test/cat.png")
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
    said = [json.loads(line)["msg"] for line in stream.getvalue().splitlines()]
    assert said == ["Application startup failed. Exiting.", "Shutting down"]
