"""``python -m bench replicas``: KV reuse with image-affinity routing over Triton replicas.

A repeated-image workload (``--images`` images, each asked ``--repeats`` times with different
questions, in one shuffled order) is sent through three gateways over the same co-launched
reference replicas (``server_repo/reference/reference_llava``, whose block prefix cache keys
image blocks on ``prompt_table_extra_id`` as TensorRT-LLM does):

- ``one replica``: ``triton_url`` names only the first server (the reuse to match);
- ``affinity``: every server, rendezvous hashing on the image's content id (the default);
- ``round_robin``: every server, in turn (what a content-blind balancer does).

Each run uses fresh images (another seed), so no run finds another's blocks. The figure is
the sum of ``usage.prompt_tokens_details.cached_tokens``; affinity should keep >= 95% of the
one-replica figure, round robin shows the loss. ``tests/e2e/test_replicas.py`` runs a small
version of the same workload and asserts the ratios.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import io
import os
import random
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import uvicorn
from fastapi import FastAPI
from PIL import Image

from gateway.app import create_app
from gateway.config import EmbeddedSettings, ServedModel, Settings
from gateway.triton.embedded import EmbeddedReplicas, EmbeddedTriton, free_loopback_port

MODEL = "reference-llava"
TRITON_MODEL = "reference_llava"
REPOSITORY = Path(__file__).resolve().parent.parent / "server_repo" / "reference"
QUESTIONS = ("What is this?", "Describe it.", "Which colours?", "Any text?", "How many?")


@dataclass(frozen=True)
class Workload:
    images: int = 20
    repeats: int = 10
    concurrency: int = 2
    max_tokens: int = 2
    order_seed: int = 1


@dataclass
class Figures:
    label: str
    requests: int = 0
    ok: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    seconds: float = 0.0

    def row(self, baseline: Figures | None = None) -> str:
        ratio = f"{self.cached_tokens / baseline.cached_tokens:.1%}" if baseline else "-"
        return (
            f"| {self.label} | {self.requests} | {self.ok} | {self.prompt_tokens} | "
            f"{self.cached_tokens} | {ratio} | {self.seconds:.1f} |"
        )


TABLE_HEAD = (
    "| routing | requests | 200 | prompt tokens | cached tokens | vs one replica | seconds |\n"
    "|---|---|---|---|---|---|---|"
)


def image_url(seed: int) -> str:
    """A deterministic noisy PNG as a data: URL (no media server needed)."""
    rng = np.random.default_rng(seed)
    pixels = rng.integers(0, 256, (96, 128, 3), dtype=np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, "PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()


def schedule(workload: Workload) -> list[tuple[int, str]]:
    """(image index, question) for every request, in one shuffled order."""
    jobs = [
        (image, f"{QUESTIONS[repeat % len(QUESTIONS)]} ({repeat})")
        for image in range(workload.images)
        for repeat in range(workload.repeats)
    ]
    random.Random(workload.order_seed).shuffle(jobs)
    return jobs


def settings_for(urls: Sequence[str], routing: str | None) -> Settings:
    """A gateway serving reference-llava from ``urls`` (one: a plain client)."""
    target: str | list[str] = urls[0] if len(urls) == 1 else list(urls)
    return Settings(
        models=[
            ServedModel(
                id=MODEL,
                family="llava",
                triton_model=TRITON_MODEL,
                triton_url=target,
                end_id="server",
                routing=routing,  # type: ignore[arg-type]
            )
        ],
        embedded=EmbeddedSettings(enabled=False),
        decode={"workers": 1},
    )


@asynccontextmanager
async def serving(settings: Settings) -> AsyncIterator[tuple[str, FastAPI]]:
    """The gateway (its own lifespan: probes included) on a loopback port, in this loop: its
    base URL and the app (``app.state.runtime`` once started)."""
    port = free_loopback_port()
    app = create_app(settings)
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            task.result()
        await asyncio.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}", app
    finally:
        server.should_exit = True
        await task


async def run_workload(base_url: str, workload: Workload, image_seed: int, label: str) -> Figures:
    """The workload through the OpenAI SDK; images ``image_seed + i``."""
    import openai  # here: the other benches run where the SDK is not installed

    client = openai.AsyncOpenAI(
        base_url=f"{base_url}/v1", api_key="unused", max_retries=0, timeout=120
    )
    urls = [image_url(image_seed + i) for i in range(workload.images)]
    figures = Figures(label)
    slots = asyncio.Semaphore(workload.concurrency)

    async def one(image: int, question: str) -> None:
        content: Any = [
            {"type": "image_url", "image_url": {"url": urls[image]}},
            {"type": "text", "text": question},
        ]
        async with slots:
            figures.requests += 1
            try:
                answer = await client.chat.completions.create(
                    model=MODEL,
                    messages=[{"role": "user", "content": content}],
                    max_tokens=workload.max_tokens,
                )
            except openai.APIError:
                return
        figures.ok += 1
        usage = answer.usage
        assert usage is not None
        figures.prompt_tokens += usage.prompt_tokens
        details = usage.prompt_tokens_details
        figures.cached_tokens += (details.cached_tokens or 0) if details else 0

    started = time.perf_counter()
    await asyncio.gather(*(one(image, question) for image, question in schedule(workload)))
    figures.seconds = time.perf_counter() - started
    await client.close()
    return figures


async def compare(urls: Sequence[str], workload: Workload) -> list[Figures]:
    """The workload through one replica, affinity and round robin, fresh images each time."""
    runs = [("one replica", urls[:1], None), ("affinity", urls, None)]
    runs.append(("round_robin", urls, "round_robin"))
    results = []
    for index, (label, targets, routing) in enumerate(runs):
        async with serving(settings_for(targets, routing)) as (base_url, _):
            results.append(await run_workload(base_url, workload, 1000 * (index + 1), label))
    return results


def table(results: Sequence[Figures]) -> str:
    baseline = results[0]
    return "\n".join([TABLE_HEAD, *(figures.row(baseline) for figures in results)])


def start_replicas(count: int, cache: Path | None) -> EmbeddedReplicas:
    env = {"MMGW_REFERENCE_DEVICE": "cpu"}
    if cache is not None:
        env["MMGW_REFERENCE_CACHE"] = str(cache)

    def one() -> EmbeddedTriton:
        return EmbeddedTriton(REPOSITORY, env=env, models=[TRITON_MODEL], model_load_threads=1)

    return EmbeddedReplicas.of(count, one)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    defaults = Workload()
    parser.add_argument("--replicas", type=int, default=3)
    parser.add_argument("--images", type=int, default=defaults.images)
    parser.add_argument("--repeats", type=int, default=defaults.repeats)
    parser.add_argument("--concurrency", type=int, default=defaults.concurrency)
    parser.add_argument("--max-tokens", type=int, default=defaults.max_tokens)
    parser.add_argument("--cache", type=Path, default=None, help="reference weights folder")


async def run(args: argparse.Namespace) -> int:
    workload = Workload(args.images, args.repeats, args.concurrency, args.max_tokens)
    cache = args.cache or (Path(os.environ.get("MMGW_REFERENCE_CACHE", "build/reference-cache")))
    replicas = start_replicas(args.replicas, cache)
    print(f"starting {args.replicas} reference replicas...", flush=True)
    await replicas.start()
    try:
        results = await compare(replicas.grpc_urls, workload)
    finally:
        await replicas.stop()
    print(f"{workload}, {args.replicas} replicas on loopback, {os.cpu_count()} CPUs")
    print(table(results))
    return 0
