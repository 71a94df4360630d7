"""The real HTTP stack over the fake Triton:
``python -m tests.chaos.launcher PORT [SERVER_JSON [SECTIONS_JSON]]``.

``mmgw serve`` needs a Triton; this builds the same app over ``FakeTriton`` (as
``tests.fakes.app.start_gateway`` does) and serves it with uvicorn on 127.0.0.1:PORT under the
options ``mmgw serve`` passes, so slow and hostile clients meet the real protocol, middleware and
routes. ``SERVER_JSON`` is a JSON object of ``[server]`` settings to change, ``SECTIONS_JSON``
one of other sections (``{"responses": {...}}``; ``"script"``: fields of the fake's
``Script``). uvicorn.run would start its own event loop; ``Server.serve`` runs in uvloop's
here, where the runtime was built.
"""

from __future__ import annotations

import json
import signal
import sys
from typing import Any

import uvicorn

from gateway.cli import uvicorn_options
from tests.fakes.app import start_gateway
from tests.fakes.triton import FakeTriton


async def serve(port: int, server: dict[str, Any], sections: dict[str, Any]) -> None:
    fake = FakeTriton()
    for name, value in sections.pop("script", {}).items():  # what the fake engine answers
        setattr(fake.script, name, tuple(value) if isinstance(value, list) else value)
    gateway = await start_gateway(
        fake,
        server={**server, "port": port},
        observability={"log_format": "text"},
        **sections,
    )
    options = uvicorn_options(gateway.runtime.settings, gateway.app, "warning")
    config = uvicorn.Config(gateway.app, **options)
    try:
        await uvicorn.Server(config).serve()
    finally:
        await gateway.aclose()


def main() -> None:
    port = int(sys.argv[1])
    server = json.loads(sys.argv[2]) if len(sys.argv) > 2 else {}
    sections = json.loads(sys.argv[3]) if len(sys.argv) > 3 else {}
    import uvloop

    # uvicorn handles SIGTERM (a graceful shutdown), then raises it again for the handler it
    # found: this one ignores it, so the runtime (its decode workers) closes before exit.
    signal.signal(signal.SIGTERM, lambda *_: None)
    uvloop.run(serve(port, server, sections))


if __name__ == "__main__":
    main()
