"""``python -m bench real-shape`` end to end on the tiny shape (CPU), and its pure pieces.

Not the measurement (that is the 7B shape on a GPU): three pairs, to prove the command
generates the checkpoint, serves it through the embedded Triton with the prefix cache off,
checks both sides answer alike, measures alternating pairs and writes its figures and plot.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.real_shape import streamed_text
from bench.shaped_stack import TRITON_MODEL

REPO_ROOT = Path(__file__).resolve().parent.parent.parent


def test_the_gateways_stream_is_read_back_as_text() -> None:
    body = (
        'data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}\n\n'
        'data: {"choices":[{"index":0,"delta":{"content":" are"}}]}\n\n'
        'data: {"choices":[{"index":0,"delta":{"content":"(s"}}]}\n\n'
        "data: [DONE]\n\n"
    )
    assert streamed_text(body) == " are(s"
    with pytest.raises(SystemExit, match="error event"):
        streamed_text('data: {"error":{"message":"boom"}}\n\n')


def test_real_shape_runs_end_to_end_on_the_tiny_shape(tmp_path: Path) -> None:
    from bench.images import image_load
    from bench.loadgen import PROMPT
    from server_repo.reference_kit import GenerationRequest, load_engine

    checkpoint, out = tmp_path / "checkpoint", tmp_path / "out"
    command = [
        sys.executable, "-m", "bench", "real-shape", "--shape", "tiny", "--device", "cpu",
        "--pairs", "3", "--warmup", "1", "--checkpoint", str(checkpoint), "--out", str(out),
    ]  # fmt: skip
    done = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    saved = json.loads((out / "results.json").read_text())
    assert [p["gateway_first"] for p in saved["pairs"]] == [True, False, True]
    assert all(p["gateway_ms"] > 0 and p["direct_ms"] > 0 for p in saved["pairs"])
    assert saved["summary"]["pairs"] == 3 and "met" in saved["summary"]
    assert "added TTFT (paired) p50" in done.stdout and "goal <= 3 ms p50" in done.stdout
    assert (out / "real-shape.png").stat().st_size > 10_000
    config = (out / "repository" / TRITON_MODEL / "config.pbtxt").read_text()
    assert 'key: "max_cached_tokens"\n  value: { string_value: "0" }' in config
    # Triton served the generated checkpoint: its answer is this checkpoint's own.
    image = image_load(336, "reference-llava")
    engine = load_engine("llava", checkpoint=str(checkpoint), device="cpu")
    request = GenerationRequest(PROMPT, max_tokens=8, images=image.tensor[0])
    expected = engine.complete(request).text
    assert expected and saved["answers"] == {"gateway": expected, "direct": expected}
