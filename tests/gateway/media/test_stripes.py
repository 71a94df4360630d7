"""The striped resize gives PIL's one-call bytes exactly; the pool's hand-offs keep results,
errors and order, and a busy (or absent) pool still finishes the work in the caller."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import numpy as np
import pytest
from PIL import Image

from gateway.media import stripes

FILTERS = [Image.Resampling.BICUBIC, Image.Resampling.BILINEAR]

# (source width, height) -> target (width, height): CLIP's shortest edge, exact squares,
# upscales, odd sizes, thin strips, and shapes where PIL runs the vertical pass first.
CASES = [
    ((512, 512), (336, 336)),
    ((1024, 1024), (336, 336)),
    ((511, 383), (448, 336)),
    ((640, 480), (448, 336)),
    ((383, 511), (336, 448)),
    ((333, 777), (336, 336)),  # width up, height down: vertical first
    ((37, 1001), (336, 336)),
    ((1001, 97), (336, 336)),
    ((450, 338), (447, 336)),
    ((700, 701), (490, 490)),
    ((300, 300), (490, 490)),  # an upscale
    ((2048, 1536), (224, 224)),
    ((512, 512), (512, 336)),  # height only
    ((512, 512), (336, 512)),  # width only
]


@pytest.fixture(params=[1, 2, 3], ids=lambda n: f"{n}-threads")
def pool(request: pytest.FixtureRequest) -> Iterator[int]:
    before = stripes.stripe_threads()
    stripes.configure(request.param)
    yield request.param
    stripes.configure(before)


def noise(width: int, height: int, mode: str = "RGB", seed: int = 0) -> Image.Image:
    rng = np.random.default_rng(seed + width * 7 + height)
    shape = (height, width, 3) if mode == "RGB" else (height, width)
    return Image.fromarray(rng.integers(0, 256, shape, dtype=np.uint8), mode)


@pytest.mark.parametrize("resample", FILTERS, ids=lambda f: f.name)
@pytest.mark.parametrize(("source", "target"), CASES, ids=str)
def test_striped_resize_is_pils_one_call_resize_byte_for_byte(
    pool: int, source: tuple[int, int], target: tuple[int, int], resample: Image.Resampling
) -> None:
    image = noise(*source)
    expected = np.asarray(image.resize(target, resample=resample))
    got = stripes.resize(image, target, resample)
    assert got.size == target and got.mode == "RGB"
    np.testing.assert_array_equal(np.asarray(got), expected)


def test_greyscale_is_striped_exactly_too(pool: int) -> None:
    image = noise(900, 700, "L")
    for resample in FILTERS:
        expected = np.asarray(image.resize((431, 336), resample=resample))
        got = np.asarray(stripes.resize(image, (431, 336), resample))
        np.testing.assert_array_equal(got, expected)


def test_large_resizes_are_cut_in_bands_and_small_ones_are_not(pool: int) -> None:
    big, small = noise(512, 512), noise(300, 300)
    # two bands a thread (the caller takes those not started), each at least 48 lines
    assert stripes._bands(big, (336, 336), Image.Resampling.BICUBIC) == min((pool + 1) * 2, 7)
    assert stripes._bands(small, (224, 224), Image.Resampling.BICUBIC) == 1
    assert stripes._bands(big, (336, 336), Image.Resampling.LANCZOS) == 1  # not a family's
    assert stripes._bands(big.convert("RGBA"), (336, 336), Image.Resampling.BICUBIC) == 1


def test_pils_pass_order_is_followed() -> None:
    assert stripes.horizontal_first((512, 512), (336, 336))
    assert not stripes.horizontal_first((333, 777), (336, 336))  # height shrinks far more
    assert stripes.horizontal_first((300, 300), (490, 490))  # nothing shrinks


def test_no_pool_means_one_call() -> None:
    before = stripes.stripe_threads()
    stripes.configure(0)
    try:
        assert stripes._bands(noise(512, 512), (336, 336), Image.Resampling.BICUBIC) == 1
        ran_in: list[str] = []
        pending = stripes.Pending(lambda: ran_in.append(threading.current_thread().name))
        pending.result()
        assert ran_in == [threading.current_thread().name]
    finally:
        stripes.configure(before)


def test_pending_returns_the_result_or_raises_the_error(pool: int) -> None:
    assert stripes.Pending(sum, [1, 2, 3]).result() == 6

    def fails() -> None:
        raise MemoryError

    with pytest.raises(MemoryError):
        stripes.Pending(fails).result()


def test_a_busy_pool_does_not_hold_the_caller_back(pool: int) -> None:
    """Every pool thread blocked: the pending call runs in the caller instead of waiting."""
    release = threading.Event()
    blockers = [stripes.Pending(release.wait) for _ in range(pool)]
    try:
        name = stripes.Pending(lambda: threading.current_thread().name).result()
        assert name == threading.current_thread().name
    finally:
        release.set()
        for blocker in blockers:
            blocker.result()


def test_configure_refuses_a_negative_size() -> None:
    with pytest.raises(ValueError):
        stripes.configure(-1)


def test_the_lane_sets_the_pool_size_its_settings_name() -> None:
    """``[decode] stripe_threads`` reaches the pool through the thread lane; unset, the lane
    leaves the pool as it is (the default, or what an earlier lane set)."""
    from gateway.config.limits import DecodeSettings
    from gateway.media.threads import ThreadLane, ThreadLimits

    before = stripes.stripe_threads()
    try:
        lane_limits = DecodeSettings(stripe_threads=before + 2).offload_limits().threads
        assert lane_limits.stripe_threads == before + 2
        ThreadLane(lane_limits, 1.0).close()
        assert stripes.stripe_threads() == before + 2
        ThreadLane(ThreadLimits(threads=1), 1.0).close()  # as the worker lane builds one
        assert stripes.stripe_threads() == before + 2
        ThreadLane(DecodeSettings(stripe_threads=0).offload_limits().threads, 1.0).close()
        assert stripes.stripe_threads() == 0
        assert stripes._bands(noise(512, 512), (336, 336), Image.Resampling.BICUBIC) == 1
    finally:
        stripes.configure(before)


def test_the_default_leaves_two_of_the_cores_this_process_may_use() -> None:
    import os

    cores = len(os.sched_getaffinity(0))
    assert stripes.default_stripe_threads() == min(3, max(0, cores - 2))
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(before)})  # pinned to one core: no pool
    try:
        assert stripes.default_stripe_threads() == 0
    finally:
        os.sched_setaffinity(0, before)
