"""``python -m bench hostile``: issue 22's "Done when", measured. One gateway process (the real
app and HTTP server, over an in-process paced fake of Triton whose contract takes guides)
receives 200 different hostile guides in a row (``hostile_guides.py``: deep, wide, recursive,
regex and grammar bombs, in every spelling), while another client's stream runs through them.

Printed: each kind's answers, the gateway's PID and RSS before and after (the same PID: no
crash; RSS bounded), the sandboxed compile workers it has then, and the stream's largest gap
between tokens while the guides were being refused (tokens come every ``--interval-ms``, so a
stalled event loop shows as a gap well over it). ``--open-limits`` lifts the structural limits,
so the guides reach the compiler: its crashes and timeouts happen in the sandbox instead.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import httpx

from bench.hostile_guides import MODEL, hostile_guides

STREAM_MODEL = "stream"
JSON = {"content-type": "application/json"}
BASELINE_S = 15.0
OPEN_LIMITS = {"max_ref_depth": 10**6, "max_rules": 10**6, "max_bytes": 64 << 20,
               "max_regex_bytes": 64 << 20, "max_depth": 10**6, "max_properties": 10**6,
               "max_branches": 10**7, "max_nodes": 10**8}  # fmt: skip


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--count", type=int, default=200, help="hostile guides sent in a row")
    parser.add_argument("--interval-ms", type=float, default=10.0, help="the stream's pace")
    parser.add_argument("--open-limits", action="store_true", help="lift the [guides] limits")
    parser.add_argument("--json", default=None, help="also write the figures to this file")
    parser.add_argument(
        "--baseline", action="store_true",
        help="send as many plain guided requests instead: the machine's own gaps, to compare",
    )  # fmt: skip


class PacedClient:
    """Triton as the gateway's client sees it: the ``stream`` model writes a word every
    ``interval_s`` until the call is closed; the guided model answers at once."""

    def __init__(self, url: str, interval_s: float | None) -> None:
        self.url = url
        self.interval_s = interval_s

    async def stream(
        self, model: str, inputs: Any, request_id: str, outputs: Any = (), route: Any = None
    ) -> AsyncIterator[Any]:
        from bench.hotpath import response_message

        if self.interval_s is None:
            yield response_message("{}", True)
            return
        while True:
            await asyncio.sleep(self.interval_s)
            yield response_message(" word", False)

    async def is_ready(self, models: Any = ()) -> bool:
        return True

    async def close(self) -> None:
        return None


def serve(port: int, interval_s: float, open_limits: bool) -> None:
    """The gateway process: the app over two paced fakes, on the gateway's own HTTP server."""
    import uvicorn

    from bench.structured import GUIDED_CONFIG
    from gateway.app import create_app
    from gateway.config import EmbeddedSettings, ServedModel, Settings
    from gateway.families.registry import get_family
    from gateway.media.fetch import FetchLimits, MediaFetcher
    from gateway.media.identity import ExtraIdRegistry
    from gateway.media.offload import Offloader
    from gateway.runtime import Runtime, ServedRuntime
    from gateway.server.options import uvicorn_options
    from gateway.triton.contract import parse_model_config

    models = [ServedModel(id=name, family="llava", triton_model="m", triton_url=f"fake:{i}")
              for i, name in enumerate((MODEL, STREAM_MODEL), start=1)]  # fmt: skip
    settings = Settings.model_validate({
        "models": models, "embedded": EmbeddedSettings(enabled=False),
        "server": {"port": port, "host": "127.0.0.1"}, "generation": {"max_tokens": 1_000_000},
        **({"guides": OPEN_LIMITS} if open_limits else {}),
    })  # fmt: skip
    served = {}
    for model, pace in zip(models, (None, interval_s), strict=True):
        client = PacedClient(str(model.triton_url), pace)
        served[model.id] = ServedRuntime(model, get_family("llava"), client)  # type: ignore[arg-type]
        served[model.id].contract = parse_model_config(GUIDED_CONFIG)
    runtime = Runtime(settings, served, {}, MediaFetcher(FetchLimits()), ExtraIdRegistry(),
                      Offloader())  # fmt: skip
    app = create_app(settings, runtime)
    app.state.runtime = runtime
    uvicorn.run(app, **uvicorn_options(settings, app, "warning"))


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        line = next(line for line in status if line.startswith("VmRSS:"))
    return int(line.split()[1]) / 1024


def children(pid: int) -> list[int]:
    """Processes whose parent is ``pid`` (started from any of its threads)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    fields = stat.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry))
    return found


def watch_stream(port: int) -> None:
    """The other client, in a process of its own (so the hostile bodies' encoding never delays
    what it sees): streams from the gateway until its stdin closes, then prints the arrival
    time of each token (``time.monotonic``, which every process on the host shares)."""
    arrivals: list[float] = []

    async def read() -> None:
        body = {"model": STREAM_MODEL, "messages": [{"role": "user", "content": "go"}],
                "stream": True, "max_tokens": 1_000_000}  # fmt: skip
        url = f"http://127.0.0.1:{port}"
        async with (
            httpx.AsyncClient(base_url=url, timeout=None, trust_env=False) as http,
            http.stream("POST", "/v1/chat/completions", json=body) as response,
        ):
            async for line in response.aiter_lines():
                if line.startswith("data: "):
                    arrivals.append(time.monotonic())

    async def main() -> None:
        task = asyncio.create_task(read())
        await asyncio.to_thread(sys.stdin.read)  # until the parent closes it
        task.cancel()

    asyncio.run(main())
    print(json.dumps(arrivals))


async def run(args: argparse.Namespace) -> int:
    from gateway.triton.embedded import free_loopback_port

    port = free_loopback_port()
    code = (f"from bench.hostile import serve; serve({port}, {args.interval_ms / 1000!r}, "
            f"{args.open_limits!r})")  # fmt: skip
    process = subprocess.Popen([sys.executable, "-c", code], env={**os.environ})
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=120,
                                     trust_env=False) as http:  # fmt: skip
            await _wait_live(http, process)
            figures = await _attack(http, process.pid, port, args)
    finally:
        process.terminate()
        process.wait(30)
    _report(figures)
    if args.json:
        with open(args.json, "w") as out:
            json.dump(figures, out, indent=2)
    return 0 if figures["same_pid"] and figures["served_after"] else 1


async def _wait_live(http: httpx.AsyncClient, process: subprocess.Popen[bytes]) -> None:
    for _ in range(600):
        if process.poll() is not None:
            raise SystemExit("the gateway did not start")
        try:
            if (await http.get("/health/live")).status_code == 200:
                return
        except httpx.TransportError:
            pass
        await asyncio.sleep(0.1)
    raise SystemExit("the gateway did not answer")


async def _attack(
    http: httpx.AsyncClient, pid: int, port: int, args: argparse.Namespace
) -> dict[str, Any]:
    warm = {"model": MODEL, "prompt": "go", "guided_regex": "[0-9]+"}
    guides = hostile_guides(args.count)
    if args.baseline:  # as long as a hostile run takes here, plain requests in a row
        guides = [("plain", "/v1/completions", warm)] * args.count * 50
    assert (await http.post("/v1/completions", json=warm)).status_code == 200
    rss_before = rss_mb(pid)
    watcher = subprocess.Popen(
        [sys.executable, "-c", f"from bench.hostile import watch_stream; watch_stream({port})"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
    )  # fmt: skip
    await asyncio.sleep(2.0)  # its stream under way
    encoded = [(label, path, json.dumps(body).encode()) for label, path, body in guides]
    outcomes: Counter[str] = Counter()
    slowest = (0.0, "")
    sent: list[tuple[float, str]] = []  # when each guide went out
    spans: list[tuple[float, float, str]] = []
    accepted: list[str] = []
    began = time.monotonic()
    for label, path, content in encoded:
        if args.baseline and time.monotonic() - began > BASELINE_S:
            break
        started = time.monotonic()
        sent.append((started, label))
        reply = await http.post(path, content=content, headers=JSON)
        took = time.monotonic() - started
        spans.append((started, started + took, label))
        slowest = max(slowest, (took, label))
        outcomes[f"{reply.status_code} {_kind(reply)}"] += 1
        if reply.status_code == 200:
            accepted.append(label)
    ended = time.monotonic()
    arrivals = json.loads(await asyncio.to_thread(lambda: watcher.communicate(b"")[0]))
    window = [t for t in arrivals if began <= t <= ended]
    gaps = [(b - a, b) for a, b in itertools.pairwise(window)]
    worst = sorted(gaps, reverse=True)[:3]
    served = await http.post("/v1/completions", json=warm)
    return {
        "guides": len(spans), "seconds": round(ended - began, 2), "outcomes": dict(outcomes),
        "slowest_refusal_s": round(slowest[0], 3), "slowest_guide": slowest[1],
        "pid": pid, "same_pid": _alive(pid), "rss_before_mb": round(rss_before, 1),
        "rss_after_mb": round(rss_mb(pid), 1), "compile_workers": len(children(pid)),
        "tokens_during": len(window), "max_gap_ms": round(worst[0][0] * 1000, 1),
        "p99_gap_ms": round(sorted(gaps)[int(0.99 * (len(gaps) - 1))][0] * 1000, 1),
        "worst_gaps": [(round(g * 1000, 1), _overlapping(spans, at - g, at)) for g, at in worst],
        "accepted": accepted,
        "interval_ms": args.interval_ms, "open_limits": args.open_limits,
        "served_after": served.status_code == 200, "baseline": args.baseline,
    }  # fmt: skip


def _kind(reply: httpx.Response) -> str:
    """The answer's code, and for a refused guide which step refused it."""
    if reply.status_code == 200:
        return "ok"
    error = reply.json().get("error", {})
    message, code = error.get("message", ""), error.get("code")
    if code != "invalid_guide":
        return str(code)
    for words, step in (("crashed the grammar compiler", "a compile worker crashed"),
                        ("compile_timeout_s", "a compile ran out of time"),
                        ("[guides]", "a structural limit")):  # fmt: skip
        if words in message:
            return f"{code} ({step})"
    return f"{code} (the engine's compile refused it)"


def _overlapping(spans: list[tuple[float, float, str]], start: float, end: float) -> list[str]:
    """The guides being answered during [start, end], with how long each took."""
    return [f"{label} ({b - a:.2f} s)" for a, b, label in spans if a <= end and b >= start]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True


def _report(f: dict[str, Any]) -> None:
    limits = "lifted (--open-limits)" if f["open_limits"] else "the defaults"
    what = "plain guided requests (--baseline)" if f["baseline"] else "hostile guides"
    print(f"\n{f['guides']} {what} in {f['seconds']} s, [guides] limits {limits}")
    for outcome, count in sorted(f["outcomes"].items()):
        print(f"  {count:4d} x {outcome}")
    print(f"slowest answer: {f['slowest_refusal_s']} s ({f['slowest_guide']})")
    print(f"gateway PID {f['pid']}: {'the same, alive' if f['same_pid'] else 'GONE'}; "
          f"RSS {f['rss_before_mb']} MB before, {f['rss_after_mb']} MB after; "
          f"{f['compile_workers']} sandboxed compile workers")  # fmt: skip
    print(
        f"the other client's stream: {f['tokens_during']} tokens meanwhile (one every "
        f"{f['interval_ms']:g} ms), max gap {f['max_gap_ms']} ms, p99 {f['p99_gap_ms']} ms"
    )
    print(f"largest gaps, and the guide then in flight: {f['worst_gaps']}")
    print(f"accepted (compiled): {sorted(set(f['accepted']))}")
    print(f"a plain guided request afterwards: {'200' if f['served_after'] else 'FAILED'}")


def main(args: argparse.Namespace) -> int:
    return asyncio.run(run(args))
