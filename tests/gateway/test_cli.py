"""``mmgw serve`` runs uvicorn on uvloop and httptools whenever they are installed."""

from __future__ import annotations

import importlib.util

from gateway.cli import fast_server_options


def test_serve_names_uvloop_and_httptools_when_installed() -> None:
    expected = {}
    if importlib.util.find_spec("uvloop"):
        expected["loop"] = "uvloop"
    if importlib.util.find_spec("httptools"):
        expected["http"] = "httptools"
    assert fast_server_options() == expected
    assert expected == {"loop": "uvloop", "http": "httptools"}  # uvicorn[standard] has both
