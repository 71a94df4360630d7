"""The real HTTP stack over the fake Triton: ``python -m tests.chaos.launcher PORT [SERVER_JSON]``.

``mmgw serve`` needs a Triton; this builds the same app over ``FakeTriton`` (as
``tests.fakes.app.start_gateway`` does) and serves it with uvicorn on 127.0.0.1:PORT under the
options ``mmgw serve`` passes, so slow and hostile clients meet the real protocol, middleware and
routes. ``SERVER_JSON`` is a JSON object of ``[server]`` settings to change.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import uvicorn

from gateway.cli import fast_server_options
from tests.fakes.app import start_gateway
from tests.fakes.triton import FakeTriton


async def serve(port: int, server: dict[str, Any]) -> None:
    gateway = await start_gateway(
        FakeTriton(), server={**server, "port": port}, observability={"log_format": "text"}
    )
    settings = gateway.runtime.settings
    config = uvicorn.Config(
        gateway.app,
        host="127.0.0.1",
        port=port,
        **fast_server_options(),
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=int(settings.server.drain_timeout_s),
    )
    try:
        await uvicorn.Server(config).serve()
    finally:
        await gateway.aclose()


def main() -> None:
    port = int(sys.argv[1])
    server = json.loads(sys.argv[2]) if len(sys.argv) > 2 else {}
    import uvloop

    uvloop.run(serve(port, server))


if __name__ == "__main__":
    main()
