"""Issue 28's goals judged from measured rows: pure functions over ``report.Measurement``s
(the tables ``bench gpu-goals`` prints, re-renderable from a saved ``results.json``)."""

from __future__ import annotations

import statistics

from bench import report
from bench.scale import per_core


def _spread(values: list[float]) -> str:
    if not values:
        return "-"
    return f"{min(values):.2f} / {statistics.median(values):.2f} / {max(values):.2f}"


def _added(
    rows: list[report.Measurement], profile: str, concurrency: int, mode: str = "gateway"
) -> tuple[float, float]:
    """Added TTFT p50 and p99 (``mode`` minus direct gRPC) at ``profile`` and ``concurrency``."""
    by_mode = {r.mode: r for r in rows if r.profile == profile and r.concurrency == concurrency}
    gateway, grpc = by_mode.get(mode), by_mode.get("grpc")
    if gateway is None or grpc is None:
        return float("nan"), float("nan")
    return gateway.ttft_p50 - grpc.ttft_p50, gateway.ttft_p99 - grpc.ttft_p99


def _verdict(met: bool) -> str:
    return "met" if met else "NOT met"


def _flood_figures(
    floods: list[list[report.Measurement]], mode: str
) -> tuple[list[float], list[float]]:
    """Per flood run: ``mode``'s tokens per second over generate_stream's, and its tokens
    per CPU-second."""
    ratios, per_cpu = [], []
    for rows in floods:
        by_mode = {r.mode: r for r in rows}
        relay, native = by_mode.get(mode), by_mode.get("triton_http")
        if relay is not None and native is not None and native.tps:
            ratios.append(relay.tps / native.tps)
        core = per_core(relay) if relay is not None else None
        if core:
            per_cpu.append(core)
    return ratios, per_cpu


def floor_table(floors: list[list[report.Measurement]], paced: list[report.Measurement]) -> str:
    """What the stack alone reaches on the same cores (bench/floor.py): the ceiling any
    relay written on it meets, whatever its own code costs."""
    ratios, per_cpu = _flood_figures(floors, "floor")
    direct, _ = _flood_figures(floors, "grpc")  # no relay: Triton's gRPC stream endpoint itself
    return "\n".join([
        "The floor relay (`bench/floor.py`: uvicorn + grpc.aio + one write per token, no gateway"
        " code), same workers and cores, grpcio:",
        "",
        "| measure | min / median / max |",
        "|---|---|",
        f"| floor / generate_stream, flood ({len(ratios)} runs) | {_spread(ratios)} |",
        f"| direct gRPC streams (the load generator, no relay) / generate_stream | "
        f"{_spread(direct)} |",
        f"| relayed tokens per CPU-second | {_spread([c / 1000 for c in per_cpu])} k |",
        "| added TTFT, 64 paced streams (p50 / p99) | {:.2f} / {:.2f} ms |".format(
            *_added(paced, "paced", 64, "floor")),
    ])  # fmt: skip


def goals_table(
    floods: list[list[report.Measurement]],
    paced: list[report.Measurement],
    images: list[report.Measurement],
) -> str:
    """The issue's goals against what this run measured, one line each."""
    ratios, per_cpu = _flood_figures(floods, "gateway")
    lines = ["| goal | target | measured | verdict |", "|---|---|---|---|"]
    if floods:  # a gateway measured on images alone (``--decode-device``) has no text rows
        lines += _text_lines(ratios, per_cpu, paced)
    sides = sorted({int(r.profile.removeprefix("image")) for r in images})
    for side in sides:
        goal = 3.0 if side <= 336 else 8.0
        for concurrency in sorted({r.concurrency for r in images}):
            p50, p99 = _added(images, f"image{side}", concurrency)
            lines.append(
                f"| added TTFT, one {side} px JPEG, {concurrency} streams (p50; p99) | <= {goal:g}"
                f" ms | {p50:.2f} ms; {p99:.2f} ms | {_verdict(p50 <= goal)} |"
            )
    return "\n".join(lines)


def _text_lines(
    ratios: list[float], per_cpu: list[float], paced: list[report.Measurement]
) -> list[str]:
    lines = [
        f"| gateway / generate_stream, flood (min / median / max of {len(ratios)}) | >= 0.9 every "
        f"run, >= 0.95 median | {_spread(ratios)} | "
        f"{_verdict(bool(ratios) and min(ratios) >= 0.9 and statistics.median(ratios) >= 0.95)} |",
        f"| relayed tokens per gateway CPU-second (min / median / max) | >= 25,000 | "
        f"{_spread([c / 1000 for c in per_cpu])} k | "
        f"{_verdict(bool(per_cpu) and statistics.median(per_cpu) >= 25_000)} |",
    ]
    p50, p99 = _added(paced, "paced", 64)
    lines.append(
        f"| added TTFT, 64 paced streams (p50 / p99) | <= 1 / <= 3 ms | {p50:.2f} / {p99:.2f} ms"
        f" | {_verdict(p50 <= 1 and p99 <= 3)} |"
    )
    return lines
