"""``python -m bench.shm``: an image tensor to Triton by system shared memory vs inside the gRPC
request, on loopback, to decide whether the gateway should register shared-memory regions.

Each request sends an fp16 ``image_input`` of 1 to 6 LLaVA images (0.7 to 4 MB) with a
one-token prompt to the bench fixture (``loadgen_ensemble``, streaming, no compute) and
times, from before the tensor is placed to the first response:

- grpc: ``InferInput.set_data_from_numpy`` (the tensor serialised into the request), as the
  gateway sends it today;
- shm: the tensor copied into a system shared-memory region registered with Triton once
  (``tritonclient.utils.shared_memory``), the request naming the region
  (``InferInput.set_shared_memory``). One region per in-flight request, reused.

Both sides pay one copy of the tensor on the client (serialisation or the copy into the
region); what differs is the gRPC transfer and Triton's copy out of the request message.
Sequential requests (concurrency 1) first, then ``--concurrency`` at once. Prints both
medians and p99s and the ratio shm / grpc.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from collections.abc import AsyncIterator
from typing import Any

import numpy as np
import tritonclient.grpc.aio as grpcclient
import tritonclient.utils.shared_memory as shm

from bench.stack import BENCH_MODEL, set_token_interval, start_triton

IMAGE = (3, 336, 336)


def _scalars() -> list[grpcclient.InferInput]:
    def tensor(name: str, datatype: str, value: object, dtype: Any) -> grpcclient.InferInput:
        item = grpcclient.InferInput(name, [1, 1], datatype)
        item.set_data_from_numpy(np.array([[value]], dtype=dtype))
        return item

    return [
        tensor("text_input", "BYTES", b"hello", np.object_),
        tensor("max_tokens", "INT32", 1, np.int32),
        tensor("stream", "BOOL", True, np.bool_),
    ]


class Region:
    """One system shared-memory region, registered with Triton under a name of its own."""

    def __init__(self, name: str, byte_size: int) -> None:
        self.name, self.byte_size = name, byte_size
        self.handle = shm.create_shared_memory_region(name, f"/{name}", byte_size)

    async def register(self, client: grpcclient.InferenceServerClient) -> None:
        await client.register_system_shared_memory(self.name, f"/{self.name}", self.byte_size)

    async def release(self, client: grpcclient.InferenceServerClient) -> None:
        await client.unregister_system_shared_memory(self.name)
        shm.destroy_shared_memory_region(self.handle)


async def _first_response(
    client: grpcclient.InferenceServerClient, inputs: list[grpcclient.InferInput]
) -> None:
    async def one() -> AsyncIterator[dict[str, Any]]:
        yield {"model_name": BENCH_MODEL, "inputs": inputs}

    async for _result, error in client.stream_infer(one()):
        if error is not None:
            raise RuntimeError(f"Triton: {error}")


async def _request(
    client: grpcclient.InferenceServerClient, pixels: np.ndarray, region: Region | None
) -> float:
    started = time.perf_counter()
    image = grpcclient.InferInput("image_input", list(pixels.shape), "FP16")
    if region is None:
        image.set_data_from_numpy(pixels)
    else:
        shm.set_shared_memory_region(region.handle, [pixels])
        image.set_shared_memory(region.name, pixels.nbytes)
    await _first_response(client, [*_scalars(), image])
    return time.perf_counter() - started


async def _measure(
    client: grpcclient.InferenceServerClient,
    pixels: np.ndarray,
    regions: list[Region] | None,
    concurrency: int,
    requests: int,
) -> list[float]:
    """``requests`` per stream, ``concurrency`` streams (each with its own region)."""

    async def stream(index: int) -> list[float]:
        region = regions[index] if regions is not None else None
        return [await _request(client, pixels, region) for _ in range(requests)]

    await stream(0)  # warm-up
    runs = await asyncio.gather(*(stream(i) for i in range(concurrency)))
    return [t for run in runs for t in run]


def _ms(values: list[float], q: float) -> float:
    return float(np.percentile(values, q) * 1000)


async def run(args: argparse.Namespace) -> int:
    triton = await start_triton()
    client = grpcclient.InferenceServerClient(triton.grpc_url)
    regions: list[Region] = []
    try:
        await set_token_interval(triton, 0)
        largest = max(args.images) * int(np.prod(IMAGE)) * 2
        prefix = f"mmgw_bench_{os.getpid()}"
        regions = [Region(f"{prefix}_{i}", largest) for i in range(max(args.concurrency))]
        for region in regions:
            await region.register(client)
        print("| images | MB | conc. | grpc p50 ms | shm p50 ms | grpc p99 ms | shm p99 ms "
              "| shm / grpc p50 |")  # fmt: skip
        print("|---:|---:|---:|---:|---:|---:|---:|---:|")
        for count in args.images:
            pixels = np.random.default_rng(count).standard_normal((1, count, *IMAGE))
            pixels = pixels.astype(np.float16)
            for concurrency in args.concurrency:
                # Interleaved rounds, so drift in the machine's load hits both alike.
                plain: list[float] = []
                shared: list[float] = []
                for _ in range(args.rounds):
                    plain += await _measure(client, pixels, None, concurrency, args.requests)
                    shared += await _measure(client, pixels, regions, concurrency, args.requests)
                ratio = statistics.median(shared) / statistics.median(plain)
                print(
                    f"| {count} | {pixels.nbytes / 1e6:.2f} | {concurrency} "
                    f"| {_ms(plain, 50):.2f} | {_ms(shared, 50):.2f} | {_ms(plain, 99):.2f} "
                    f"| {_ms(shared, 99):.2f} | {ratio:.2f} |",
                    flush=True,
                )
    finally:
        for region in regions:
            await region.release(client)
        await client.close()
        await triton.stop()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.shm", description=__doc__)
    parser.add_argument("--images", default="1,2,4,6", help="images per tensor (0.68 MB each)")
    parser.add_argument("--concurrency", default="1,8", help="concurrent streams")
    parser.add_argument("--requests", type=int, default=20, help="per stream per round")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds")
    args = parser.parse_args(argv)
    args.images = [int(n) for n in args.images.split(",")]
    args.concurrency = [int(n) for n in args.concurrency.split(",")]
    import uvloop

    return uvloop.run(run(args))


if __name__ == "__main__":
    sys.exit(main())
