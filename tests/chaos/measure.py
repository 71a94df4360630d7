"""Issue 13's slow-client figures: ``python -m tests.chaos.measure [SERVER_JSON]``.

Launches the gateway over the fake Triton (``tests.chaos.launcher``, the options ``mmgw serve``
uses) with its default ``[server]`` settings unless ``SERVER_JSON`` changes some, runs each
attack at the issue's scale next to honest chat requests, and prints what every client saw.
Each client gives up after ``GIVE_UP_S`` (a server that never answers shows as ``open``).
"""

from __future__ import annotations

import asyncio
import collections
import json
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

from tests.chaos.clients import (
    Launched,
    Outcome,
    RssPeak,
    chat_head,
    flood,
    honest_traffic,
    launch,
    many_headers,
    stream_header,
    trickle,
)

GIVE_UP_S = 75.0
SLOW_HEADER = b"X-Slow: " + b"a" * 1000


def summary(outcomes: list[Outcome]) -> str:
    kinds = collections.Counter(o.brief().rsplit(" ", 1)[0] for o in outcomes)
    times = sorted(o.seconds for o in outcomes)
    sent = max(o.sent for o in outcomes) / 2**20
    return f"{dict(kinds)} in {times[0]:.1f}-{times[-1]:.1f}s, each sent <= {sent:.2f} MiB"


async def attack(
    launched: Launched, name: str, clients: Callable[[], list[Awaitable[Outcome]]]
) -> None:
    async with RssPeak(launched) as rss, honest_traffic(launched.port) as honest:
        began = time.monotonic()
        outcomes = await asyncio.gather(*clients())
    statuses = dict(collections.Counter(honest.statuses))
    print(
        f"{name}: {summary(outcomes)} | honest chats meanwhile {statuses}, slowest "
        f"{honest.slowest_s:.2f}s | RSS {rss.before:.0f} -> peak {rss.peak:.0f} MB | "
        f"{time.monotonic() - began:.0f}s",
        flush=True,
    )


async def main(server: dict[str, Any]) -> None:
    async with launch(server) as gw:
        port = gw.port
        slots = int(server.get("max_in_flight", 512))
        await attack(gw, "10,000 headers", lambda: [flood(port, many_headers(10_000))])
        await attack(gw, "one 64 MiB header", lambda: [stream_header(port, 64 << 20)])
        await attack(
            gw,
            "four 64 MiB headers at once",
            lambda: [stream_header(port, 64 << 20) for _ in range(4)],
        )
        await attack(
            gw,
            "50 slow-loris headers (1 byte/s)",
            lambda: [
                trickle(port, b"POST /v1/chat/completions HTTP/1.1\r\nHost: chaos\r\n",
                        SLOW_HEADER, give_up_s=GIVE_UP_S)
                for _ in range(50)
            ],
        )  # fmt: skip
        await attack(
            gw,
            f"{slots + 8} bodies stuck after 1 byte",
            lambda: [
                trickle(port, chat_head(100) + b"{", give_up_s=GIVE_UP_S) for _ in range(slots + 8)
            ],
        )
        await attack(
            gw,
            "a body at 1 byte/s",
            lambda: [trickle(port, chat_head(1000), b"{" * 1000, give_up_s=GIVE_UP_S)],
        )
        print(f"afterwards: chat -> {await gw.chat()}", flush=True)


if __name__ == "__main__":
    asyncio.run(main(json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}))
