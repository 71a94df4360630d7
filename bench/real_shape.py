"""``python -m bench real-shape``: the added TTFT of a one-image request on a model of real size.

Issue 28's goal row "same on a LLaVA-1.5-7B-shaped model on the H100": the gateway against
direct gRPC with the same tensors, where the model is not the bench fixture (which answers at
once) but the reference LLaVA at LLaVA-1.5-7B's dimensions (``server_repo/reference_kit/
shaped.py``: CLIP ViT-L/14-336 + a 7B Llama, random fp16 weights) running on the GPU.

1. The shaped checkpoint is generated, or reused when its folder is current, by
   ``python -m server_repo.reference_kit.shaped`` in the models' interpreter
   (``MMGW_EMBEDDED__PYTHON``, else this one), on ``--device``.
2. An embedded Triton serves ``reference_llava`` from it, with the variables ``mmgw serve``
   gives its own for ``[embedded] device`` and ``checkpoints`` (``gateway.runtime.
   embedded_environment``), from a copy of its model folder whose prefix cache is off (so every
   request computes the image's 576 features and the whole prompt, as a new image does; with
   ``--kv-reuse`` it stays on and every request after the first reuses the prompt's blocks).
3. A gateway (``mmgw serve``, pinned to ``--gateway-cpu``) serves it as ``reference-llava``.
4. One answer each way first: the same greedy text, or the run stops (the two sides must be
   the same request). Then ``--warmup`` pairs, then ``--pairs`` pairs, one request at a time,
   the order alternating within pairs: a streamed chat request through the gateway with one
   336 px JPEG as a ``data:`` URL (``bench/images.py``), and a direct gRPC stream with the
   tensors the gateway sends for that JPEG (built by the gateway's own ``build_inputs`` from the
   model's config: the rendered prompt, greedy sampling, ``image_input``,
   ``prompt_table_extra_id``). TTFT: send to the first token read.

Prints each pair, then per side the median and p90 TTFT, the paired difference's median with
a seeded 95% bootstrap interval, and the goal (<= 3 ms); ``results.json`` and
``real-shape.png`` go to ``--out`` (default ``build/bench/real-shape-<time>``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from pathlib import Path
from typing import Any

import httpx

from bench.httpstream import OPENAI_MARKER, HttpStreamClient, HttpStreamError, StreamTiming
from bench.images import ImageLoad, image_load
from bench.loadgen import PROMPT
from bench.overhead import machine, other_cpus
from bench.paired import Pair, plot, summary, summary_lines
from bench.procs import parse_cpus, pin_self, say
from bench.shaped_stack import (
    SERVED_ID,
    TRITON_MODEL,
    folder_gb,
    gateway_toml,
    generate_checkpoint,
    gpu_memory_mb,
    start_model,
)
from bench.stack import AUTH_HEADER, REPO_ROOT, start_gateway
from gateway.config.settings import DEFAULT_REFERENCE_CACHE
from gateway.triton.embedded import EmbeddedTriton

GOAL_MS = 3.0
CHAT_PATH = "/v1/chat/completions"
# One request of 8 tokens takes well under a second on the GPU; none may hang the run.
REQUEST_TIMEOUT_S = 120.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("--shape", default="llava-1.5-7b", help="reference_kit.shaped shape (tiny for a CPU)")
    add("--device", default="cuda", choices=("cuda", "cpu", "auto"), help="where it runs")
    add("--pairs", type=int, default=60, help="measured pairs (gateway, direct)")
    add("--warmup", type=int, default=3, help="pairs before the measured ones")
    add("--max-tokens", type=int, default=8, help="max_tokens of every request")
    add("--side", type=int, default=336, help="the JPEG's side in pixels")
    add("--checkpoint", type=Path,
        help="the shaped checkpoint's folder (default $MMGW_REFERENCE_CACHE or "
             "~/.cache/mmgw/reference, then shaped-<shape>); generated unless current")  # fmt: skip
    add("--kv-reuse", action="store_true", help="keep the model's prefix cache on")
    add("--gateway-cpu", default=str((os.cpu_count() or 1) - 1), help="CPU(s) or all")
    add("--ready-timeout", type=float, default=900.0, help="seconds for Triton to load it")
    add("--out", type=Path, help="result folder (default build/bench/real-shape-<time>)")


def chat_body(image: ImageLoad, max_tokens: int) -> dict[str, Any]:
    """The streamed, greedy chat request with one image (greedy: both sides' text is the same
    and the shaped model's muted ids are never chosen)."""
    picture = {"type": "image_url", "image_url": {"url": image.data_url}}
    return {
        "model": SERVED_ID,
        "messages": [{"role": "user", "content": [{"type": "text", "text": PROMPT}, picture]}],
        "max_tokens": max_tokens,
        "temperature": 0,
        "stream": True,
    }


async def direct_inputs(triton: EmbeddedTriton, image: ImageLoad, max_tokens: int) -> list[Any]:
    """The tensors the gateway sends for ``chat_body``, by its own code: the llava family
    renders one user turn as its text; greedy; no end id (``end_id = "server"``)."""
    from gateway.families.calls import GREEDY, GenerationRequest
    from gateway.triton.contract import parse_model_config
    from gateway.triton.tensors import build_inputs

    async with httpx.AsyncClient(timeout=30, trust_env=False) as http:
        response = await http.get(f"{triton.http_url}/v2/models/{TRITON_MODEL}/config")
        response.raise_for_status()
    request = GenerationRequest(
        text_input=PROMPT, max_tokens=max_tokens, stream=True, sampling=GREEDY,
        prompt_table_extra_id=image.extra_id, images=("image_input", image.tensor),
    )  # fmt: skip
    return build_inputs(request, parse_model_config(response.json()))


class Sides:
    """The two ways to send the request, each on its own warm connection."""

    def __init__(
        self, triton: EmbeddedTriton, port: int, body: dict[str, Any], inputs: list[Any]
    ) -> None:
        import tritonclient.grpc.aio as grpcclient

        self.body = json.dumps(body).encode()
        self.http = HttpStreamClient("127.0.0.1", port, dict([AUTH_HEADER]))
        self.grpc = grpcclient.InferenceServerClient(triton.grpc_url)
        self.inputs = inputs
        self.gateway_url = f"http://127.0.0.1:{port}{CHAT_PATH}"

    async def gateway(self) -> StreamTiming:
        return await self.http.post(CHAT_PATH, self.body, OPENAI_MARKER)

    async def direct(self) -> tuple[StreamTiming, str]:
        """One direct stream: a token is a response carrying text, as on the gateway side."""

        async def one() -> Any:
            yield {"model_name": TRITON_MODEL, "inputs": self.inputs}

        timing, pieces = StreamTiming(time.perf_counter()), []
        async for result, error in self.grpc.stream_infer(one()):
            now = time.perf_counter()
            if error is not None:
                raise HttpStreamError(f"gRPC error: {error}")
            text = b"".join(result.as_numpy("text_output").reshape(-1)).decode()
            if text:
                timing.tokens.append(now)
                pieces.append(text)
        return timing, "".join(pieces)

    async def gateway_text(self) -> str:
        """The gateway's streamed answer as text (read whole, not timed: a check)."""
        async with httpx.AsyncClient(timeout=300, trust_env=False) as http:
            response = await http.post(
                self.gateway_url, content=self.body, headers=dict([AUTH_HEADER])
            )
        if response.status_code != 200:
            raise SystemExit(f"gateway answered {response.status_code}: {response.text[:500]}")
        return streamed_text(response.text)

    async def pair(self, gateway_first: bool) -> Pair:
        order = [self.gateway, self._direct_timing]
        first, second = order if gateway_first else order[::-1]
        timings = [
            await asyncio.wait_for(first(), REQUEST_TIMEOUT_S),
            await asyncio.wait_for(second(), REQUEST_TIMEOUT_S),
        ]
        gateway, direct = timings if gateway_first else timings[::-1]
        for name, timing in (("gateway", gateway), ("direct", direct)):
            if not timing.tokens:
                raise SystemExit(f"the {name} request streamed no token")
        return Pair(ttft_ms(gateway), ttft_ms(direct), gateway_first)

    async def _direct_timing(self) -> StreamTiming:
        return (await self.direct())[0]

    async def close(self) -> None:
        await self.http.close()
        await self.grpc.close()


def streamed_text(body: str) -> str:
    """The content deltas of an SSE chat stream joined; an error event stops the run."""
    pieces = []
    for line in body.splitlines():
        if not line.startswith("data: {"):
            continue
        event = json.loads(line.removeprefix("data: "))
        if "error" in event:
            raise SystemExit(f"gateway error event: {event}")
        pieces += [c.get("delta", {}).get("content") or "" for c in event.get("choices", [])]
    return "".join(pieces)


def ttft_ms(timing: StreamTiming) -> float:
    return (timing.tokens[0] - timing.started) * 1000


async def check_answers(sides: Sides) -> dict[str, str]:
    """Both sides give the same non-empty greedy text, or the run stops: a different answer
    would mean a different request, and the comparison would mean nothing. Unless the model
    itself answers one request two ways (GPU kernels that are not deterministic, near a tie
    of random logits): that is noted, and the run goes on."""
    gateway = await asyncio.wait_for(sides.gateway_text(), REQUEST_TIMEOUT_S)
    direct = (await asyncio.wait_for(sides.direct(), REQUEST_TIMEOUT_S))[1]
    answers = {"gateway": gateway, "direct": direct}
    if gateway and gateway == direct:
        say(f"both sides answer {gateway!r}")
        return answers
    again = (await asyncio.wait_for(sides.direct(), REQUEST_TIMEOUT_S))[1]
    if not gateway or again == direct:
        raise SystemExit(f"the two sides answer differently: {answers}")
    say(f"the model answers one request two ways ({direct!r}, {again!r}); gateway: {gateway!r}")
    return answers | {"direct_again": again}


async def measure(sides: Sides, warmup: int, count: int, pairs: list[Pair]) -> None:
    """Warm-up pairs, then ``count`` measured ones appended to ``pairs`` as they come (what
    was measured before a failure is kept)."""
    for index in range(warmup):
        await sides.pair(gateway_first=index % 2 == 0)
    for index in range(count):
        pair = await sides.pair(gateway_first=index % 2 == 0)
        pairs.append(pair)
        first = "gateway first" if pair.gateway_first else "direct first"
        say(f"pair {index + 1}/{count} ({first}): gateway {pair.gateway_ms:.2f} ms, "
            f"direct {pair.direct_ms:.2f} ms, added {pair.added_ms:+.2f} ms")  # fmt: skip


async def measure_through(
    triton: EmbeddedTriton, args: argparse.Namespace, out: Path, saved: dict[str, Any]
) -> list[Pair]:
    """The gateway in front of ``triton``, the answers checked, the pairs measured; a failure
    is recorded in ``saved["error"]`` with the pairs measured until then."""
    gateway = sides = None
    pairs: list[Pair] = []
    try:
        gateway = start_gateway(
            triton, out, parse_cpus(args.gateway_cpu),
            config_text=lambda port: gateway_toml(triton, port),
        )  # fmt: skip
        image = image_load(args.side, SERVED_ID)
        inputs = await direct_inputs(triton, image, args.max_tokens)
        sides = Sides(triton, gateway.port, chat_body(image, args.max_tokens), inputs)
        saved["answers"] = await check_answers(sides)
        await measure(sides, args.warmup, args.pairs, pairs)
    except (Exception, SystemExit) as exc:
        saved["error"] = f"{type(exc).__name__}: {exc}"
        say(f"stopped: {saved['error']}")
    finally:
        if sides is not None:
            await sides.close()
        if gateway is not None:
            gateway.stop()
    return pairs


def write_results(out: Path, saved: dict[str, Any], pairs: list[Pair], title: str) -> None:
    """Print the summary, then ``results.json`` and the plot (without matplotlib: none)."""
    saved["pairs"] = [
        {"gateway_ms": p.gateway_ms, "direct_ms": p.direct_ms, "gateway_first": p.gateway_first}
        for p in pairs
    ]
    if pairs:
        saved["summary"] = summary(pairs, GOAL_MS)
        print("\n".join(summary_lines(title, saved["summary"])), flush=True)
    (out / "results.json").write_text(json.dumps(saved, indent=1) + "\n")
    if pairs:
        try:
            plot(pairs, saved["summary"], out / "real-shape.png")
        except ImportError as exc:
            say(f"no plot: {exc}")
    say(f"results in {out}")


async def run(args: argparse.Namespace) -> int:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out = (args.out or REPO_ROOT / "build" / "bench" / f"real-shape-{stamp}").resolve()
    out.mkdir(parents=True, exist_ok=True)
    cache = Path(os.environ.get("MMGW_REFERENCE_CACHE") or DEFAULT_REFERENCE_CACHE).expanduser()
    checkpoint = (args.checkpoint or cache / f"shaped-{args.shape}").expanduser().resolve()
    saved: dict[str, Any] = {"machine": machine(), "shape": args.shape, "device": args.device}
    say(f"machine: {saved['machine']['nproc']} x {saved['machine']['cpu_model']}")
    say(f"the {args.shape} checkpoint in {checkpoint} ...")
    saved["generate_s"] = generate_checkpoint(args.shape, checkpoint, args.device)
    saved |= {"checkpoint": str(checkpoint), "checkpoint_gb": folder_gb(checkpoint),
              "kv_reuse": args.kv_reuse, "side": args.side, "max_tokens": args.max_tokens,
              "warmup": args.warmup, "gpu_memory_mb_before": gpu_memory_mb()}  # fmt: skip
    # Triton and this client off the gateway's core(s).
    pin_self(other_cpus("rest", parse_cpus(args.gateway_cpu)))
    say(f"starting Triton with {TRITON_MODEL} from the checkpoint on {args.device} ...")
    started = time.monotonic()
    triton = await start_model(out, checkpoint, args.device, args.kv_reuse, args.ready_timeout)
    try:
        saved["triton_load_s"] = time.monotonic() - started
        saved["gpu_memory_mb_loaded"] = gpu_memory_mb()
        memory = saved["gpu_memory_mb_loaded"]
        used = f", GPU memory in use {memory['used']} of {memory['total']} MiB" if memory else ""
        say(f"Triton ready after {saved['triton_load_s']:.1f} s{used}")
        pairs = await measure_through(triton, args, out, saved)
        saved["gpu_memory_mb_measured"] = gpu_memory_mb()
    finally:
        await triton.stop()
    write_results(out, saved, pairs, f"{args.shape} on {args.device}")
    return 1 if "error" in saved else 0
