"""One large resize split across a few threads, bit for bit the resize PIL does in one call.

Why: the family's resize of a large image (1024 px JPEG, decoded at 512 px, to CLIP's 336) is
a serial 2-6 ms on the request's path while the host's other cores idle; Pillow releases the
GIL while it resamples, so bands of the image resample in parallel threads.

Why not PIL's ``box``: a band of output rows resized from its share of the source (``box=(0,
a * sy, W, b * sy)``) is not the same image: PIL holds the box in single precision and
computes each filter's centre from the box's edge, so the bands land up to 20 levels off. What
is exact is PIL's own two passes (``libImaging/Resample.c``, ``ImagingResampleInner``): it
resamples along one axis, rounds to 8 bits, then along the other. The horizontal pass treats
every row alone, so it splits into bands of rows (each cropped, then resized in width only);
the vertical pass treats every column alone, so it splits into bands of columns. Each band
then runs exactly PIL's code with PIL's own coefficients, in PIL's own order of the passes
(vertical first when the height shrinks more than twice as much as the width), and the joined
bands are the one-call result, byte for byte (``tests/gateway/media/test_stripes.py`` checks
sizes, odd shapes, both filters the families use).

The pool is the process's, created on first use and bounded (``DEFAULT_STRIPE_THREADS``, at
most the cores but two; ``configure`` sets it): the decode lane's threads share the gateway
process's; media worker processes have none (``_worker.call_in_worker``: they run under an
address-space cap). The calling thread works the first band itself, then takes the bands from
the back while the pool takes them from the front, and runs any band no pool thread has
started (``Pending.result``): a busy pool makes a job serial again rather than keeping it
waiting. Every band is bounded work its caller waits for, so the lane's bounds hold (no band
outlives its job).

Measured (``python -m bench image-job --stripes 0,1``) on a shared 2-vCPU VM: a 1024 px job's
warm resize 1.8 -> 1.1 ms while the other vCPU was free, nothing gained while it was busy, the
crops and pastes costing 6-9% more CPU; and jobs paced 100 ms apart got slower, as the kernel
woke the idle pool thread on the job's own vCPU (with the pool pinned to the other vCPU, the
same paced resize went 1.9 -> 1.45 ms). Hence no pool by default below 3 cores.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Generic, TypeVar

from PIL import Image

from gateway.media import limits

__all__ = [
    "MIN_STRIPE_PIXELS",
    "Pending",
    "configure",
    "default_stripe_threads",
    "horizontal_first",
    "resize",
    "stripe_threads",
]

T = TypeVar("T")

# Below this many pixels (source or output, whichever is more) a resize stays in one call: the
# hand-offs cost more than the second core saves (measured with `python -m bench image-job`).
MIN_STRIPE_PIXELS = 100_000
_BANDS_PER_THREAD = 2  # more bands than threads: the caller takes over those not yet started
_MIN_BAND = 48  # lines per band: thinner bands cost more in calls than they share out
_FILTERS = frozenset({Image.Resampling.BICUBIC, Image.Resampling.BILINEAR})  # the families'
_MODES = frozenset({"RGB", "L"})  # one band per pixel, no premultiplied alpha round trip

_lock = threading.Lock()
_threads: int | None = None  # None: the default, from the cores this process may use
_pool: ThreadPoolExecutor | None = None


def default_stripe_threads() -> int:
    """``DEFAULT_STRIPE_THREADS``, at most the cores this process may run on (its affinity:
    a gateway pinned to a few cores, or a container's cpuset) but two."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    return min(limits.DEFAULT_STRIPE_THREADS, max(0, cores - 2))


def stripe_threads() -> int:
    """Threads the pool has (or will have) besides the calling thread; 0: nothing striped."""
    global _threads
    if _threads is None:
        _threads = default_stripe_threads()  # at first use: after any pinning at start
    return _threads


def configure(threads: int) -> None:
    """Set the pool's size (0: no striping, no pool); a pool of another size is let go (its
    threads finish what they hold) and the next striped call starts the new one."""
    global _threads, _pool
    if threads < 0:
        raise ValueError("threads must be 0 or more")
    with _lock:
        if threads == _threads:
            return
        old, _pool, _threads = _pool, None, threads
    if old is not None:
        old.shutdown(wait=False)


def _executor() -> ThreadPoolExecutor | None:
    global _pool
    threads = stripe_threads()
    if threads < 1:
        return None
    with _lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(threads, thread_name_prefix="stripe")
        return _pool


class Pending(Generic[T]):
    """``function(*args)`` handed to the pool now; ``result()`` waits for it, or runs it in
    the calling thread when no pool thread has started it yet (or there is no pool, or the
    caller said ``inline``: work too small to be worth a hand-off)."""

    def __init__(self, function: Callable[..., T], *args: object, inline: bool = False) -> None:
        self._function = function
        self._args = args
        pool = None if inline else _executor()
        self._future: Future[T] | None = pool.submit(function, *args) if pool else None

    def cancel(self) -> None:
        """Nobody will ask for the result: a pool thread that has not started it never will."""
        if self._future is not None:
            self._future.cancel()

    def result(self) -> T:
        if self._future is None or self._future.cancel():
            return self._function(*self._args)
        return self._future.result()


def resize(image: Image.Image, size: tuple[int, int], resample: Image.Resampling) -> Image.Image:
    """``image.resize(size, resample)``, the same bytes, its work shared out when it pays."""
    bands = _bands(image, size, resample)
    if bands < 2:
        return image.resize(size, resample=resample)
    image.load()  # once, here: the bands then only read it, from several threads
    width, height = size
    if horizontal_first(image.size, size):
        if width != image.width:
            image = _horizontal(image, width, resample, bands)
        if height != image.height:
            image = _vertical(image, height, resample, bands)
    else:
        if height != image.height:
            image = _vertical(image, height, resample, bands)
        if width != image.width:
            image = _horizontal(image, width, resample, bands)
    return image


def _bands(image: Image.Image, size: tuple[int, int], resample: Image.Resampling) -> int:
    """How many bands to cut: 1 (one call) when small, unsupported or without a pool."""
    threads = stripe_threads()
    if threads < 1 or resample not in _FILTERS or image.mode not in _MODES:
        return 1
    if size == image.size or min(size) < 1:
        return 1
    if max(image.width * image.height, size[0] * size[1]) < MIN_STRIPE_PIXELS:
        return 1
    most = min(size[0], image.height, image.width, size[1]) // _MIN_BAND
    return max(1, min((threads + 1) * _BANDS_PER_THREAD, most))


def horizontal_first(source: tuple[int, int], size: tuple[int, int]) -> bool:
    """PIL's order of the passes (``ImagingResampleInner``): vertical first only when the
    height shrinks by more than twice the width's shrink, in pixels."""
    shrink_y, shrink_x = source[1] - size[1], source[0] - size[0]
    return not (shrink_y > 0 and shrink_y > shrink_x * 2)


def _cuts(length: int, bands: int) -> list[tuple[int, int]]:
    return [(length * i // bands, length * (i + 1) // bands) for i in range(bands)]


def _horizontal(
    image: Image.Image, width: int, resample: Image.Resampling, bands: int
) -> Image.Image:
    """The width pass alone, by bands of rows (each row is resampled on its own)."""

    def band(top: int, bottom: int) -> Image.Image:
        rows = image.crop((0, top, image.width, bottom))
        return rows.resize((width, bottom - top), resample=resample)

    return _joined(image.mode, (width, image.height), band, _cuts(image.height, bands), True)


def _vertical(
    image: Image.Image, height: int, resample: Image.Resampling, bands: int
) -> Image.Image:
    """The height pass alone, by bands of columns (each column is resampled on its own)."""

    def band(left: int, right: int) -> Image.Image:
        columns = image.crop((left, 0, right, image.height))
        return columns.resize((right - left, height), resample=resample)

    return _joined(image.mode, (image.width, height), band, _cuts(image.width, bands), False)


def _joined(
    mode: str,
    size: tuple[int, int],
    band: Callable[[int, int], Image.Image],
    cuts: list[tuple[int, int]],
    rows: bool,
) -> Image.Image:
    """Every band resampled, pasted into one image. The pool takes bands from the front, this
    thread the first one and then from the back, so a pool thread slow to wake (an idle core)
    leaves its bands to this one rather than keeping it waiting."""
    pending = [Pending(band, start, end) for start, end in cuts[1:]]
    parts = [band(*cuts[0])]
    parts += reversed([p.result() for p in reversed(pending)])
    joined = Image.new(mode, size)
    for (start, _), part in zip(cuts, parts, strict=True):
        joined.paste(part, (0, start) if rows else (start, 0))
    return joined
