"""The media plane: built once per gateway, its limits with it (issue 23 item 4)."""

from __future__ import annotations

from gateway.config import Settings
from gateway.media.decoder import InProcessDecoder
from gateway.media.fetch import MediaFetcher
from gateway.media.identity import ExtraIdRegistry
from gateway.media.offload import OffloadLimits
from gateway.media.plane import Fetcher, MediaPlane
from gateway.media.threads import ThreadLimits


async def test_the_limits_are_the_settings_built_once_and_the_lanes_tightened() -> None:
    settings = Settings(media={"max_bytes": 5_000_000, "image": {"max_pixels": 40_000_000}})
    lane = ThreadLimits(threads=1, max_pixels=1_000_000, max_bytes=2_000_000, max_side=2048)
    decoder = InProcessDecoder(OffloadLimits(workers=1, threads=lane))
    fetcher: Fetcher = MediaFetcher()  # the gateway's fetcher is a Fetcher
    plane = MediaPlane(fetcher, decoder, settings.media.limits(), ExtraIdRegistry())
    try:
        assert plane.limits.image == settings.media.image_limits()
        assert plane.limits.video == settings.media.video_limits()
        assert plane.limits.audio == settings.media.audio_limits()
        assert plane.lane_image is not None
        assert (plane.lane_image.max_bytes, plane.lane_image.max_pixels) == (2_000_000, 1_000_000)
        assert plane.lane_image.max_side == 2048
    finally:
        await plane.aclose()


async def test_no_lane_no_lane_limits() -> None:
    decoder = InProcessDecoder(OffloadLimits(workers=1, threads=ThreadLimits(threads=0)))
    plane = MediaPlane(MediaFetcher(), decoder, Settings().media.limits(), ExtraIdRegistry())
    assert decoder.threads is None and plane.lane_image is None
    await plane.aclose()
