"""bench.media runs end to end on tiny inputs (the real benchmark is run by hand)."""

from __future__ import annotations

from pathlib import Path

from bench.media.__main__ import main
from bench.media.report import SECTION, write_results


def test_tiny_run_times_every_case_and_compares_outputs() -> None:
    timings = main(["--tiny", "--runs", "1"])
    assert len(timings) == 5
    assert all(t.ours_ms > 0 and t.baseline_ms > 0 for t in timings)
    assert [t.agreement for t in timings] == ["identical"] * 4 + ["identical frames"]


def test_results_section_is_replaced_not_duplicated(tmp_path: Path) -> None:
    results = tmp_path / "RESULTS.md"
    results.write_text("# Benchmark results\n\n## Other\n\nkept\n")
    write_results(f"{SECTION}\n\nfirst\n", results)
    write_results(f"{SECTION}\n\nsecond\n", results)
    text = results.read_text()
    assert text.count(SECTION) == 1 and "second" in text and "first" not in text
    assert "## Other\n\nkept" in text
