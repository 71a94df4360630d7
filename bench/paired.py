"""Paired latency measurements: each pair is one request through the gateway and the same
request sent directly, back to back, so drift of the machine or the model (clocks, caches,
other load) cancels within a pair. The figure of merit is the median of the per-pair
differences, with a seeded percentile-bootstrap interval (recomputable from the saved pairs).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Pair:
    """One measured pair: each side's TTFT (ms), and which went first."""

    gateway_ms: float
    direct_ms: float
    gateway_first: bool

    @property
    def added_ms(self) -> float:
        return self.gateway_ms - self.direct_ms


def bootstrap_median(
    values: list[float], seed: int = 0, rounds: int = 10_000
) -> tuple[float, float]:
    """The 95% percentile-bootstrap interval of the median of ``values`` (seeded, so a run's
    figures can be recomputed from its ``results.json``)."""
    data = np.asarray(values, dtype=np.float64)
    rng = np.random.default_rng(seed)
    medians = np.median(rng.choice(data, size=(rounds, data.size), replace=True), axis=1)
    low, high = np.percentile(medians, [2.5, 97.5])
    return float(low), float(high)


def summary(pairs: list[Pair], goal_ms: float) -> dict[str, Any]:
    """Per side median and p90 TTFT, the paired difference's median, interval and verdict."""
    gateway = [p.gateway_ms for p in pairs]
    direct = [p.direct_ms for p in pairs]
    added = [p.added_ms for p in pairs]
    low, high = bootstrap_median(added)
    median = float(np.median(added))
    return {
        "pairs": len(pairs),
        "gateway_ttft_ms": {
            "p50": float(np.median(gateway)),
            "p90": float(np.percentile(gateway, 90)),
        },
        "direct_ttft_ms": {
            "p50": float(np.median(direct)),
            "p90": float(np.percentile(direct, 90)),
        },
        "added_ttft_ms": {"p50": median, "ci95": [low, high]},
        "goal_ms": goal_ms,
        "met": median <= goal_ms,
    }


def summary_lines(title: str, result: dict[str, Any]) -> list[str]:
    """The summary as the lines a run prints."""
    gateway, direct, added = (
        result[k] for k in ("gateway_ttft_ms", "direct_ttft_ms", "added_ttft_ms")
    )
    low, high = added["ci95"]
    verdict = "met" if result["met"] else "NOT met"
    return [
        f"{title}, {result['pairs']} pairs, one request at a time:",
        f"  gateway TTFT p50 {gateway['p50']:8.2f} ms  p90 {gateway['p90']:8.2f} ms",
        f"  direct  TTFT p50 {direct['p50']:8.2f} ms  p90 {direct['p90']:8.2f} ms",
        f"  added TTFT (paired) p50 {added['p50']:+.2f} ms, 95% CI [{low:+.2f}, {high:+.2f}]",
        f"  goal <= {result['goal_ms']:g} ms p50: {verdict}",
    ]


def plot(pairs: list[Pair], result: dict[str, Any], path: Path) -> None:
    """Each pair's two TTFTs, and the paired differences against the goal."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4), dpi=80)
    index = range(1, len(pairs) + 1)
    left.plot(
        index, [p.gateway_ms for p in pairs], "o-", label="gateway (JPEG data: URL)", markersize=3
    )
    left.plot(
        index, [p.direct_ms for p in pairs], "s-", label="direct gRPC (same tensors)", markersize=3
    )
    left.set(xlabel="pair", ylabel="TTFT (ms)", title="time to first token")
    left.legend()
    added = [p.added_ms for p in pairs]
    right.hist(added, bins=min(30, max(5, len(added) // 2)), color="tab:gray")
    right.axvline(result["added_ttft_ms"]["p50"], color="tab:blue", label="median")
    goal = result["goal_ms"]
    right.axvline(goal, color="tab:red", linestyle="--", label=f"goal {goal:g} ms")
    right.set(xlabel="gateway - direct (ms)", ylabel="pairs", title="added TTFT per pair")
    right.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
