"""``python -m bench held``: many concurrent SSE streams held open through one gateway process.

Each stream is one chat completion whose tokens arrive ``--interval-us`` apart, so all of
them are open at once for ``tokens x interval`` seconds, like slow readers of long answers.
It reports errors (the goal is none), the most requests the gateway counted in flight, and
its memory per stream: (peak RSS - idle RSS after a warm-up) / streams.
"""

from __future__ import annotations

import argparse
import json
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from bench.loadgen import Phase, PhaseResult, Target
from bench.pool import WorkerPool
from bench.procs import parse_cpus, pin_self, raise_fd_limit, rss_bytes, say
from bench.report import percentile_ms
from bench.stack import (
    AUTH_HEADER,
    REPO_ROOT,
    SERVED_ID,
    set_token_interval,
    start_gateway,
    start_triton,
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("--streams", type=int, default=1000, help="concurrent SSE streams")
    add("--tokens", type=int, default=20, help="tokens per stream")
    add("--interval-us", type=int, default=500_000, help="gap between a stream's tokens")
    add("--workers", type=int, default=2, help="load-generator processes")
    add("--gateway-cpu", default=str((os.cpu_count() or 1) - 1), help="CPU(s) or all")
    add("--out", type=Path, help="result folder (default build/bench/held-<time>)")


@dataclass
class Peak:
    """What the watcher saw while the streams were open."""

    rss: int = 0
    in_flight: float = 0


def _in_flight(http: httpx.Client, port: int) -> float:
    text = http.get(f"http://127.0.0.1:{port}/metrics").text
    for line in text.splitlines():
        if line.startswith("mmgw_in_flight_requests "):
            return float(line.split()[1])
    return 0.0


def watch(pid: int, port: int, peak: Peak, stop: threading.Event) -> None:
    """Sample the gateway's RSS every 100 ms and its in-flight gauge every second."""
    last_scrape = 0.0
    with httpx.Client(timeout=5, trust_env=False) as http:
        while not stop.wait(0.1):
            peak.rss = max(peak.rss, rss_bytes(pid))
            if time.monotonic() - last_scrape >= 1.0:
                last_scrape = time.monotonic()
                peak.in_flight = max(peak.in_flight, _in_flight(http, port))


async def run(args: argparse.Namespace) -> int:
    out: Path = args.out or REPO_ROOT / "build" / "bench" / f"held-{time.strftime('%Y%m%d-%H%M%S')}"
    out.mkdir(parents=True, exist_ok=True)
    limit = raise_fd_limit(args.streams * 4 + 1024)
    say(f"file-descriptor limit {limit}")
    pin_self(None)
    triton = await start_triton()
    gateway = pool = None
    try:
        await set_token_interval(triton, args.interval_us)
        gateway = start_gateway(
            triton, out, parse_cpus(args.gateway_cpu), max_in_flight=args.streams + 64
        )
        pool = WorkerPool(args.workers)
        target = Target("gateway", gateway.port, SERVED_ID, "/v1/chat/completions", (AUTH_HEADER,))
        say("warm-up: 32 streams ...")
        await pool.run(Phase(target, 0, 2, 5.0, 1, warmup=False), 32, 32, dict)
        time.sleep(1.0)
        idle = rss_bytes(gateway.pid)
        seconds = args.tokens * args.interval_us / 1e6
        say(f"holding {args.streams} streams for about {seconds:.0f} s each ...")
        peak = Peak()
        window = await pool.run(
            Phase(target, 0, args.tokens, seconds, 1, warmup=False),
            args.streams,
            args.streams,
            dict,
            during=lambda stop: watch(gateway.pid, gateway.port, peak, stop),
        )
    finally:
        if pool is not None:
            pool.close()
        if gateway is not None:
            gateway.stop()
        await triton.stop()
    return _report(args, out, window.result, idle, peak)


def _report(args: argparse.Namespace, out: Path, result: PhaseResult, idle: int, peak: Peak) -> int:
    figures = {
        "streams": args.streams,
        "tokens_per_stream": args.tokens,
        "interval_ms": args.interval_us / 1000,
        "completed": result.requests,
        "errors": result.errors,
        "short_streams": result.short,
        "error_sample": result.error_sample,
        "peak_in_flight": peak.in_flight,
        "idle_rss_mib": round(idle / 2**20, 1),
        "peak_rss_mib": round(peak.rss / 2**20, 1),
        "kib_per_stream": round((peak.rss - idle) / 1024 / args.streams, 1),
        "ttft_p50_ms": round(percentile_ms(result.ttft, 50), 2),
        "ttft_p99_ms": round(percentile_ms(result.ttft, 99), 2),
        "itl_p99_ms": round(percentile_ms(result.gaps, 99), 2),
    }
    (out / "held.json").write_text(json.dumps(figures, indent=1))
    for key, value in figures.items():
        print(f"{key:>18}: {value}", flush=True)
    failed = figures["errors"] or figures["short_streams"]
    return 1 if failed else 0
