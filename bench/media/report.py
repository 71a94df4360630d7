"""The results as a table (printed and written to bench/RESULTS.md) and an optional bar plot."""

from __future__ import annotations

import os
import platform
import re
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import av

from bench.media.cases import Timing

SECTION = "## Media (`bench/media`)"
BENCH_DIR = Path(__file__).resolve().parent.parent


def machine() -> str:
    """CPU model, cores and the versions that decide decoding speed."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    versions = ", ".join(f"{name} {_version(name)}" for name in ("pillow", "av", "transformers"))
    ffmpeg = ".".join(map(str, av.library_versions.get("libavcodec", ())))
    return (
        f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}, {versions}, "
        f"libavcodec {ffmpeg}"
    )


def _version(name: str) -> str:
    try:
        return version(name)
    except PackageNotFoundError:
        return "?"


def table(timings: Sequence[Timing]) -> str:
    rows = [
        "| case | gateway (ms) | baseline (ms) | speedup | CPU ms, gateway / baseline | "
        "CPU speedup | goal | outputs |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for t in timings:
        goal = "-" if t.case.goal is None else f">= {t.case.goal:g}x " + _met(t)
        cpu = f"{t.ours_cpu_ms:.1f} / {t.baseline_cpu_ms:.1f} | {t.cpu_speedup:.1f}x"
        if not t.case.cpu_comparable:
            cpu = "n/a (work in another process) | n/a"
        rows.append(
            f"| {t.case.name} | {t.ours_ms:.1f} ({t.case.ours_label}) | {t.baseline_ms:.1f} "
            f"({t.case.baseline_label}) | **{t.speedup:.1f}x** | {cpu} | {goal} | "
            f"{t.agreement} |"
        )
    return "\n".join(rows)


def _met(timing: Timing) -> str:
    assert timing.case.goal is not None
    return "met" if timing.speedup >= timing.case.goal else "NOT met"


def write_results(section: str, path: Path) -> None:
    """Replace (or append) this benchmark's section, leaving the others as they are."""
    text = path.read_text() if path.exists() else "# Benchmark results\n"
    pattern = re.compile(rf"^{re.escape(SECTION)}\n.*?(?=^## |\Z)", re.MULTILINE | re.DOTALL)
    if pattern.search(text):
        text = pattern.sub(lambda _: section.rstrip("\n") + "\n\n", text)
    else:
        text = text.rstrip("\n") + "\n\n" + section
    path.write_text(text.rstrip("\n") + "\n")


def plot(timings: Sequence[Timing], path: Path) -> bool:
    """A small grouped bar chart, if matplotlib is installed (the ``bench`` extra)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    names = [t.case.name for t in timings]
    figure, axis = plt.subplots(figsize=(7, 0.6 + 0.7 * len(names)))
    positions = range(len(names))
    axis.barh([p + 0.2 for p in positions], [t.baseline_ms for t in timings], 0.4, label="baseline")
    axis.barh([p - 0.2 for p in positions], [t.ours_ms for t in timings], 0.4, label="gateway")
    for p, t in zip(positions, timings, strict=True):
        axis.text(t.baseline_ms, p + 0.2, f" {t.speedup:.1f}x", va="center", fontsize=8)
    axis.set_yticks(list(positions), names, fontsize=8)
    axis.set_xscale("log")
    axis.set_xlabel("ms per item (log scale, lower is better)")
    axis.invert_yaxis()
    axis.legend(fontsize=8)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return True
