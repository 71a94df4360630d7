"""``python -m bench scale``: gateway throughput under flood as workers are added.

For each worker count (default 1, 2, 4, 8) the gateway runs as ``mmgw serve --workers N``
pinned to N cores of its own (the highest-numbered), and the load generator floods it with
streaming chat requests; direct gRPC and Triton's own ``generate_stream`` are measured once on
the same fixture (Triton and the load generator on the remaining cores). Prints each figure,
the ratio to ``generate_stream`` and the relayed tokens per gateway core, and draws
``scale.png``.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from bench import overhead, report
from bench.pool import WorkerPool
from bench.procs import Service, pin_self, raise_fd_limit, say
from bench.stack import REPO_ROOT, start_gateway, start_triton


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("--gateway-workers", default="1,2,4,8", help="worker counts to measure")
    add("--concurrency", type=int, default=128, help="concurrent flooding streams")
    add("--tokens", type=int, default=64, help="tokens per request")
    add("--duration", type=float, default=4.0, help="seconds per phase (bound)")
    add("--max-requests", type=int, default=20000, help="requests per phase (bound)")
    add("--workers", type=int, default=6, help="load-generator processes")
    add("--triton-instances", type=int, default=6, help="fixture instances (stub processes)")
    add("--out", type=Path, help="result folder (default build/bench/scale-<time>)")


def _cpus(count: int, cores: list[int]) -> tuple[set[int] | None, set[int] | None]:
    """(the gateway's ``count`` highest of ``cores``, the rest); nothing pinned when there are
    too few to give the gateway its own (a smoke run: its figures mean little)."""
    if count >= len(cores):
        say(f"only {len(cores)} cores: {count} gateway workers share them (not pinned)")
        return None, None
    return set(cores[-count:]), set(cores[:-count])


def _options(args: argparse.Namespace, out: Path, modes: tuple[str, ...]) -> overhead.Options:
    return overhead.Options(
        concurrency=(args.concurrency,), modes=modes, profiles=("flood",), tokens=args.tokens,
        interval_us=0, duration_s=args.duration, max_requests=args.max_requests,
        workers=args.workers, gateway_cpus=None, other_cpus=None, out=out, wait_quiet_min=0,
        quiet_load=1.0, triton_instances=args.triton_instances,
    )  # fmt: skip


def per_core(row: report.Measurement) -> float | None:
    """Relayed tokens per second of gateway CPU (all its workers together)."""
    cpu = row.proxy_cpu_per_1k
    return 1000.0 / cpu if cpu else None


async def run(args: argparse.Namespace) -> int:
    counts = [int(n) for n in args.gateway_workers.split(",")]
    out = args.out or REPO_ROOT / "build" / "bench" / f"scale-{time.strftime('%Y%m%d-%H%M%S')}"
    out.mkdir(parents=True, exist_ok=True)
    raise_fd_limit()
    cores = sorted(os.sched_getaffinity(0))  # read before this process pins itself
    _, others = _cpus(max(counts), cores)
    pin_self(others)  # Triton, its stubs and the load generator stay off the gateway's cores
    say(f"starting Triton ({args.triton_instances} fixture instances) on CPUs {others or 'all'}")
    triton = await start_triton()
    pool = WorkerPool(args.workers)
    rows: list[tuple[int, report.Measurement]] = []
    try:
        for index, count in enumerate(counts):
            gateway_cpus, _ = _cpus(count, cores)
            say(f"gateway with {count} worker(s) on CPUs {gateway_cpus or 'all'}")
            gateway: Service = start_gateway(triton, out, gateway_cpus, workers=count)
            try:
                modes = ("grpc", "gateway", "triton_http") if index == 0 else ("gateway",)
                opts = _options(args, out, modes)
                measured = await overhead.measure_all(opts, triton, {"gateway": gateway}, pool)
                rows += [(count if r.mode == "gateway" else 0, r) for r in measured]
            finally:
                gateway.stop()
    finally:
        pool.close()
        await triton.stop()
    text = write(out, rows)
    print(text, flush=True)
    say(f"results in {out}")
    return 0


def write(out: Path, rows: list[tuple[int, report.Measurement]]) -> str:
    """results.json, report.md and scale.png; returns the markdown table."""
    base = {r.mode: r for n, r in rows if n == 0}
    ceiling = base.get("triton_http")
    lines = [
        "| path | gateway workers | tok/s | / generate_stream | tok/s per gateway core |"
        " TTFT p50 ms | TTFT p99 ms | errors |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for count, row in rows:
        ratio = f"{row.tps / ceiling.tps:.2f}" if ceiling and ceiling.tps else "-"
        core = per_core(row) if row.mode == "gateway" else None
        lines.append(
            f"| {report.LABELS[row.mode]} | {count or '-'} | {row.tps:,.0f} | {ratio} | "
            f"{f'{core:,.0f}' if core else '-'} | {row.ttft_p50:.1f} | {row.ttft_p99:.1f} | "
            f"{row.errors} |"
        )
    text = "\n".join(lines)
    (out / "report.md").write_text(text + "\n")
    dump = [{"gateway_workers": n, **report.as_dicts([r])[0]} for n, r in rows]
    (out / "results.json").write_text(json.dumps(dump, indent=1))
    _plot(out / "scale.png", rows)
    return text


def _plot(path: Path, rows: list[tuple[int, report.Measurement]]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 4), dpi=80)
    points = sorted((n, r.tps) for n, r in rows if r.mode == "gateway")
    if points:
        xs, ys = zip(*points, strict=True)
        ax.plot(xs, ys, marker="o", label="gateway SSE", color=report.COLORS["gateway"])
    for n, r in rows:
        if n == 0 and r.mode != "gateway":
            ax.axhline(
                r.tps, linestyle="--", label=report.LABELS[r.mode], color=report.COLORS[r.mode]
            )
    ax.set_xlabel("gateway worker processes (one core each)")
    ax.set_ylabel("tokens/s under flood")
    ax.set_xscale("log", base=2)
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
