"""``python -m bench overhead``: the gateway's cost per request and per token, against the
limit (direct gRPC), Triton's own HTTP streaming, and a peer proxy (LiteLLM).

One run, one co-launched Triton serving the ``loadgen_ensemble`` fixture. For each pace
profile (``paced``: tokens ``--interval-us`` apart, like a real model; ``flood``: as fast as
Triton can send), for each concurrency, each path is measured in turn by the worker pool:
(a) tritonclient gRPC streaming straight to Triton, (b) the gateway's SSE chat completions,
(c) Triton's ``generate_stream``, (d) LiteLLM's SSE chat completions over Triton's
``generate_stream``. The gateway and LiteLLM are pinned to the same core and never run a
phase at the same time; Triton and the load generator run on the other CPUs (``rest``), so
they do not steal the proxy's core. CPU seconds come from ``/proc/<pid>/stat``.

``--image 336,1024`` adds one profile per side (``image336``, ...): the same paced request
with one JPEG of that side, through the gateway (a data: URL it decodes, preprocesses and
hashes) and by direct gRPC with the tensors the gateway would send (``bench/images.py``);
only (a) and (b) take part. ``--profiles ''`` leaves the text profiles out.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from bench import report
from bench.images import ImageLoad, image_load
from bench.loadgen import Phase, Target
from bench.peers import start_litellm
from bench.pool import WorkerPool
from bench.procs import Service, parse_cpus, pin_self, raise_fd_limit, say, tree_cpu_seconds
from bench.stack import (
    AUTH_HEADER,
    BENCH_MODEL,
    REPO_ROOT,
    SERVED_ID,
    set_token_interval,
    start_floor,
    start_gateway,
    start_triton,
)
from gateway.triton.embedded import EmbeddedTriton


@dataclass(frozen=True)
class Options:
    concurrency: tuple[int, ...]
    modes: tuple[str, ...]
    profiles: tuple[str, ...]
    tokens: int
    interval_us: int
    duration_s: float
    max_requests: int
    workers: int
    gateway_cpus: set[int] | None
    other_cpus: set[int] | None
    out: Path
    wait_quiet_min: float
    quiet_load: float
    gateway_source: Path | None = None
    triton_instances: int = 1
    images: tuple[int, ...] = ()
    gateway_workers: int = 1


def add_arguments(parser: argparse.ArgumentParser) -> None:
    last_cpu = str((os.cpu_count() or 1) - 1)
    add = parser.add_argument
    add("--concurrency", default="1,16,64,256", help="comma-separated stream counts")
    add("--modes", default=",".join(report.MODES), help="subset of " + ",".join(report.MODES))
    add("--profiles", default="paced,flood", help="paced (tokens --interval-us apart), flood")
    add("--tokens", type=int, default=64, help="tokens per request (max_tokens)")
    add("--interval-us", type=int, default=30_000, help="token gap of the paced profile")
    add("--duration", type=float, default=4.0, help="seconds per measured phase (bound)")
    add("--max-requests", type=int, default=3000, help="requests per phase (bound)")
    add("--workers", type=int, default=2, help="load-generator processes")
    add("--gateway-cpu", default=last_cpu, help="CPU(s) for the gateway and LiteLLM, or all")
    add(
        "--other-cpus",
        default="rest",
        help="CPU(s) for Triton and the load generator: rest (all but the gateway's), all, 0,...",
    )
    add("--out", type=Path, help="result folder (default build/bench/overhead-<time>)")
    add("--wait-quiet", type=float, default=0, help="minutes to wait for a quiet machine")
    add("--quiet-load", type=float, default=1.0, help="1-minute load average deemed quiet")
    add("--gateway-source", type=Path, help="run the gateway of another checkout (before/after)")
    add("--triton-instances", type=int, default=1, help="fixture instances (stub processes)")
    add("--image", default="", help="JPEG sides for the 1-image profiles, e.g. 336,1024")
    add("--gateway-workers", type=int, default=1, help="mmgw serve --workers (on --gateway-cpu)")


def options_from(args: argparse.Namespace) -> Options:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return Options(
        concurrency=tuple(int(c) for c in args.concurrency.split(",")),
        modes=tuple(m for m in args.modes.split(",") if m),
        profiles=tuple(p for p in args.profiles.split(",") if p),
        tokens=args.tokens,
        interval_us=args.interval_us,
        duration_s=args.duration,
        max_requests=args.max_requests,
        workers=args.workers,
        gateway_cpus=parse_cpus(args.gateway_cpu),
        other_cpus=other_cpus(args.other_cpus, parse_cpus(args.gateway_cpu)),
        out=args.out or REPO_ROOT / "build" / "bench" / f"overhead-{stamp}",
        wait_quiet_min=args.wait_quiet,
        quiet_load=args.quiet_load,
        gateway_source=args.gateway_source,
        triton_instances=args.triton_instances,
        images=tuple(int(side) for side in args.image.split(",") if side),
        gateway_workers=args.gateway_workers,
    )


def loadavg_line() -> str:
    with open("/proc/loadavg", encoding="ascii") as loadavg:
        return loadavg.read().strip()


def other_cpus(spec: str, gateway: set[int] | None) -> set[int] | None:
    """Where Triton and the load generator run; 'rest' keeps them off the gateway's core,
    so the gateway's figures are those of one core of its own."""
    if spec != "rest":
        return parse_cpus(spec)
    if gateway is None:
        return None
    rest = set(range(os.cpu_count() or 1)) - gateway
    return rest or None


def load_average() -> float:
    return float(loadavg_line().split()[0])


def wait_for_quiet(minutes: float, threshold: float) -> float:
    """Poll the 1-minute load every minute, up to ``minutes``; the load finally seen."""
    deadline = time.monotonic() + minutes * 60
    load = load_average()
    while load >= threshold and time.monotonic() < deadline:
        say(f"1-minute load {load:.2f} >= {threshold}: waiting for a quiet machine ...")
        time.sleep(60)
        load = load_average()
    return load


def machine() -> dict[str, object]:
    """What the figures were measured on."""
    with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
        models = [
            line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name")
        ]
    return {
        "nproc": os.cpu_count(),
        "cpu_model": models[0] if models else platform.processor(),
        "python": platform.python_version(),
        "kernel": platform.release(),
        "date": time.strftime("%Y-%m-%d %H:%M %Z"),
        "loadavg_start": loadavg_line(),
    }


def targets(
    triton: EmbeddedTriton,
    gateway: Service,
    litellm: Service | None,
    floor: Service | None = None,
) -> dict[str, Target]:
    found = {
        "grpc": Target("grpc", triton.grpc_port, BENCH_MODEL),
        "gateway": Target(
            "gateway", gateway.port, SERVED_ID, "/v1/chat/completions", (AUTH_HEADER,)
        ),
        "triton_http": Target(
            "triton_http",
            triton.http_port,
            BENCH_MODEL,
            f"/v2/models/{BENCH_MODEL}/generate_stream",
        ),
    }
    if floor is not None:  # chat-shaped like the gateway: the load generator's chat user
        found["floor"] = Target("floor", floor.port, SERVED_ID, "/v1/chat/completions")
    if litellm is not None:
        found["litellm"] = Target(
            "litellm", litellm.port, SERVED_ID, "/v1/chat/completions", (AUTH_HEADER,)
        )
    return found


def sampler(triton: EmbeddedTriton, proxies: dict[str, Service]) -> Callable[[], dict[str, float]]:
    """CPU seconds of Triton (with its stub) and of each proxy, read at the barriers."""
    assert triton.pid is not None
    pids = {"triton": triton.pid, **{name: s.pid for name, s in proxies.items()}}

    def sample() -> dict[str, float]:
        found: dict[str, float] = {}
        for name, pid in pids.items():
            found.update(tree_cpu_seconds(pid, name))
        return found

    return sample


async def measure_all(
    opts: Options, triton: EmbeddedTriton, proxies: dict[str, Service], pool: WorkerPool
) -> list[report.Measurement]:
    """Every profile x concurrency x path, in that nesting, one phase each; then the image
    profiles (paced) for (a) and (b)."""
    available = targets(triton, proxies["gateway"], proxies.get("litellm"), proxies.get("floor"))
    sample = sampler(triton, proxies)
    rows: list[report.Measurement] = []
    profiles: list[tuple[str, ImageLoad | None]] = [(p, None) for p in opts.profiles]
    profiles += [(load.profile, load) for load in map(_image, opts.images)]
    for profile, image in profiles:
        interval = 0 if profile == "flood" else opts.interval_us
        await set_token_interval(triton, interval, instances=opts.triton_instances)
        for concurrency in opts.concurrency:
            for mode in (m for m in opts.modes if m in available):
                if image is not None and mode not in report.IMAGE_MODES:
                    continue
                # Paced requests all last tokens x interval: spread their starts over one
                # request's length, so arrivals are steady rather than lock-step bursts.
                stagger = opts.tokens * interval / 1e6
                target = replace(available[mode], image=image)
                phase = Phase(target, 0, opts.tokens, opts.duration_s, 1, True, stagger)
                window = await pool.run(phase, concurrency, opts.max_requests, sample)
                proxy = window.delta(mode) if mode in proxies and window.before else None
                triton_cpu = window.delta("triton") if window.before else float("nan")
                row = report.measure(
                    profile, mode, concurrency, window.result, window.wall_s, proxy, triton_cpu
                )
                rows.append(row)
                say(_progress(row))
                if row.errors and not row.tps:
                    # Nothing got through: a broken setup, not a measurement; stop here
                    # rather than spend the remaining phases on the same error.
                    raise SystemExit(f"every request failed: {row.error_sample}")
    return rows


def _image(side: int) -> ImageLoad:
    say(f"making the {side} x {side} JPEG and its tensors ...")
    return image_load(side, SERVED_ID)


def _progress(r: report.Measurement) -> str:
    cpu = f", proxy {r.proxy_cpu_per_1k:.3f} CPU s/1k tok" if r.proxy_cpu_per_1k else ""
    errors = f", {r.errors} errors ({r.error_sample})" if r.errors else ""
    return (
        f"{r.profile:5} c={r.concurrency:<4} {r.mode:11} TTFT p50 {r.ttft_p50:7.2f} "
        f"p99 {r.ttft_p99:7.2f} ms | ITL p50 {r.itl_p50:6.2f} p99 {r.itl_p99:6.2f} ms | "
        f"{r.rps:7.1f} req/s {r.tps:8.0f} tok/s{cpu}{errors}"
    )


def write_report(out: Path, info: dict[str, object], rows: list[report.Measurement]) -> str:
    """results.json, report.md and overhead.png in ``out``; returns the markdown."""
    (out / "results.json").write_text(
        json.dumps({"machine": info, "rows": report.as_dicts(rows)}, indent=1)
    )
    report.plot(rows, out / "overhead.png")
    text = "\n\n".join(
        [
            "Ratios against (a) direct gRPC at the same profile and load:",
            report.ratio_table(rows),
            "Absolute figures:",
            report.absolute_table(rows),
            "Goals:\n" + "\n".join(f"- {g}" for g in report.goals(rows)),
        ]
    )
    (out / "report.md").write_text(text + "\n")
    return text


async def run(opts: Options) -> int:
    """Start everything, measure every phase, write the report, stop everything."""
    opts.out.mkdir(parents=True, exist_ok=True)
    raise_fd_limit()
    if opts.wait_quiet_min:
        wait_for_quiet(opts.wait_quiet_min, opts.quiet_load)
    info = machine()
    say(f"machine: {info['nproc']} x {info['cpu_model']}, load {info['loadavg_start']}")
    pin_self(opts.other_cpus)  # Triton, its stub and the workers inherit this
    say("starting Triton over server_repo/bench_models ...")
    triton = await start_triton()
    proxies: dict[str, Service] = {}
    pool = None
    try:
        say(f"starting the gateway pinned to CPU {opts.gateway_cpus} ...")
        proxies["gateway"] = start_gateway(
            triton, opts.out, opts.gateway_cpus, source=opts.gateway_source,
            workers=opts.gateway_workers,
        )  # fmt: skip
        if "floor" in opts.modes:
            say("starting the floor relay (same CPU) ...")
            proxies["floor"] = start_floor(
                triton, opts.out, opts.gateway_cpus, workers=opts.gateway_workers
            )
        if "litellm" in opts.modes:
            say("starting LiteLLM (same CPU) ...")
            proxies["litellm"] = start_litellm(triton.http_url, opts.out, opts.gateway_cpus)
        pool = WorkerPool(opts.workers)
        rows = await measure_all(opts, triton, proxies, pool)
    finally:
        if pool is not None:
            pool.close()
        for service in proxies.values():
            service.stop()
        await triton.stop()
    info["loadavg_end"] = loadavg_line()
    print(write_report(opts.out, info, rows), flush=True)
    say(f"results in {opts.out}")
    return 0
