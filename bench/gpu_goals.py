"""``python -m bench gpu-goals``: every goal of issue 28 measured in one run, goal vs measured.

Made for the 16-core GPU host and a short device budget: one Triton (the load fixture, several
instances), one ``mmgw serve --workers N`` per ``--stream-clients`` value (``upstream.
stream_client``: grpcio and auto by default), all pinned to the N highest cores (the idle one
costs nothing), everything else on the rest, and then, on that stack, for each gateway:

1. ``bench scale``'s point: flood, 128 streams, the gateway against Triton's own
   ``generate_stream``, ``--runs`` times (interleaved, each run measures both), so the ratio's
   min / median / max say whether it is >= 0.9 every run and >= 0.95 at the median; the same
   phases give the relayed tokens per gateway CPU-second (all workers together);
2. 64 paced streams (30 ms a token), direct gRPC vs the gateway: the added TTFT p50 / p99;
3. one JPEG of 336 and 1024 px per request, paced, at 1 and 16 streams: the gateway (a
   ``data:`` URL it decodes, preprocesses, hashes and sends) vs direct gRPC carrying the same
   tensors: the added TTFT p50.

Then what bounds the goals that are not met, on the same host (``--no-diagnosis`` skips it):

4. ``bench image-job``: the image job (decode, preprocess, digest) in-process on a gateway
   core, warm and paced: what the image path costs in CPU, without hand-offs;
5. ``bench trace``: one 336 and one 1024 px request at a time, traced by the gateway (OTLP to
   a local receiver) and joined to the client's clock: where each millisecond of the added
   TTFT goes, before, inside and after the gateway (needs the ``otel`` extra);
6. ``bench profile``: py-spy on one gateway worker under its share of the flood (128 streams
   over the workers): the functions that bound tokens per CPU-second (needs py-spy); then
   ``--syscalls``: its system calls per relayed token (needs strace).

About 9 minutes with the defaults on that host (``--no-diagnosis`` then ``--diagnosis-only``
split it in two, about 6 and 3); results (every row, the goals table, the diagnosis) under
``--out``. The issue's LLaVA-1.5-7B-shaped row is its own command (a 14 GB checkpoint
generated on the GPU): ``bench/real_shape.sh`` (``python -m bench real-shape``).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import time
from collections.abc import Awaitable, Iterator
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from bench import goals_plot, overhead, report
from bench.goals_tables import floor_table, goals_table
from bench.pool import WorkerPool
from bench.procs import pin_self, raise_fd_limit, say
from bench.stack import REPO_ROOT, start_floor, start_gateway, start_triton

if TYPE_CHECKING:
    from bench.procs import Service
    from gateway.triton.embedded import EmbeddedTriton

_STREAM_CLIENT_ENV = "MMGW_UPSTREAM__STREAM_CLIENT"
_DEVICE_ENV = "MMGW_DECODE__DEVICE"


BASELINE = "auto-baseline"  # the --baseline checkout's gateway, in the tables and rows


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("--gateway-workers", type=int, default=4, help="mmgw serve --workers (own cores)")
    add("--runs", type=int, default=5, help="flood runs (gateway and generate_stream each)")
    add("--duration", type=float, default=4.0, help="seconds per phase (bound)")
    add("--image-duration", type=float, help="seconds per image phase (default: --duration)")
    add("--flood-concurrency", type=int, default=128, help="streams of the flood phases")
    add("--images", default="336,1024", help="JPEG sides")
    add("--image-concurrency", default="1,16", help="streams of the image phases")
    add("--workers", type=int, default=6, help="load-generator processes")
    add("--triton-instances", type=int, default=6, help="fixture instances")
    add("--out", type=Path, help="result folder (default build/bench/gpu-goals-<time>)")
    add("--stream-clients", default="grpcio,auto",
        help="upstream.stream_client values (grpcio, h2, auto), side by side")  # fmt: skip
    add(
        "--baseline",
        type=Path,
        help="also a gateway from this checkout (stream client auto), side by side: before/after",
    )
    add(
        "--decode-device",
        help="also the gateway with [decode] device = this (cuda: nvJPEG), stream client auto, "
        "on the image phases alone (text never decodes)",
    )
    add(
        "--variant",
        action="append",
        default=[],
        metavar="NAME:KEY=VALUE[,KEY=VALUE]",
        help="also the gateway with these environment settings, as auto+NAME (stream client "
        "auto), on the image phases alone; e.g. cuda-noloop:MMGW_DECODE__DEVICE=cuda,"
        "MMGW_DECODE__INLINE_MAX_PIXELS=0 (repeatable)",
    )
    add("--no-diagnosis", action="store_true", help="skip the image job, traces and profile")
    add("--diagnosis-only", action="store_true", help="only the image job, traces and profile")
    add("--trace-requests", type=int, default=20, help="traced requests per JPEG side")
    add("--profile-s", type=float, default=8.0, help="seconds of py-spy under flood")
    add("--no-floor", dest="floor", action="store_false",
        help="leave out the floor relay (bench/floor.py) in the flood runs")  # fmt: skip


def _options(args: argparse.Namespace, out: Path, **fields: object) -> overhead.Options:
    base = {
        "concurrency": (args.flood_concurrency,), "modes": ("triton_http", "gateway"),
        "profiles": ("flood",), "tokens": 64, "interval_us": 30_000,
        "duration_s": args.duration, "max_requests": 20_000, "workers": args.workers,
        "gateway_cpus": None, "other_cpus": None, "out": out, "wait_quiet_min": 0,
        "quiet_load": 1.0, "triton_instances": args.triton_instances,
    }  # fmt: skip
    return overhead.Options(**{**base, **fields})  # type: ignore[arg-type]


async def run(args: argparse.Namespace) -> int:
    out = args.out or REPO_ROOT / "build" / "bench" / f"gpu-goals-{time.strftime('%Y%m%d-%H%M%S')}"
    out.mkdir(parents=True, exist_ok=True)
    raise_fd_limit()
    started = time.monotonic()
    cores = sorted(os.sched_getaffinity(0))
    count = args.gateway_workers
    gateway_cpus = set(cores[-count:]) if count < len(cores) else None
    others = set(cores[:-count]) if gateway_cpus else None
    clients = [c for c in args.stream_clients.split(",") if c]
    if importlib.util.find_spec("grpclib") is None:
        for client in {"h2", "auto"} & set(clients):
            say(
                f"grpclib is not installed: stream client {client} is left out "
                "(pip install grpclib)"
            )
            clients.remove(client)
    info = overhead.machine()
    say(f"machine: {info['nproc']} x {info['cpu_model']}, load {info['loadavg_start']}")
    images = tuple(int(side) for side in args.images.split(",") if side)
    if args.diagnosis_only:  # the second half of a run split in two (one command <= 10 min)
        pin_self(others)
        report_text = await diagnosis(args, out, sorted(gateway_cpus or cores), images, clients)
        (out / "diagnosis.md").write_text(report_text + "\n")
        print(f"\n{info}\n\n{report_text}", flush=True)
        return 0
    pin_self(others)
    triton = await start_triton()
    pool = WorkerPool(args.workers)
    gateways: dict[str, Service] = {}
    floor: Service | None = None
    try:
        for client in clients:  # side by side on the same cores: the idle one costs nothing
            (out / client).mkdir(exist_ok=True)
            with _stream_client(client):
                gateways[client] = start_gateway(triton, out / client, gateway_cpus, workers=count)
        if args.baseline is not None:  # the same gateway at another commit, same cores
            (out / BASELINE).mkdir(exist_ok=True)
            with _stream_client("auto"):
                gateways[BASELINE] = start_gateway(
                    triton, out / BASELINE, gateway_cpus, source=args.baseline, workers=count
                )
        if args.decode_device:  # images decoded on the GPU, the same code otherwise
            name = f"auto+{args.decode_device}"
            (out / name).mkdir(exist_ok=True)
            with _env(_STREAM_CLIENT_ENV, "auto"), _env(_DEVICE_ENV, args.decode_device):
                gateways[name] = start_gateway(triton, out / name, gateway_cpus, workers=count)
        for name, settings in map(_variant, args.variant):  # the same code, other settings
            (out / name).mkdir(exist_ok=True)
            with _env(_STREAM_CLIENT_ENV, "auto"), _envs(settings):
                gateways[name] = start_gateway(triton, out / name, gateway_cpus, workers=count)
        if args.floor:  # the stack's own cost per token, on the same cores (bench/floor.py)
            floor = start_floor(triton, out, gateway_cpus, workers=count)
        measured = await _measure(args, out, triton, pool, gateways, floor, images)
    finally:
        pool.close()
        for service in [*gateways.values(), *([floor] if floor else [])]:
            service.stop()
        await triton.stop()
    info["loadavg_end"] = overhead.loadavg_line()
    info["gateway"] = f"{count} workers on CPUs {sorted(gateway_cpus or [])}"
    info["wall_s"] = round(time.monotonic() - started, 1)
    text = measured.write(out, info)
    print(f"\n{info}\n\n{text}", flush=True)
    if not args.no_diagnosis:
        report_text = await diagnosis(args, out, sorted(gateway_cpus or cores), images, clients)
        (out / "diagnosis.md").write_text(report_text + "\n")
        print(f"\n{report_text}", flush=True)
    say(f"results in {out}")
    return 0


@dataclass
class _Measured:
    """Every phase's rows: per stream client (floods per run, paced, images), the floor's."""

    floods: dict[str, list[list[report.Measurement]]] = field(default_factory=dict)
    paced: dict[str, list[report.Measurement]] = field(default_factory=dict)
    images: dict[str, list[report.Measurement]] = field(default_factory=dict)
    floors: list[list[report.Measurement]] = field(default_factory=list)
    floor_paced: list[report.Measurement] = field(default_factory=list)

    def write(self, out: Path, info: dict[str, object]) -> str:
        """The goals tables (also ``goals.md``) and every row (``results.json``)."""
        clients = list(self.images)
        tables = {
            c: goals_table(self.floods.get(c, []), self.paced.get(c, []), self.images[c])
            for c in clients
        }
        text = "\n\n".join(f"upstream.stream_client = {c}:\n\n{t}" for c, t in tables.items())
        if self.floors:
            text += "\n\n" + floor_table(self.floors, self.floor_paced)
        rows: list[dict[str, object]] = []
        for c in clients:
            runs = [r for run_rows in self.floods.get(c, []) for r in run_rows]
            mine = runs + self.paced.get(c, []) + self.images[c]
            rows += [{**asdict(r), "stream_client": c} for r in mine]
        floor_rows = [r for run_rows in self.floors for r in run_rows] + self.floor_paced
        rows += [{**asdict(r), "stream_client": "grpcio"} for r in floor_rows]
        dump = {"machine": info, "rows": rows, "goals": text}
        (out / "results.json").write_text(json.dumps(dump, indent=1))
        (out / "goals.md").write_text(text + "\n")
        try:  # the image rows drawn (python -m bench goals-plot draws several runs)
            goals_plot.plot([goals_plot.added_by_gateway(rows)], out / "images.png")
        except ImportError:
            say("matplotlib is not installed: no images.png")
        return text


async def _measure(
    args: argparse.Namespace,
    out: Path,
    triton: EmbeddedTriton,
    pool: WorkerPool,
    gateways: dict[str, Service],
    floor: Service | None,
    images: tuple[int, ...],
) -> _Measured:
    """The flood runs (each gateway, then the floor, interleaved run by run so drift hits
    them alike), then each gateway's paced and image phases, then the floor's paced one."""
    texts = {name: g for name, g in gateways.items() if "+" not in name}  # not images alone
    measured = _Measured(floods={client: [] for client in texts})
    on_floor = {"gateway": floor, "floor": floor} if floor is not None else {}
    for index in range(args.runs):
        for client, gateway in texts.items():
            say(f"flood run {index + 1} of {args.runs}, stream client {client}")
            measured.floods[client].append(await overhead.measure_all(
                _options(args, out), triton, {"gateway": gateway}, pool))  # fmt: skip
        if on_floor:
            say(f"flood run {index + 1} of {args.runs}, the floor relay")
            measured.floors.append(await overhead.measure_all(
                _options(args, out, modes=("triton_http", "grpc", "floor")), triton,
                on_floor, pool))  # fmt: skip
    paced_opts = _options(args, out, concurrency=(64,), modes=("grpc", "gateway"),
                          profiles=("paced",))  # fmt: skip
    image_opts = _options(
        args, out, profiles=(), modes=("grpc", "gateway"), images=images,
        concurrency=tuple(int(c) for c in args.image_concurrency.split(",")),
        duration_s=args.image_duration or args.duration,
    )  # fmt: skip
    for client, gateway in gateways.items():
        say(f"paced and image phases, stream client {client}")
        proxies = {"gateway": gateway}
        if client in texts:
            measured.paced[client] = await overhead.measure_all(paced_opts, triton, proxies, pool)
        measured.images[client] = await overhead.measure_all(image_opts, triton, proxies, pool)
    if on_floor:  # what the stack alone adds to a first token, same load
        say("paced phase, the floor relay")
        floor_opts = replace(paced_opts, modes=("grpc", "floor"))
        measured.floor_paced = await overhead.measure_all(floor_opts, triton, on_floor, pool)
    return measured


def _stream_client(client: str) -> contextlib.AbstractContextManager[None]:
    """The gateways started inside read Triton's streams with ``client``."""
    return _env(_STREAM_CLIENT_ENV, client)


def _variant(spec: str) -> tuple[str, dict[str, str]]:
    """``NAME:KEY=VALUE,KEY=VALUE`` -> ("auto+NAME", its settings)."""
    name, _, pairs = spec.partition(":")
    settings = dict(pair.split("=", 1) for pair in pairs.split(",") if pair)
    if not name or not settings:
        raise SystemExit(f"--variant {spec!r}: expected NAME:KEY=VALUE[,KEY=VALUE]")
    return f"auto+{name}", settings


@contextlib.contextmanager
def _envs(settings: dict[str, str]) -> Iterator[None]:
    with contextlib.ExitStack() as stack:
        for name, value in settings.items():
            stack.enter_context(_env(name, value))
        yield


@contextlib.contextmanager
def _env(name: str, value: str) -> Iterator[None]:
    """The gateways started inside have this setting (their settings come from the
    environment, as any deployment's may)."""
    saved = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = saved


async def diagnosis(
    args: argparse.Namespace,
    out: Path,
    gateway_cpus: list[int],
    images: tuple[int, ...],
    clients: list[str],
) -> str:
    """What bounds the goals on this host: the image job, traced image requests, a profile of
    one worker under flood. A part that cannot run here says why and the rest goes on."""
    from bench import image_job

    sections = []
    say("diagnosis: the image job in-process, on a gateway core")
    pin_self({gateway_cpus[-1]})
    job_args = argparse.Namespace(
        sides=",".join(str(side) for side in images), repeat=100, paced=20, gap_ms=100.0
    )
    sections.append(f"### The image job in-process (CPU {gateway_cpus[-1]})\n\n"
                    f"{image_job.table(job_args)}")  # fmt: skip
    for client in clients:
        with _stream_client(client):
            sections += await _traced_and_profiled(args, out / client, gateway_cpus, images)
    return "\n\n".join(sections)


async def _traced_and_profiled(
    args: argparse.Namespace, out: Path, gateway_cpus: list[int], images: tuple[int, ...]
) -> list[str]:
    from bench import profile, trace

    count, client = args.gateway_workers, os.environ.get(_STREAM_CLIENT_ENV, "grpcio")
    cpus = ",".join(str(c) for c in gateway_cpus)
    sections = []
    # A text request first (side 0): what every request pays before the image's own work;
    # then text under the paced goal's load (64 streams), where the added TTFT goal is set.
    runs = [(side, 1, args.trace_requests) for side in (0, *images)]
    runs.append((0, 64, 3 * 64))
    for side, streams, requests in runs if args.trace_requests else ():
        what = (f"{side} px" if side else "text-only") + f", {streams} stream(s)"
        say(f"diagnosis: {requests} traced {what} requests ({client})")
        trace_args = argparse.Namespace(
            image=side, requests=requests, concurrency=streams, tokens=16,
            gateway_cpu=cpus, gateway_workers=count, out=out / f"trace-{side}-{streams}",
        )  # fmt: skip
        sections.append(
            f"### Traced {what} requests, stream client {client} ({count} workers on CPUs "
            f"{cpus}; ms)\n\n" + await _or_why(trace.traced(trace_args), "pip install '.[otel]'")
        )
    if args.profile_s > 0:
        streams = max(1, args.flood_concurrency // count)
        say(f"diagnosis: py-spy on one worker ({client}), {streams} flooding streams")
        profile_args = argparse.Namespace(
            concurrency=streams, duration=args.profile_s, tokens=64, interval_us=0, rate=200,
            workers=args.workers, top=25, image=0, gateway_cpu=str(gateway_cpus[-1]),
            out=out / "profile", syscalls=False,
        )  # fmt: skip
        where = f"one worker on CPU {gateway_cpus[-1]}, {streams} flooding streams"
        sections.append(
            f"### py-spy, stream client {client}, {where}\n\n"
            + await _or_why(profile.profiled(profile_args), "pip install py-spy", "```\n")
        )
        say(f"diagnosis: strace on one worker ({client}), {streams} flooding streams")
        counting = argparse.Namespace(**{**vars(profile_args), "syscalls": True,
                                         "duration": min(args.profile_s, 4.0),
                                         "out": out / "syscalls"})  # fmt: skip
        sections.append(
            f"### System calls per token, stream client {client}, {where} (under strace)\n\n"
            + await _or_why(profile.profiled(counting), "strace not installed", "```\n")
        )
    return sections


async def _or_why(work: Awaitable[str], remedy: str, fence: str = "") -> str:
    """``work``'s text, or the reason it could not run (a missing extra, no ptrace)."""
    try:
        text = await work
    except Exception as exc:  # a diagnosis that cannot run must not lose the goals' run
        return f"skipped: {type(exc).__name__}: {exc} ({remedy})"
    return f"{fence}{text}\n{fence}".strip() if fence else text
