"""Which lane decodes an image (a thread or a worker process), and that both keep every limit.

The thread lane (media/threads.py) takes only still images whose header bounds their cost;
everything else, and anything PIL sees differently from the header, goes to a worker process.
The content ids must not depend on the lane: both lanes must give the id computed here, apart
from the pipeline, from ``content_digest`` over the source bytes (``pipeline/_media_jobs.py``).
"""

from __future__ import annotations

import asyncio
import base64
import io
import struct
import time
from collections.abc import AsyncIterator

import numpy as np
import pytest
from PIL import Image

from gateway.config import MediaSettings, ServedModel
from gateway.errors import MediaDecodeError, MediaTimeout, MediaTooLarge
from gateway.families.registry import get_family
from gateway.media.fetch import MediaFetcher
from gateway.media.identity import ExtraIdRegistry, content_digest
from gateway.media.offload import Offloader, OffloadLimits
from gateway.media.threads import ThreadLane, ThreadLimits
from gateway.observability.metrics import GatewayMetrics
from gateway.pipeline._media_jobs import DECODERS
from gateway.pipeline.conversation import MediaPart
from gateway.pipeline.media import prepare_media
from gateway.served import ServedRuntime
from gateway.services import Media


def picture(fmt: str, width: int, height: int, **save: object) -> bytes:
    rng = np.random.default_rng(0)
    y, x = np.mgrid[0:height, 0:width]
    pixels = ((x * 3 + y * 5 + rng.integers(0, 40, (height, width))) % 256).astype(np.uint8)
    rgb = np.stack([pixels, pixels[::-1], pixels[:, ::-1]], -1)
    out = io.BytesIO()
    Image.fromarray(rgb).save(out, fmt, **save)
    return out.getvalue()


def flat(fmt: str, width: int, height: int, **save: object) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), (90, 120, 30)).save(out, fmt, **save)
    return out.getvalue()


def data_url(data: bytes) -> str:
    media_type = "image/png" if data.startswith(b"\x89PNG") else "image/jpeg"
    return f"data:{media_type};base64," + base64.b64encode(data).decode()


JPEG_336 = picture("JPEG", 336, 336, quality=90)
JPEG_1024 = picture("JPEG", 1024, 768, quality=90)
PNG = picture("PNG", 200, 120)
PROGRESSIVE = picture("JPEG", 400, 300, progressive=True)

CASES = {
    "jpeg_336": [JPEG_336],
    "jpeg_1024x768": [JPEG_1024],
    "png_200x120": [PNG],
    "progressive_jpeg": [PROGRESSIVE],
    "two_images": [PNG, JPEG_336],
}


def expected_id(images: list[bytes]) -> int | None:
    """The id of ``images`` for model "golden" (llava, no salt), from the digest's definition."""
    options = f"{get_family('llava').processing_options()}|draft=1.5|{DECODERS}"
    digest = content_digest(
        model="golden",
        options=options,
        arrays=[np.frombuffer(image, np.uint8) for image in images],
        kinds=["image:source"] * len(images),
    )
    return ExtraIdRegistry().extra_id(digest)


async def start(threads: int) -> Offloader:
    limits = OffloadLimits(workers=1, threads=ThreadLimits(threads=threads))
    pool = Offloader(limits, preload=("gateway.pipeline._media_jobs",))
    await pool.start()
    return pool


@pytest.fixture(scope="module")
async def offload() -> AsyncIterator[Offloader]:
    pool = await start(threads=2)
    yield pool
    await pool.aclose()


@pytest.fixture(scope="module")
async def processes_only() -> AsyncIterator[Offloader]:
    pool = await start(threads=0)
    assert pool.threads is None
    yield pool
    await pool.aclose()


@pytest.fixture(scope="module")
async def fetcher() -> AsyncIterator[MediaFetcher]:
    fetcher = MediaFetcher()
    yield fetcher
    await fetcher.aclose()


def media_with(offload: Offloader, fetcher: MediaFetcher) -> Media:
    settings = MediaSettings(max_images_per_request=4, content_id_salt="")
    return Media.of(fetcher, offload, settings, GatewayMetrics())


def served() -> ServedRuntime:
    config = ServedModel(id="golden", family="llava", triton_model="t", triton_url="fake:1")
    return ServedRuntime(config, get_family("llava"), client=None)  # type: ignore[arg-type]


async def prepare(media: Media, *images: bytes) -> int | None:
    parts = [
        MediaPart("image", ("messages", 0, "content", i), url=data_url(b))
        for i, b in enumerate(images)
    ]
    prepared = await prepare_media(parts, served(), media)
    assert prepared is not None
    return prepared.extra_id


def test_the_lane_takes_only_images_whose_header_bounds_them() -> None:
    lane = ThreadLimits(threads=2, max_pixels=1024 * 1024, max_bytes=1 << 20, max_side=2048)
    assert lane.takes(JPEG_336) and lane.takes(JPEG_1024) and lane.takes(PNG)
    assert not lane.takes(PROGRESSIVE)  # time grows with the number of scans
    assert not lane.takes(flat("WEBP", 64, 48)) and not lane.takes(flat("GIF", 64, 48))
    assert not lane.takes(flat("PNG", 1025, 1024))  # pixels, by the header
    assert not lane.takes(flat("PNG", 2049, 8))  # the longest side
    assert not lane.takes(JPEG_1024[:100])  # no start-of-frame yet: no stated size
    assert not lane.takes(b"\xff\xd8\xff" + bytes(2 << 20))  # bytes
    assert not ThreadLimits(threads=0).takes(JPEG_336)  # the lane switched off
    # A PNG header claiming 50k x 50k is never a thread's: the worker refuses it by its header.
    bomb = bytearray(flat("PNG", 8, 8))
    bomb[16:24] = struct.pack(">II", 50_000, 50_000)
    assert not lane.takes(bytes(bomb))


def test_the_lane_decision_is_cheap_on_the_event_loop_for_a_crafted_header() -> None:
    """A JPEG of a million empty segments (4 MiB) would take a Python marker walk about a
    third of a second; the lane's probe stops after a few hundred and says "unknown"."""
    crafted = b"\xff\xd8" + b"\xff\xe0\x00\x02" * (1 << 20)
    lane = ThreadLimits(max_bytes=8 << 20)
    started = time.perf_counter()
    assert not lane.takes(crafted) and not lane.takes(b"\xff\xd8" + b"\xff" * (4 << 20))
    assert time.perf_counter() - started < 0.05


@pytest.mark.parametrize("name", list(CASES))
async def test_content_ids_are_those_from_before_the_lane(
    offload: Offloader, processes_only: Offloader, fetcher: MediaFetcher, name: str
) -> None:
    images = CASES[name]
    golden = expected_id(images)
    assert offload.threads is not None
    before = offload.threads.items
    assert await prepare(media_with(offload, fetcher), *images) == golden
    took = sum(1 for image in images if offload.threads.limits.takes(image))
    assert offload.threads.items - before == took
    assert await prepare(media_with(processes_only, fetcher), *images) == golden


async def test_a_truncated_jpeg_is_refused_in_the_thread_lane(
    offload: Offloader, fetcher: MediaFetcher
) -> None:
    assert offload.threads is not None
    truncated = JPEG_1024[: len(JPEG_1024) // 2]
    assert offload.threads.limits.takes(truncated)
    before = offload.threads.items
    with pytest.raises(MediaDecodeError, match="truncated or corrupt") as caught:
        await prepare(media_with(offload, fetcher), truncated)
    assert caught.value.message.startswith("image 1 of 1: ")
    assert caught.value.param == "messages[0].content[0]"
    assert offload.threads.items == before + 1


async def test_a_bomb_by_its_header_is_refused_before_decoding(
    offload: Offloader, fetcher: MediaFetcher
) -> None:
    bomb = bytearray(flat("PNG", 8, 8))
    bomb[16:24] = struct.pack(">II", 50_000, 50_000)
    with pytest.raises(MediaTooLarge, match="megapixels"):
        await prepare(media_with(offload, fetcher), bytes(bomb))


async def test_an_image_pil_sees_larger_than_its_header_goes_to_a_worker(
    offload: Offloader, fetcher: MediaFetcher
) -> None:
    """A JPEG with a small start-of-frame in front of its real (4.4 MP) one: the header says
    64 x 48, so the lane takes it; PIL reads the last frame header, over the lane's cap; the
    lane refuses it and a worker decides, under the full limits (here: corrupt)."""
    assert offload.threads is not None
    real = flat("JPEG", 2100, 2100, quality=50)
    fake_frame = b"\xff\xc0" + struct.pack(">HBHHB", 11, 8, 48, 64, 1) + b"\x01\x11\x00"
    two_frames = real[:2] + fake_frame + real[2:]
    assert offload.threads.limits.takes(two_frames)
    before = offload.threads.items
    with pytest.raises(MediaDecodeError, match="truncated or corrupt"):
        await prepare(media_with(offload, fetcher), two_frames)
    assert offload.threads.items == before + 1


async def test_a_slow_item_in_a_thread_times_out_and_keeps_its_slot_until_done() -> None:
    lane = ThreadLane(ThreadLimits(threads=1), item_timeout_s=0.2)
    started = time.perf_counter()
    with pytest.raises(MediaTimeout, match=r"the image took longer than the 0\.2 s"):
        await lane.run(time.sleep, 0.6, what="the image")
    assert time.perf_counter() - started < 0.5
    assert lane.abandoned == 1 and lane.busy == 1  # the thread runs on: its slot stays taken
    waited: list[float] = []
    assert await lane.run(sum, (1, 2), on_wait=waited.append) == 3
    assert waited[0] > 0.2  # the next item queued until the slow one ended
    assert lane.busy == 0
    lane.close()


async def test_a_job_error_is_mapped_as_a_worker_maps_it() -> None:
    lane = ThreadLane(ThreadLimits(threads=1), item_timeout_s=1)

    with pytest.raises(MediaDecodeError, match="could not be decoded"):
        await lane.run(int, "not a number")
    with pytest.raises(MediaTooLarge, match="more memory"):
        await lane.run(np.empty, 1 << 45)  # 32 TiB: no allocator gives that
    await asyncio.sleep(0)
    assert lane.busy == 0
    lane.close()


async def test_a_caller_that_leaves_frees_its_slot_only_when_the_thread_is_done() -> None:
    lane = ThreadLane(ThreadLimits(threads=1), item_timeout_s=5)
    task = asyncio.create_task(lane.run(time.sleep, 0.3))
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert lane.busy == 1  # the thread still sleeps: its slot is not handed out
    started = time.perf_counter()
    assert await lane.run(abs, -2) == 2
    assert time.perf_counter() - started > 0.15 and lane.busy == 0
    lane.close()


async def test_a_small_image_the_loop_prepares_gets_the_id_a_thread_gives(
    offload: Offloader, fetcher: MediaFetcher
) -> None:
    assert offload.threads is not None and offload.threads.limits.small(JPEG_336)
    golden = expected_id([JPEG_336])
    media = media_with(offload, fetcher)
    registry = media.metrics.registry  # type: ignore[attr-defined]
    before = offload.threads.on_loop
    for _ in range(3):
        assert await prepare(media, JPEG_336) == golden
        await asyncio.sleep(0.1)  # the loop rests after each job it ran
    on_loop = offload.threads.on_loop - before
    assert on_loop >= 2  # a thread took the first of its kind
    assert registry.get_sample_value("mmgw_media_items_total", {"where": "loop"}) == on_loop
    assert await prepare(media, JPEG_1024) == expected_id([JPEG_1024])
    assert offload.threads.on_loop - before == on_loop  # 1024 x 768 is never the loop's
    threads = registry.get_sample_value("mmgw_media_items_total", {"where": "thread"})
    assert threads == 4 - on_loop
