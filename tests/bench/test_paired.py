"""Paired measurements: the median difference, its seeded bootstrap interval, the verdict,
the printed lines and the plot."""

from __future__ import annotations

from pathlib import Path

from bench.paired import Pair, bootstrap_median, plot, summary, summary_lines


def test_pairs_become_a_median_difference_with_its_interval_and_verdict() -> None:
    pairs = [Pair(50.0 + d, 50.0, i % 2 == 0) for i, d in enumerate([1, 2, 2, 3, 9, 2, 1])]
    result = summary(pairs, goal_ms=3.0)
    assert result["added_ttft_ms"]["p50"] == 2.0 and result["met"]
    low, high = result["added_ttft_ms"]["ci95"]
    assert 1.0 <= low <= 2.0 <= high <= 3.0
    assert bootstrap_median([1, 2, 2, 3, 9, 2, 1]) == (low, high)  # seeded: recomputable
    assert result["direct_ttft_ms"]["p50"] == 50.0 and result["gateway_ttft_ms"]["p90"] > 53
    assert not summary([Pair(60.0, 50.0, True), Pair(54.0, 50.0, False)], goal_ms=3.0)["met"]


def test_the_summary_prints_and_plots(tmp_path: Path) -> None:
    pairs = [Pair(40.0 + i, 30.0 + i, i % 2 == 0) for i in range(6)]
    result = summary(pairs, goal_ms=3.0)
    lines = summary_lines("tiny", result)
    assert lines[0] == "tiny, 6 pairs, one request at a time:"
    assert "added TTFT (paired) p50 +10.00 ms, 95% CI [+10.00, +10.00]" in lines[3]
    assert lines[-1].endswith("goal <= 3 ms p50: NOT met")
    plot(pairs, result, tmp_path / "pairs.png")
    assert (tmp_path / "pairs.png").stat().st_size > 10_000
