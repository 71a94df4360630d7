"""The load generator: worker processes that each drive some of a phase's concurrent streams.

Why processes: the generator must not share an event loop (or a GIL) with anything it
measures, and one Python loop cannot keep 256 streams' timestamps honest on its own.
Each worker runs closed-loop users (a user sends its next request when the last ended)
and meets the orchestrator at two barriers: after its warm-up requests (the measured
window opens) and after its last measured request (the window closes), so CPU counters
read at the barriers cover exactly the measured requests.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import multiprocessing as mp
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from multiprocessing.synchronize import Barrier
from typing import TYPE_CHECKING

from bench.httpstream import (
    OPENAI_MARKER,
    TRITON_MARKER,
    HttpStreamClient,
    HttpStreamError,
    StreamTiming,
)

if TYPE_CHECKING:
    from bench.images import ImageLoad

PROMPT = "Describe the benchmark in a few words."
BARRIER_SLACK_S = 180.0


@dataclass(frozen=True)
class Target:
    """What a phase talks to. ``mode``: grpc, gateway, triton_http or litellm; ``image``:
    every request carries this one image (gateway: a data: URL; grpc: its tensors)."""

    mode: str
    port: int
    model: str
    path: str = ""
    headers: tuple[tuple[str, str], ...] = ()
    image: ImageLoad | None = None


@dataclass(frozen=True)
class Phase:
    """One worker's share of one measured phase."""

    target: Target
    streams: int
    tokens: int
    duration_s: float
    requests_per_stream: int
    warmup: bool = True
    # Users start spread over this many seconds (user k of n waits k/n of it), so requests
    # of equal length do not arrive in lock-step bursts; ``first``/``total`` place this
    # worker's users among all of the phase's.
    stagger_s: float = 0.0
    first: int = 0
    total: int = 0


@dataclass
class PhaseResult:
    """Raw timings of one worker's measured requests (seconds)."""

    ttft: list[float] = field(default_factory=list)
    gaps: list[float] = field(default_factory=list)
    tokens: int = 0
    requests: int = 0
    errors: int = 0
    short: int = 0  # requests that ended with fewer tokens than asked
    error_sample: str | None = None

    def add(self, timing: StreamTiming, wanted: int) -> None:
        stamps = timing.tokens
        self.requests += 1
        self.tokens += len(stamps)
        if len(stamps) < wanted:
            self.short += 1
        if stamps:
            self.ttft.append(stamps[0] - timing.started)
            self.gaps.extend(b - a for a, b in itertools.pairwise(stamps))

    def fail(self, message: str) -> None:
        self.errors += 1
        self.error_sample = self.error_sample or message[:300]

    def merge(self, other: PhaseResult) -> None:
        self.ttft += other.ttft
        self.gaps += other.gaps
        self.tokens += other.tokens
        self.requests += other.requests
        self.errors += other.errors
        self.short += other.short
        self.error_sample = self.error_sample or other.error_sample


Request = Callable[[], Awaitable[StreamTiming]]


def _http_user(target: Target, tokens: int) -> tuple[Request, Callable[[], Awaitable[None]]]:
    """A user on its own keep-alive connection: an OpenAI chat stream or Triton's generate."""
    client = HttpStreamClient("127.0.0.1", target.port, dict(target.headers))
    if target.mode == "triton_http":
        payload: dict[str, object] = {"text_input": PROMPT, "max_tokens": tokens, "stream": True}
        marker = TRITON_MARKER
    else:
        content: object = PROMPT
        if target.image is not None:
            picture = {"type": "image_url", "image_url": {"url": target.image.data_url}}
            content = [{"type": "text", "text": PROMPT}, picture]
        payload = {
            "model": target.model,
            "messages": [{"role": "user", "content": content}],
            "max_tokens": tokens,
            "stream": True,
        }
        marker = OPENAI_MARKER
    body = json.dumps(payload).encode()
    return (lambda: client.post(target.path, body, marker)), client.close


def _grpc_users(target: Target, tokens: int, count: int) -> tuple[list[Request], object]:
    """Users sharing one tritonclient gRPC channel (as the gateway does), a stream each."""
    import numpy as np
    import tritonclient.grpc.aio as grpcclient

    client = grpcclient.InferenceServerClient(f"127.0.0.1:{target.port}")

    def tensor(name: str, datatype: str, value: object, dtype: object) -> object:
        item = grpcclient.InferInput(name, [1, 1], datatype)
        item.set_data_from_numpy(np.array([[value]], dtype=dtype))
        return item

    inputs = [
        tensor("text_input", "BYTES", PROMPT.encode(), np.object_),
        tensor("max_tokens", "INT32", tokens, np.int32),
        tensor("stream", "BOOL", True, np.bool_),
    ]
    if target.image is not None:  # the tensors the gateway would send for the same JPEG
        pixels = grpcclient.InferInput("image_input", list(target.image.tensor.shape), "FP16")
        pixels.set_data_from_numpy(target.image.tensor)
        inputs.append(pixels)
        inputs.append(tensor("prompt_table_extra_id", "UINT64", target.image.extra_id, np.uint64))

    async def request() -> StreamTiming:
        async def one() -> object:
            yield {"model_name": target.model, "inputs": inputs}

        timing = StreamTiming(time.perf_counter())
        async for _result, error in client.stream_infer(one()):
            if error is not None:
                raise HttpStreamError(f"gRPC error: {error}")
            timing.tokens.append(time.perf_counter())
        return timing

    return [request] * count, client


async def _run_user(
    request: Request, phase: Phase, deadline: float, result: PhaseResult, delay: float = 0.0
) -> None:
    if delay:
        await asyncio.sleep(delay)
    for _ in range(phase.requests_per_stream):
        if time.monotonic() >= deadline:
            return
        try:
            result.add(await request(), phase.tokens)
        except Exception as exc:  # counted, never fatal: errors are a result
            result.fail(f"{type(exc).__name__}: {exc}")


async def _wait(barrier: Barrier, timeout_s: float) -> None:
    await asyncio.get_running_loop().run_in_executor(None, barrier.wait, timeout_s)


async def run_phase(phase: Phase, barrier: Barrier) -> PhaseResult:
    """Warm up each user once, then measure until the deadline or the request budget."""
    closers: list[Callable[[], Awaitable[None]]] = []
    if phase.target.mode == "grpc":
        requests, grpc_client = _grpc_users(phase.target, phase.tokens, phase.streams)
        closers.append(grpc_client.close)  # type: ignore[attr-defined]
    else:
        users = [_http_user(phase.target, phase.tokens) for _ in range(phase.streams)]
        requests = [request for request, _ in users]
        closers += [close for _, close in users]
    warm = PhaseResult()
    if phase.warmup and requests:
        await asyncio.gather(*(_run_user(r, _once(phase), float("inf"), warm) for r in requests))
    await _wait(barrier, BARRIER_SLACK_S + phase.duration_s + phase.stagger_s)
    result = PhaseResult()
    deadline = time.monotonic() + phase.duration_s
    total = max(phase.total, len(requests))
    delays = [(phase.first + k) / total * phase.stagger_s for k in range(len(requests))]
    deadline += phase.stagger_s
    await asyncio.gather(
        *(_run_user(r, phase, deadline, result, d) for r, d in zip(requests, delays, strict=True))
    )
    await _wait(barrier, BARRIER_SLACK_S + phase.duration_s + phase.stagger_s)
    if warm.errors and not result.error_sample:
        result.error_sample = f"warm-up: {warm.error_sample}"
    for close in closers:
        await close()
    return result


def _once(phase: Phase) -> Phase:
    return replace(phase, requests_per_stream=1, stagger_s=0.0)


def worker_main(commands: mp.Queue, results: mp.Queue, barrier: Barrier) -> None:
    """A worker process: run each phase it is sent until it receives None."""
    import uvloop

    while (phase := commands.get()) is not None:
        try:
            result = uvloop.run(run_phase(phase, barrier))
        except Exception as exc:
            result = PhaseResult()
            result.fail(f"worker failed: {type(exc).__name__}: {exc}")
            barrier.abort()
        results.put(result)
