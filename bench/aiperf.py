"""``python -m bench aiperf``: NVIDIA's aiperf profiling the gateway with images and streaming.

aiperf lives in its own environment (``build/bench/aiperf-venv``, see ``peers.py`` for why).
It generates synthetic prompts and PNG images, sends them as ``data:`` URLs in OpenAI chat
requests with ``stream: true``, and reports TTFT, inter-token latency and throughput. Two
things make it work offline here: a local tokenizer (aiperf counts tokens with one; its
``builtin`` choice downloads tiktoken's table, and Hugging Face names need the Hub), written
by the reference kit's tiny BPE trainer into the run folder; and serving model ``loadgen``
from the LLaVA family, so every image is decoded and preprocessed by the gateway as for a
real LLaVA before the fixture streams its tokens.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import time
from pathlib import Path

from bench.peers import AIPERF_REQUIREMENT, ensure_venv
from bench.procs import parse_cpus, raise_fd_limit, say
from bench.stack import (
    API_KEY,
    REPO_ROOT,
    SERVED_ID,
    set_token_interval,
    start_gateway,
    start_triton,
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("--concurrency", type=int, default=16)
    add("--requests", type=int, default=200, help="measured requests")
    add("--tokens", type=int, default=64, help="output tokens per request")
    add("--image-size", type=int, default=336, help="synthetic image width and height")
    add("--images", type=int, default=1, help="images per request")
    add("--interval-us", type=int, default=10_000, help="token gap of the fixture")
    add("--gateway-cpu", default="all", help="CPU(s) for the gateway, or all")
    add("--out", type=Path, help="result folder (default build/bench/aiperf-<time>)")


def write_tokenizer(folder: Path) -> Path:
    """A Hugging Face tokenizer folder aiperf can load offline (the reference kit's tiny BPE)."""
    from server_repo.reference_kit.tiny_tokenizer import SpecialTokens, build_hf_tokenizer

    special = SpecialTokens(bos="<s>", eos="</s>", unk="<unk>", pad="<pad>", extra=(), add_bos=True)
    build_hf_tokenizer(special).save_pretrained(folder)
    return folder


def command(
    bin_dir: Path, url: str, args: argparse.Namespace, artifacts: Path, tokenizer: Path
) -> list[str]:
    """The aiperf command line: the one bench/README.md documents."""
    return [
        str(bin_dir / "aiperf"),
        "profile",
        "--model", SERVED_ID,
        "--url", url,
        "--endpoint-type", "chat",
        "--streaming",
        "--use-server-token-count",
        "--api-key", API_KEY,
        "--tokenizer", str(tokenizer),
        "--image-batch-size", str(args.images),
        "--image-width-mean", str(args.image_size),
        "--image-height-mean", str(args.image_size),
        "--image-format", "png",
        "--prompt-input-tokens-mean", "64",
        "--prompt-output-tokens-mean", str(args.tokens),
        "--concurrency", str(args.concurrency),
        "--request-count", str(args.requests),
        "--warmup-request-count", str(args.concurrency),
        "--ui", "none",
        "--output-artifact-dir", str(artifacts),
    ]  # fmt: skip


async def run(args: argparse.Namespace) -> int:
    """Start Triton and the gateway, run aiperf against it, show where its report went."""
    out: Path = (
        args.out or REPO_ROOT / "build" / "bench" / f"aiperf-{time.strftime('%Y%m%d-%H%M%S')}"
    )
    out = out.resolve()  # aiperf runs inside it: every path it gets must be absolute
    out.mkdir(parents=True, exist_ok=True)
    raise_fd_limit()
    bin_dir = ensure_venv("aiperf", AIPERF_REQUIREMENT)
    triton = await start_triton()
    gateway = None
    try:
        await set_token_interval(triton, args.interval_us)
        gateway = start_gateway(triton, out, parse_cpus(args.gateway_cpu))
        tokenizer = write_tokenizer(out / "tokenizer")
        argv = command(
            bin_dir, f"http://127.0.0.1:{gateway.port}", args, out / "artifacts", tokenizer
        )
        say("running: " + " ".join(argv))
        code = subprocess.run(argv, cwd=out, check=False).returncode
    finally:
        if gateway is not None:
            gateway.stop()
        await triton.stop()
    say(f"aiperf exited with {code}; artifacts in {out / 'artifacts'}")
    for line in summary(out / "artifacts" / "profile_export_aiperf.json"):
        print(line, flush=True)
    return code


SUMMARY = (
    "time_to_first_token", "inter_token_latency", "request_throughput",
    "output_token_throughput", "num_images", "output_sequence_length",
)  # fmt: skip


def summary(export: Path) -> list[str]:
    """The few figures worth a glance from aiperf's JSON export (nothing if it is missing)."""
    if not export.is_file():
        return []
    figures = json.loads(export.read_text())
    lines = []
    for name in SUMMARY:
        metric = figures.get(name)
        if isinstance(metric, dict):
            parts = [f"{k} {metric[k]:.2f}" for k in ("avg", "p50", "p99") if metric.get(k)]
            lines.append(f"{name:>24}: {', '.join(parts)} {metric.get('unit', '')}")
    return lines
