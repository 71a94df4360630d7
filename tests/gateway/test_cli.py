"""``mmgw serve`` runs uvicorn on uvloop, with the gateway's own httptools protocol."""

from __future__ import annotations

import importlib.util

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from gateway.app import create_app
from gateway.cli import fast_server_options, uvicorn_options
from gateway.config import EmbeddedSettings, ServedModel, Settings
from gateway.server import HttpLimits, LimitedHttpToolsProtocol


def test_serve_names_uvloop_when_installed() -> None:
    expected = {"loop": "uvloop"} if importlib.util.find_spec("uvloop") else {}
    assert fast_server_options() == expected
    assert expected == {"loop": "uvloop"}  # uvicorn[standard] has it


def test_serve_runs_the_bounded_httptools_protocol_with_the_settings_limits() -> None:
    settings = Settings(
        models=[ServedModel(id="m", family="llava", triton_model="e", triton_url="t:1")],
        embedded=EmbeddedSettings(enabled=False),
        server={"port": 9001, "max_headers": 40, "header_timeout_s": 3, "body_timeout_s": 7},
    )
    app = create_app(settings)
    options = uvicorn_options(settings, app, "warning")
    protocol = options.pop("http")
    assert issubclass(protocol, LimitedHttpToolsProtocol)
    assert issubclass(protocol, HttpToolsProtocol)
    assert protocol.limits == HttpLimits(40, 64 * 1024, 3.0, 7.0)
    assert protocol.report is not None and protocol.report.metrics is app.state.metrics
    assert options == {
        "host": "127.0.0.1",
        "port": 9001,
        "loop": "uvloop",
        "log_level": "warning",
        "log_config": None,
        "access_log": False,
        "timeout_graceful_shutdown": 30,
    }
