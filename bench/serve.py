"""``python -m bench serve``: Triton with the load fixture and the gateway, left running.

For clients that bring their own load (aiperf, curl, the OpenAI SDK): the gateway serves
model ``loadgen`` (LLaVA family: image parts are fetched, decoded and preprocessed as for
a real LLaVA, then the fixture ignores the pixels) and requires the bench API key.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
from pathlib import Path

from bench.procs import parse_cpus, raise_fd_limit, say
from bench.stack import (
    API_KEY,
    REPO_ROOT,
    SERVED_ID,
    set_token_interval,
    start_gateway,
    start_triton,
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--port", type=int, default=8000, help="the gateway's port")
    parser.add_argument("--interval-us", type=int, default=10_000, help="token gap")
    parser.add_argument("--gateway-cpu", default="all", help="CPU(s) for the gateway, or all")
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "build" / "bench" / "serve")


async def run(args: argparse.Namespace) -> int:
    """Start, print how to reach it, and wait for Ctrl-C or SIGTERM."""
    args.out.mkdir(parents=True, exist_ok=True)
    raise_fd_limit()
    triton = await start_triton()
    gateway = None
    try:
        await set_token_interval(triton, args.interval_us)
        gateway = start_gateway(triton, args.out, parse_cpus(args.gateway_cpu), port=args.port)
        say(f"gateway: http://127.0.0.1:{gateway.port}/v1 (model {SERVED_ID!r}, key {API_KEY})")
        say(f"triton: grpc {triton.grpc_url}, http {triton.http_url}; Ctrl-C stops")
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop.set)
        await stop.wait()
    finally:
        if gateway is not None:
            gateway.stop()
        await triton.stop()
    return 0
