"""``python -m bench realtime`` end to end at a tiny scale: the held sessions and the latency
runs the lead repeats on the GPU host (the reference Whisper on CPU here)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent.parent


def _run(tmp_path: Path, *options: str) -> dict:
    command = [sys.executable, "-m", "bench", "realtime", "--device", "cpu",
               "--workdir", str(tmp_path), *options]  # fmt: skip
    done = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result: dict = json.loads((tmp_path / "result.json").read_text())
    return result


def test_held_sessions_are_counted_and_their_memory_reported(tmp_path: Path) -> None:
    result = _run(tmp_path, "--sessions", "4")
    assert result["alive"] == result["alive_again"] == 4 and result["failed"] == 0
    assert result["rss_held_mib"] >= result["rss_before_mib"] > 0
    assert result["kb_per_session"] > 0


def test_latency_runs_report_speech_end_to_completed(tmp_path: Path) -> None:
    result = _run(tmp_path, "--latency", "--runs", "1")
    assert 3.0 <= result["utterance_s"] <= 3.1
    for key in ("commit_to_completed", "vad_speech_end_to_completed",
                "vad_speech_stopped_to_completed"):  # fmt: skip
        assert 0 < result[key]["median_ms"] < 60_000
    # server VAD waits its 500 ms of silence after the speech before it commits
    assert result["vad_speech_end_to_completed"]["median_ms"] > 500
