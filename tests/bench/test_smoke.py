"""``python -m bench overhead`` end to end at a tiny scale, and its pure pieces.

Not the benchmark: a handful of requests at concurrency 1 and 2, to prove the command starts
Triton and the gateway, drives every local path, and writes its table, goals and plot.
LiteLLM is left out (its environment is built on first use and it starts in ~20 s).
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import numpy as np

from bench import goals_plot
from bench.goals_tables import goals_table
from bench.httpstream import OPENAI_MARKER, TRITON_MARKER, is_token
from bench.loadgen import PhaseResult, StreamTiming
from bench.pool import split
from bench.report import Measurement, goals, measure, ratio_table

REPO_ROOT = Path(__file__).resolve().parent.parent.parent


def test_token_events_are_told_from_role_and_usage_chunks() -> None:
    role = b'data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}'
    token = b'data: {"choices":[{"index":0,"delta":{"content":" lorem"}}]}'
    usage = b'data: {"choices":[],"usage":{"prompt_tokens":3}}'
    assert [is_token(e, OPENAI_MARKER) for e in (role, token, usage)] == [False, True, False]
    assert is_token(b'data: {"text_output":" x"}', TRITON_MARKER)


def test_timings_become_ratios_and_goals() -> None:
    rows = []
    for mode, gap in (("grpc", 0.010), ("gateway", 0.0105)):
        result = PhaseResult()
        result.add(StreamTiming(0.0, [gap, gap + 0.01, gap + 0.02]), 3)
        rows.append(measure("paced", mode, 64, result, 1.0, 0.003 if mode != "grpc" else None, 0))
    assert "1.05x" in ratio_table(rows)
    assert any("added TTFT at 64 streams" in g and ": met" in g for g in goals(rows))
    assert split(5, 2) == [3, 2] and split(1, 2) == [1, 0]


def test_overhead_command_runs_end_to_end(tmp_path: Path) -> None:
    command = [
        sys.executable, "-m", "bench", "overhead", "--concurrency", "1,2",
        "--modes", "grpc,gateway,triton_http", "--tokens", "8", "--interval-us", "1000",
        "--duration", "0.5", "--max-requests", "4", "--workers", "1", "--out", str(tmp_path),
    ]  # fmt: skip
    done = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = json.loads((tmp_path / "results.json").read_text())["rows"]
    assert len(rows) == 2 * 2 * 3  # profiles x concurrencies x paths
    assert all(r["errors"] == 0 and r["short"] == 0 and r["tokens"] > 0 for r in rows)
    assert all(r["proxy_cpu_per_1k"] is not None for r in rows if r["mode"] == "gateway")
    assert "(b) gateway SSE" in (tmp_path / "report.md").read_text()
    assert (tmp_path / "overhead.png").stat().st_size > 10_000


def test_image_mode_sends_one_jpeg_both_ways(tmp_path: Path) -> None:
    """``--image``: the 1-image request through the gateway and by direct gRPC (the same
    tensors), only those two paths, with the added-TTFT goal per side."""
    command = [
        sys.executable, "-m", "bench", "overhead", "--image", "336", "--profiles", "",
        "--concurrency", "1,2", "--modes", "grpc,gateway,triton_http", "--tokens", "4",
        "--interval-us", "1000", "--duration", "0.5", "--max-requests", "4", "--workers", "1",
        "--out", str(tmp_path),
    ]  # fmt: skip
    done = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = json.loads((tmp_path / "results.json").read_text())["rows"]
    assert {(r["profile"], r["mode"], r["concurrency"]) for r in rows} == {
        ("image336", mode, c) for mode in ("grpc", "gateway") for c in (1, 2)
    }
    assert all(r["errors"] == 0 and r["short"] == 0 and r["tokens"] > 0 for r in rows)
    assert "added TTFT, one 336 x 336 JPEG, 2 streams" in (tmp_path / "report.md").read_text()


async def test_the_direct_grpc_tensors_are_those_the_gateway_sends() -> None:
    from bench.images import image_load
    from gateway.config import MediaSettings, ServedModel
    from gateway.families.registry import get_family
    from gateway.media.fetch import MediaFetcher
    from gateway.media.offload import Offloader
    from gateway.observability.metrics import GatewayMetrics
    from gateway.pipeline.conversation import MediaPart
    from gateway.pipeline.media import prepare_media
    from gateway.served import ServedRuntime
    from gateway.services import Media

    load = image_load(336, "loadgen")
    offload, fetcher = Offloader(), MediaFetcher()
    media = Media.of(fetcher, offload, MediaSettings(), GatewayMetrics())
    config = ServedModel(id="loadgen", family="llava", triton_model="t", triton_url="fake:1")
    served = ServedRuntime(config, get_family("llava"), client=None)  # type: ignore[arg-type]
    try:
        part = MediaPart("image", "messages[0].content[1]", url=load.data_url)
        prepared = await prepare_media([part], served, media)
    finally:
        await fetcher.aclose()
        await offload.aclose()
    assert prepared is not None and prepared.tensor is not None
    assert prepared.tensor[0] == "image_input" and prepared.extra_id == load.extra_id
    assert np.array_equal(prepared.tensor[1], load.tensor)
    assert load.tensor.shape == (1, 1, 3, 336, 336) and load.tensor.dtype == np.float16


def test_scale_command_measures_each_worker_count(tmp_path: Path) -> None:
    command = [
        sys.executable, "-m", "bench", "scale", "--gateway-workers", "1,2", "--concurrency", "2",
        "--tokens", "8", "--duration", "0.5", "--max-requests", "4", "--workers", "1",
        "--triton-instances", "1", "--out", str(tmp_path),
    ]  # fmt: skip
    done = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = json.loads((tmp_path / "results.json").read_text())
    measured = [(r["gateway_workers"], r["mode"]) for r in rows]
    assert measured == [(0, "grpc"), (1, "gateway"), (0, "triton_http"), (2, "gateway")]
    assert all(r["errors"] == 0 and r["tokens"] > 0 for r in rows)
    assert "/ generate_stream" in (tmp_path / "report.md").read_text()
    assert (tmp_path / "scale.png").stat().st_size > 5_000


def test_replicas_workload_repeats_every_image_in_one_shuffled_order() -> None:
    from collections import Counter

    from bench.replicas import Figures, Workload, schedule, table

    workload = Workload(images=5, repeats=3)
    jobs = schedule(workload)
    assert Counter(image for image, _ in jobs) == {i: 3 for i in range(5)}
    assert jobs == schedule(workload) and jobs != sorted(jobs)  # same shuffle every run
    rows = table(
        [Figures("one replica", cached_tokens=200), Figures("affinity", cached_tokens=190)]
    )
    assert "| affinity | 0 | 0 | 0 | 190 | 95.0% |" in rows


def _row(profile: str, mode: str, concurrency: int, ttft: float, tps: float) -> Measurement:
    return Measurement(profile, mode, concurrency, ttft, ttft + 1, 30.0, 31.0, 1.0, tps,
                       10, 640, 0, 0, 1.0, 0.04 if mode == "gateway" else None, 0.01)  # fmt: skip


def test_gpu_goals_judges_every_goal_from_its_rows() -> None:
    floods = [
        [_row("flood", "triton_http", 128, 4.0, 100.0), _row("flood", "gateway", 128, 5.0, tps)]
        for tps in (96.0, 97.0, 91.0)
    ]
    paced = [_row("paced", "grpc", 64, 2.0, 10.0), _row("paced", "gateway", 64, 2.5, 10.0)]
    images = [
        _row("image336", "grpc", 1, 5.0, 1.0),
        _row("image336", "gateway", 1, 7.5, 1.0),
        _row("image1024", "grpc", 16, 5.0, 1.0),
        _row("image1024", "gateway", 16, 14.0, 1.0),
    ]
    table = goals_table(floods, paced, images).splitlines()
    assert "0.91 / 0.96 / 0.97" in table[2] and table[2].endswith("| met |")
    assert "25.00 / 25.00 / 25.00 k" in table[3] and table[3].endswith("| met |")  # 1/0.04 s
    assert "0.50 / 0.50 ms" in table[4] and table[4].endswith("| met |")
    assert "336 px JPEG, 1 streams" in table[5] and "2.50 ms" in table[5]
    assert table[5].endswith("| met |")
    assert "1024 px JPEG, 16 streams" in table[-1] and table[-1].endswith("| NOT met |")
    one_slow_run = [floods[0], [floods[1][0], _row("flood", "gateway", 128, 5.0, 85.0)]]
    assert goals_table(one_slow_run, paced, images).splitlines()[2].endswith("| NOT met |")
    rows = [{**asdict(r), "stream_client": "auto"} for r in images]
    added = goals_plot.added_by_gateway(rows)
    assert added == {(336, 1, "auto"): 2.5, (1024, 16, "auto"): 9.0}
    images_alone = goals_table([], [], images).splitlines()  # --decode-device's gateway
    assert len(images_alone) == 6 and "336 px JPEG, 1 streams" in images_alone[2]
    assert not any("flood" in line or "paced" in line for line in images_alone)
