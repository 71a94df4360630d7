"""The one line that ends a clean start-up: ready, where, the chat page, and what is served.

A newcomer's first question after ``mmgw serve`` is "is it up, where, and which model do I
ask for?"; uvicorn's own start-up lines answer only the second, so they give way to this one
(``observability/logging.py``).
"""

from __future__ import annotations

from collections.abc import Iterable


def address_url(address: tuple[str, int]) -> str:
    """``http://host:port`` of a listening socket's address (``[host]`` for IPv6); a
    wildcard address is shown as loopback, the address that works from this machine."""
    host, port = address
    host = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host)
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def ready_line(url: str, model_ids: Iterable[str]) -> str:
    ids = ", ".join(model_ids)
    return f"ready: {url} (chat page {url}/, API {url}/v1, docs {url}/docs); models: {ids}"
