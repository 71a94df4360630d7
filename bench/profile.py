"""``python -m bench profile``: where the gateway process spends its CPU under streaming load.

``--syscalls``: strace counts the gateway's system calls instead (every thread), per relayed
token: how many writes, reads, epoll waits and thread hand-offs one token costs.

py-spy samples the running ``mmgw serve`` process from outside (no code change, negligible
overhead with ``--nonblocking``) while the load generator streams through it; the collapsed
stacks are saved (``profile.txt``, feed it to any flame-graph tool) and summarised as the
functions with the most samples on-CPU by themselves (self) and beneath them (total).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path

from bench.images import image_load
from bench.loadgen import Phase, Target
from bench.pool import WorkerPool
from bench.procs import cpu_seconds, parse_cpus, raise_fd_limit, say
from bench.report import measure
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
    add("--concurrency", type=int, default=64)
    add("--duration", type=float, default=10.0, help="seconds sampled")
    add("--tokens", type=int, default=64)
    add("--interval-us", type=int, default=0, help="token gap (0: flood)")
    add("--rate", type=int, default=200, help="py-spy samples per second")
    add("--workers", type=int, default=2)
    add("--top", type=int, default=30, help="functions listed")
    add("--image", type=int, default=0, help="a JPEG of this side in every request (0: text)")
    add("--gateway-cpu", default="1", help="CPU(s) for the gateway, or all")
    add("--out", type=Path, help="result folder (default build/bench/profile-<time>)")
    add("--syscalls", action="store_true", help="strace -c -f instead: system calls per token")


# Where a sample's own (self) time is, by the file or function of its innermost frame: the
# rooms of one relayed token. py-spy sees Python frames only, so C work is billed to the
# frame that called it: grpc's C core to the poller thread's ``Thread.run`` and to the
# ``await`` in grpc.aio's ``_read``; uvloop and the callbacks it runs in C to ``Runner.run``.
PARTS = (
    ("grpc poller thread (C core: Triton's socket, HTTP/2, completion queue)", "Thread.run "),
    ("grpc.aio per response (completion -> loop, next read started)", "_StreamResponseMixin."),
    ("HTTP write (uvicorn's send: a write per body)", "RequestResponseCycle.send "),
    ("event loop (uvloop: epoll, C callbacks)", "Runner.run "),
    ("HTTP/2 to Triton in Python (grpclib, h2: stream_client h2)", "grpclib/"),
    ("HTTP/2 to Triton in Python (grpclib, h2: stream_client h2)", "h2/"),
    ("HTTP/2 to Triton in Python (grpclib, h2: stream_client h2)", "hyperframe/"),
    ("HTTP/2 to Triton in Python (grpclib, h2: stream_client h2)", "hpack/"),
    ("grpc.aio / tritonclient per request", "grpc/"),
    ("grpc.aio / tritonclient per request", "tritonclient/"),
    ("the gateway's own Python", "gateway/"),
)


def by_part(collapsed: str) -> str:
    """Self samples grouped into ``PARTS`` (the rest: frameworks, the standard library)."""
    parts: Counter[str] = Counter()
    samples = 0
    for line in collapsed.splitlines():
        stack, _, count_text = line.rpartition(" ")
        frames = [f for f in stack.split(";") if f and not f.startswith("process ")]
        if not frames:
            continue
        samples += int(count_text)
        leaf = frames[-1]
        part = next((name for name, mark in PARTS if mark in leaf), "frameworks and the rest")
        parts[part] += int(count_text)
    lines = ["self %  part"]
    lines += [f"{100 * n / max(samples, 1):6.1f}  {part}" for part, n in parts.most_common()]
    return "\n".join(lines)


def summarise(collapsed: str, top: int) -> str:
    """Self and total sample shares per function from py-spy's collapsed stacks."""
    own: Counter[str] = Counter()
    total: Counter[str] = Counter()
    samples = 0
    for line in collapsed.splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack:
            continue
        count = int(count_text)
        frames = [f for f in stack.split(";") if not f.startswith("process ")]
        if not frames:
            continue
        samples += count
        own[frames[-1]] += count
        for frame in set(frames):
            total[frame] += count
    lines = [f"{samples} samples", "", "self %  function"]
    lines += [f"{100 * n / samples:6.1f}  {f}" for f, n in own.most_common(top)]
    lines += ["", "total %  function"]
    lines += [f"{100 * n / samples:6.1f}  {f}" for f, n in total.most_common(top)]
    return "\n".join(lines)


async def run(args: argparse.Namespace) -> int:
    """Stream through the gateway, sample it with py-spy (or count its system calls with
    strace), print the hottest functions (or the calls per token)."""
    tool = "strace" if args.syscalls else "py-spy"
    if shutil.which(tool) is None:
        say(f"{tool} is missing" + ("" if args.syscalls else ": pip install -e '.[bench]'"))
        return 2
    print(await profiled(args), flush=True)
    return 0


def per_token(strace_summary: str, tokens: int) -> str:
    """``strace -c``'s table as calls per relayed token, most frequent first."""
    counts: list[tuple[int, str]] = []
    for line in strace_summary.splitlines():
        fields = line.split()
        if len(fields) >= 5 and fields[0][0].isdigit() and fields[3].isdigit():
            counts.append((int(fields[3]), fields[-1]))
    lines = [f"{tokens} tokens relayed", "", "calls per token  syscall"]
    lines += [f"{n / max(tokens, 1):15.3f}  {name}" for n, name in sorted(counts, reverse=True)]
    return "\n".join(lines)


async def profiled(args: argparse.Namespace) -> str:
    """The load ``args`` describes, sampled: the rate line and the hottest functions."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out: Path = args.out or REPO_ROOT / "build" / "bench" / f"profile-{stamp}"
    out.mkdir(parents=True, exist_ok=True)
    tool = shutil.which("strace" if args.syscalls else "py-spy")
    if tool is None:
        raise RuntimeError(f"{'strace' if args.syscalls else 'py-spy'} is not on PATH")
    raise_fd_limit()
    triton = await start_triton()
    gateway = pool = None
    try:
        await set_token_interval(triton, args.interval_us)
        gateway = start_gateway(triton, out, parse_cpus(args.gateway_cpu))
        pool = WorkerPool(args.workers)
        target = Target("gateway", gateway.port, SERVED_ID, "/v1/chat/completions", (AUTH_HEADER,))
        if args.image:
            target = replace(target, image=image_load(args.image, SERVED_ID))
        phase = Phase(target, 0, args.tokens, args.duration, 1)
        if args.syscalls:  # every thread's calls, counted (strace slows the process down)
            record = [tool, "-c", "-f", "-p", str(gateway.pid), "-o", str(out / "strace.txt")]
        else:
            record = [tool, "record", "--pid", str(gateway.pid), "--rate", str(args.rate)]
            record += ["--nonblocking", "--format", "raw", "--output", str(out / "profile.txt")]
        spy: subprocess.Popen[bytes] | None = None

        def start_spy() -> dict[str, float]:
            nonlocal spy
            if spy is None:
                spy = subprocess.Popen(record, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            return {"gateway": cpu_seconds(gateway.pid)}

        window = await pool.run(phase, args.concurrency, 10**6, start_spy)
        assert spy is not None
        spy.send_signal(2)  # SIGINT: py-spy (strace) writes what it has and exits
        spy.wait(30)
    finally:
        if pool is not None:
            pool.close()
        if gateway is not None:
            gateway.stop()
        await triton.stop()
    row = measure("profile", "gateway", args.concurrency, window.result, window.wall_s,
                  window.delta("gateway"), 0.0)  # fmt: skip
    rate = f"{row.tps:.0f} tok/s, gateway {row.proxy_cpu_per_1k:.3f} CPU s per 1k tokens"
    if args.syscalls:
        summary = f"{rate}\n\n{per_token((out / 'strace.txt').read_text(), window.result.tokens)}"
        (out / "summary.txt").write_text(summary + "\n")
        return summary
    collapsed = (out / "profile.txt").read_text()
    summary = f"{rate}\n\n{by_part(collapsed)}\n\n{summarise(collapsed, args.top)}"
    (out / "summary.txt").write_text(summary + "\n")
    return summary
