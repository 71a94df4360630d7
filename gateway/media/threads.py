"""The decode thread lane: still images whose worst case the header checks bound, decoded in a
small pool of threads of the gateway's own process instead of a worker process.

Why: a worker process costs a pickled copy of the array back, two process wake-ups and two
pipe hand-offs per item; for a 336 x 336 JPEG that is several times the decoding itself.
Pillow releases the GIL while it decodes and resizes, so a thread does the same work without
the round trip, and the event loop keeps running.

Why only some images: a thread cannot be killed. Work goes to a thread only when its worst
case is bounded before it starts, by what ``takes`` reads from the header (no PIL):

- the format is PNG or a one-pass JPEG (baseline or extended sequential, Huffman-coded).
  Their decoding is one pass over the pixels and the bytes. Progressive, arithmetic and
  lossless JPEGs (time grows with the number of scans, which a crafted file multiplies),
  WebP and GIF (animation, canvas handling) and anything unrecognised go to a process;
- the header states a size, within ``max_pixels`` and ``max_side``: decoded memory is at most
  ``max_pixels`` x 4 bytes and the family's resize works on at most that many pixels;
- the header read itself is bounded (``read_header`` walks at most a few hundred JPEG
  segments): it runs on the event loop;
- the encoded bytes are within ``max_bytes`` (the bytes bound the entropy decoding and the
  PNG chunks: Pillow caps text chunks itself).

The same item budget still applies: a caller waits at most ``item_timeout_s`` and gets
``media_timeout``; the thread then finishes its bounded work and only then frees its slot, so
abandoned items still count against the lane's size. A job may share its resize and digest
with the process's stripes' pool (``stripes.py``): its thread waits for every band it handed
out, so the slot still covers the whole job, and the lane's CPU is at most ``threads`` plus
that pool's few threads, which every job of the process shares.

Where Pillow reads a different size than the header did, the image is refused here with
``MediaTooLarge`` and the pipeline sends it to a worker process, which decides under the full
limits (and the address-space cap).

A small image (``inline_max_pixels`` by its header: 400 x 400 by default) may skip the lane and
run on the event loop itself, when the loop can spare it. The hop to an idle thread and back
costs more than such an image's work: a thread that slept since the last request wakes on a
cold core (0.65 ms of hand-offs for a 336 px JPEG on the GPU host, where its decode takes
about 1). The loop takes one only while no thread job is running, only after a small job of
the same kind ran in a thread once (a first job loads codecs or GPU kernels) and only while the
last such job took at most 5 ms (one that took longer, a GPU busy with the model or a loaded
host, sends the next to a thread), and at most a tenth of its time: after each, it leaves the
next to the lane for nine times as long. Its worst case is a lane job's at 400 x 400 pixels
instead of 2048 x 2048; the budget cannot cut it short, so it is bounded before it starts, as
every lane job is.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Literal, TypeVar, cast

from gateway.errors import MediaTimeout
from gateway.media import limits, stripes
from gateway.media._worker import call_job
from gateway.media.cuda_jpeg import DeviceDecoder, open_device
from gateway.media.image import ImageLimits, read_header

__all__ = ["ThreadLane", "ThreadLimits"]

T = TypeVar("T")
_ONE_PASS_FORMATS = frozenset({"JPEG", "PNG"})
# After a job on the event loop, the lane takes the next ones for this many times as long:
# the loop spends at most a tenth of its time on images.
_LOOP_REST = 9.0
# A kind of small job whose last run took longer than this goes to a thread until one runs
# faster again: a stall of the loop that other streams' tokens would notice (a GPU that the
# model's own work keeps busy, a loaded host) moves off the loop after one such job.
_LOOP_JOB_MAX_S = 0.005


@dataclass(frozen=True)
class ThreadLimits:
    """How many threads decode at once, and what an image may be to go to one."""

    threads: int = limits.DEFAULT_DECODE_THREADS
    max_pixels: int = limits.DEFAULT_THREAD_MAX_PIXELS
    max_bytes: int = limits.DEFAULT_THREAD_MAX_BYTES
    max_side: int = limits.DEFAULT_THREAD_MAX_SIDE
    # The process's pool that shares a large resize (``media/stripes.py``); None leaves it as
    # it is (the default: the cores but two, at most ``DEFAULT_STRIPE_THREADS``).
    stripe_threads: int | None = None
    # Where still JPEGs of families with a pixel recipe are decoded: "cpu" (PIL), or a CUDA
    # device ("cuda", "cuda:1"), in these same threads (``media/cuda_jpeg.py``).
    device: str = "cpu"
    # Images up to this many pixels (by the header) may run on the event loop: 0 never.
    inline_max_pixels: int = limits.DEFAULT_INLINE_MAX_PIXELS

    def fit(self, data: bytes) -> Literal["thread", "loop"] | None:
        """Where ``data`` may be prepared, from one read of its header: None (a worker
        process: not bounded enough for a thread, see the module's list), "thread", or
        "loop" (small enough for the event loop: few pixels, and no more bytes than those
        pixels take uncompressed, 4 a pixel, so a small picture padded with megabytes of
        segments is a thread's)."""
        if self.threads < 1 or not data or len(data) > self.max_bytes:
            return None
        header = read_header(data)
        if header.format not in _ONE_PASS_FORMATS or not header.single_pass:
            return None
        if header.size is None:
            return None
        width, height = header.size
        pixels = width * height
        if not (0 < pixels <= self.max_pixels and 0 < max(width, height) <= self.max_side):
            return None
        small = pixels <= self.inline_max_pixels and len(data) <= 4 * self.inline_max_pixels
        return "loop" if small else "thread"

    def takes(self, data: bytes) -> bool:
        """Whether decoding ``data`` is bounded enough for a thread."""
        return self.fit(data) is not None

    def small(self, data: bytes) -> bool:
        """Whether ``data`` is small enough to run on the event loop (``fit``)."""
        return self.fit(data) == "loop"

    def image_limits(self, image: ImageLimits) -> ImageLimits:
        """``image`` tightened to this lane's caps, so PIL's own view of the size is held to
        them too (a file whose header lied is refused here and goes to a process)."""
        return ImageLimits(
            max_bytes=min(image.max_bytes, self.max_bytes),
            max_pixels=min(image.max_pixels, self.max_pixels),
            max_side=min(image.max_side or self.max_side, self.max_side),
        )


class ThreadLane:
    """A fixed pool of ``limits.threads`` threads; ``run(function, *args)`` runs one item.

    Callers queue (on the event loop, measured by ``on_wait``) for a free slot; the budget
    counts from the hand-over. ``items`` counts items run, ``on_loop`` those of them the event
    loop ran itself (``small``), ``abandoned`` those whose caller stopped waiting (timeout);
    their threads ran on to the end of their bounded work.
    """

    def __init__(self, limits: ThreadLimits, item_timeout_s: float) -> None:
        if limits.threads < 1 or item_timeout_s <= 0:
            raise ValueError("need at least one thread and a positive time budget")
        self.limits = limits
        self.item_timeout_s = item_timeout_s
        self.device: DeviceDecoder | None = open_device(limits.device)  # may refuse: first
        self._executor = ThreadPoolExecutor(limits.threads, thread_name_prefix="decode")
        self._slots = asyncio.Semaphore(limits.threads)
        if limits.stripe_threads is not None:
            stripes.configure(limits.stripe_threads)
        self.items = 0
        self.on_loop = 0
        self.abandoned = 0
        self.busy = 0
        # The last small job of each kind (function): seconds it ran, in a thread or here.
        self._small_s: dict[Callable[..., Any], float] = {}
        self._loop_free_at = 0.0  # perf_counter: when the loop may take the next job
        self._warm()

    def _warm(self) -> None:
        """Start every thread now: a cold pool starts one per hand-over, on the request path."""
        for _ in range(self.limits.threads):
            self._executor.submit(time.sleep, 0)

    async def run(
        self,
        function: Callable[..., T],
        *args: Any,
        what: str = "the media",
        on_wait: Callable[[float], None] | None = None,
        timeout_s: float | None = None,
        small: bool = False,
    ) -> T:
        """``function(*args)`` in a thread within the item budget (``timeout_s`` when given),
        or on the loop where the job is ``small`` (``ThreadLimits.small``) and the loop can
        spare it; its errors mapped as a worker process maps them (MemoryError ->
        MediaTooLarge, others MediaDecodeError)."""
        if small and self._loop_may_take(function):
            return self._on_loop(function, args)
        budget = timeout_s if timeout_s is not None else self.item_timeout_s
        queued = time.perf_counter()
        await self._slots.acquire()
        if on_wait is not None:
            on_wait(time.perf_counter() - queued)
        self.busy += 1
        self.items += 1
        try:
            future = asyncio.get_running_loop().run_in_executor(
                self._executor, _timed_job, function, args
            )
        except BaseException:
            self._free()
            raise
        future.add_done_callback(self._finished)  # the slot is free when the thread is
        if small:
            future.add_done_callback(functools.partial(self._timed, function))
        try:
            (ok, value), _ = await asyncio.wait_for(asyncio.shield(future), budget)
        except asyncio.TimeoutError:
            self.abandoned += 1
            raise MediaTimeout(
                f"Decoding {what} took longer than the {budget:g} s this server allows per item."
            ) from None
        if ok:
            return cast(T, value)  # the job's own result, through a pickle or a thread
        raise value

    def _loop_may_take(self, function: Callable[..., Any]) -> bool:
        """No thread job running (the loop would only queue beside it), a small job of this
        kind run before (the first in a thread) and fast, and the loop rested since its
        last one."""
        if self.busy or self._small_s.get(function, _LOOP_JOB_MAX_S + 1) > _LOOP_JOB_MAX_S:
            return False
        return time.perf_counter() >= self._loop_free_at

    def _timed(self, function: Callable[..., Any], future: asyncio.Future[Any]) -> None:
        if not future.cancelled() and future.exception() is None:
            self._small_s[function] = future.result()[1]

    def _on_loop(self, function: Callable[..., T], args: tuple[Any, ...]) -> T:
        started = time.perf_counter()
        self.items += 1
        self.on_loop += 1
        try:
            ok, value = call_job(function, args)
        finally:
            ended = time.perf_counter()
            self._small_s[function] = ended - started
            self._loop_free_at = ended + _LOOP_REST * (ended - started)
        if ok:
            return cast(T, value)
        raise value

    def _finished(self, future: asyncio.Future[Any]) -> None:
        if not future.cancelled():
            future.exception()  # retrieved: an abandoned item's error is nobody's now
        self._free()

    def _free(self) -> None:
        self.busy -= 1
        self._slots.release()

    def close(self) -> None:
        """Stop taking items; threads still running finish their (bounded) work."""
        self._executor.shutdown(wait=False, cancel_futures=True)


def _timed_job(function: Callable[..., Any], args: tuple[Any, ...]) -> tuple[Any, float]:
    """``call_job``'s reply, and the seconds the job ran in its thread."""
    started = time.perf_counter()
    reply = call_job(function, args)
    return reply, time.perf_counter() - started
