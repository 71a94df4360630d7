"""The media plane a running gateway holds, built once: what fetches, what decodes, the
KV-reuse id registry, and the limits every item is held to.

The pipeline asks for these narrow services (``Fetcher``, ``decoder.Decoder``), not for the
whole runtime's settings: the limits are built here once, not again for every media item, and
an in-process test hands in an ``InProcessDecoder`` (no worker process) or a fetcher of its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from gateway.media.audio import AudioLimits
from gateway.media.decoder import Decoder
from gateway.media.identity import ExtraIdRegistry
from gateway.media.image import ImageLimits
from gateway.media.local import FetchedMedia, FrameList
from gateway.media.video import VideoLimits

__all__ = ["Fetcher", "MediaLimits", "MediaPlane"]


class Fetcher(Protocol):
    """Fetches a media URL (http, https, data:, file:) within its limits and SSRF guard.

    ``fetch.MediaFetcher`` is the one a gateway runs. Raises ``MediaURLError`` (the URL is
    refused), ``MediaFetchError``, ``MediaTooLarge`` or ``MediaTimeout``."""

    async def fetch(self, url: str) -> FetchedMedia | FrameList: ...

    async def aclose(self) -> None: ...


@dataclass(frozen=True)
class MediaLimits:
    """Every media limit, from ``[media]`` once: an item is held to these, not to limits
    rebuilt for it."""

    max_bytes: int  # of one item's bytes (an ``input_audio``'s base64 payload decoded)
    image: ImageLimits
    video: VideoLimits
    audio: AudioLimits


@dataclass
class MediaPlane:
    """The media services one gateway shares across its requests (closed with it)."""

    fetcher: Fetcher
    decoder: Decoder
    limits: MediaLimits
    extra_ids: ExtraIdRegistry
    # A still image's limits in the decoder's thread lane (tightened to its caps); None: no lane.
    lane_image: ImageLimits | None = field(init=False)

    def __post_init__(self) -> None:
        lane = self.decoder.threads
        self.lane_image = lane.limits.image_limits(self.limits.image) if lane else None

    async def aclose(self) -> None:
        await self.fetcher.aclose()
        await self.decoder.aclose()
