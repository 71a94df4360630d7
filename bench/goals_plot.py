"""``python -m bench goals-plot RESULTS.json ... --out PNG``: the image goals, drawn.

One panel per JPEG side: each gateway's added TTFT (its p50 minus direct gRPC's in the same
phase) at each concurrency, one dot per run given (``results.json`` of ``bench gpu-goals``),
the goal as a line. ``gpu-goals`` draws its own run's (``images.png``); given several runs'
files, the dots show how far the same gateway moved from one run to the next.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

__all__ = ["add_arguments", "added_by_gateway", "main", "plot"]

_GOALS = {336: 3.0, 1024: 8.0}

Point = tuple[int, int, str]  # (side, concurrency, gateway)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("results", type=Path, nargs="+", help="gpu-goals results.json files")
    parser.add_argument("--out", type=Path, required=True, help="the PNG to write")


def added_by_gateway(rows: list[dict[str, object]]) -> dict[Point, float]:
    """(side, concurrency, gateway) -> added TTFT p50 in ms, from one run's rows."""
    grpc: dict[tuple[str, int, str], float] = {}
    gateway: dict[tuple[str, int, str], float] = {}
    for row in rows:
        profile = str(row["profile"])
        if not profile.startswith("image"):
            continue
        key = (profile, int(str(row["concurrency"])), str(row["stream_client"]))
        target = grpc if row["mode"] == "grpc" else gateway if row["mode"] == "gateway" else None
        if target is not None:
            target[key] = float(str(row["ttft_p50"]))
    return {
        (int(profile.removeprefix("image")), streams, name): value - grpc[key]
        for key, value in gateway.items()
        if key in grpc
        for profile, streams, name in [key]
    }


def plot(runs: list[dict[Point, float]], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sides = sorted({side for run in runs for side, _, _ in run})
    names = sorted({name for run in runs for _, _, name in run})
    figure, axes = plt.subplots(1, len(sides), figsize=(5.5 * len(sides), 4), squeeze=False)
    for axis, side in zip(axes[0], sides, strict=True):
        points: dict[tuple[int, str], list[float]] = defaultdict(list)
        for run in runs:
            for (run_side, streams, name), value in run.items():
                if run_side == side:
                    points[(streams, name)].append(value)
        streams_seen = sorted({streams for streams, _ in points})
        for offset, name in enumerate(names):
            for index, streams in enumerate(streams_seen):
                values = points.get((streams, name), [])
                x = index + (offset - (len(names) - 1) / 2) * 0.22
                axis.scatter([x] * len(values), values, label=name if index == 0 else None,
                             color=f"C{offset}", s=28)  # fmt: skip
        axis.axhline(_GOALS.get(side, 3.0), color="black", linestyle="--", linewidth=1,
                     label="goal")  # fmt: skip
        axis.set_xticks(range(len(streams_seen)), [f"{s} stream(s)" for s in streams_seen])
        axis.set_title(f"one {side} px JPEG")
        axis.set_ylabel("added TTFT p50, ms (gateway - direct gRPC)")
        axis.set_ylim(bottom=0)
        axis.grid(axis="y", alpha=0.3)
    axes[0][0].legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(out, dpi=110)
    plt.close(figure)


def main(args: argparse.Namespace) -> int:
    runs = [added_by_gateway(json.loads(path.read_text())["rows"]) for path in args.results]
    plot(runs, args.out)
    print(f"wrote {args.out}")
    return 0
