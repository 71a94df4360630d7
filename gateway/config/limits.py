"""The request limits, grouped by concern: ``[media]`` (with ``.image``, ``.video``,
``.audio``), ``[fetch]``, ``[decode]`` and ``[generation]``. Defaults come from
``gateway/media/limits.py``, where each is stated once; each section turns itself into the
media plane's own limit values. The old single ``[limits]`` table still loads.
"""

from __future__ import annotations

import logging
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from gateway.media import limits
from gateway.media.audio import AudioLimits
from gateway.media.fetch import FetchLimits
from gateway.media.image import ImageLimits
from gateway.media.offload import OffloadLimits
from gateway.media.pdf import PdfLimits
from gateway.media.plane import MediaLimits
from gateway.media.threads import ThreadLimits
from gateway.media.video import VideoLimits

log = logging.getLogger(__name__)


class Strict(BaseModel):
    """Config sections refuse unknown keys: a typo must fail loudly, not be ignored."""

    model_config = ConfigDict(extra="forbid")


class ImageSettings(Strict):
    """``[media.image]``: what one image may cost."""

    max_pixels: int = Field(limits.DEFAULT_MAX_PIXELS, ge=1, description="read from the header")
    jpeg_draft_margin: float = Field(
        limits.DEFAULT_DRAFT_MARGIN,
        ge=0,
        description="Decode large JPEGs at a reduced scale still this many times the model's "
        "input size (much faster); 0 decodes at full size, bit-identical to Hugging Face.",
    )


class VideoSettings(Strict):
    """``[media.video]``: what one video may cost, and how its frames are sampled."""

    max_duration_s: float = Field(limits.DEFAULT_MAX_VIDEO_DURATION_S, gt=0)
    max_frames: int = Field(limits.DEFAULT_MAX_VIDEO_FRAMES, ge=1, description="in the file")
    max_side: int = Field(limits.DEFAULT_MAX_VIDEO_SIDE, ge=16)
    max_decoded_frames: int = Field(
        limits.DEFAULT_MAX_DECODED_FRAMES, ge=1, description="frames the sampler may decode"
    )
    num_frames: int = Field(
        limits.DEFAULT_VIDEO_FRAMES, ge=1, description="frames sampled when a request names none"
    )
    max_num_frames: int = Field(32, ge=1, description="most frames a request may ask for")
    max_fps: float = Field(30.0, gt=0, description="highest sampling fps a request may ask")


class AudioSettings(Strict):
    """``[media.audio]``: what one audio clip may cost."""

    max_duration_s: float = Field(limits.DEFAULT_MAX_AUDIO_DURATION_S, gt=0)


class PdfSettings(Strict):
    """``[media.pdf]``: what one PDF document (a chat ``file`` part, a Responses
    ``input_file``) may cost. Its pages are rendered in the media worker processes and each
    becomes an image of the request (docs/operating.md, "Documents")."""

    max_bytes: int = Field(limits.DEFAULT_PDF_MAX_BYTES, ge=1, description="one document")
    max_pages: int = Field(limits.DEFAULT_PDF_MAX_PAGES, ge=1, description="one document")
    dpi: float = Field(limits.DEFAULT_PDF_DPI, gt=0, le=600, description="render resolution")
    max_page_pixels: int = Field(
        limits.DEFAULT_PDF_MAX_PAGE_PIXELS,
        ge=1,
        description="a larger page (its box at dpi) is rendered at the scale that fits",
    )
    max_total_pixels: int = Field(
        limits.DEFAULT_PDF_MAX_TOTAL_PIXELS, ge=1, description="all pages"
    )
    render_timeout_s: float = Field(
        limits.DEFAULT_PDF_RENDER_TIMEOUT_S,
        gt=0,
        description="one document's parse and render, in one worker (killed past it)",
    )
    extract_text: bool = Field(
        True,
        description="add each page's text layer as a text part after the pages, for every "
        "family (a page image at the vision tower's resolution is rarely legible)",
    )

    def pdf_limits(self) -> PdfLimits:
        return PdfLimits(
            max_bytes=self.max_bytes,
            max_pages=self.max_pages,
            dpi=self.dpi,
            max_page_pixels=self.max_page_pixels,
            max_total_pixels=self.max_total_pixels,
            extract_text=self.extract_text,
        )


class MediaSettings(Strict):
    """``[media]``: what one request may carry. A request over any limit gets a 400.

    ``content_id_salt`` is folded into every KV-reuse id: gateways of different tenants in
    front of one Triton get different salts, so they never share a cache entry.
    """

    max_bytes: int = Field(limits.DEFAULT_MAX_BYTES, ge=1, description="per item")
    max_images_per_request: int = Field(8, ge=0)
    max_videos_per_request: int = Field(1, ge=0, description="the wire tensor holds one video")
    max_audio_per_request: int = Field(1, ge=0)
    content_id_salt: str = Field("", description="tenant salt for the KV-reuse ids")
    image: ImageSettings = Field(default_factory=ImageSettings)
    video: VideoSettings = Field(default_factory=VideoSettings)
    audio: AudioSettings = Field(default_factory=AudioSettings)
    pdf: PdfSettings = Field(default_factory=PdfSettings)
    max_image_tokens_per_request: int | None = Field(
        None,
        ge=1,
        description="the image tokens (features the model reads) one request may cost, over "
        "all its images and pages; None: no cap but the engine's",
    )

    def image_limits(self) -> ImageLimits:
        return ImageLimits(max_bytes=self.max_bytes, max_pixels=self.image.max_pixels)

    def video_limits(self) -> VideoLimits:
        video = self.video
        return VideoLimits(
            max_bytes=self.max_bytes,
            max_duration_s=video.max_duration_s,
            max_frames=video.max_frames,
            max_side=video.max_side,
            max_decoded_frames=video.max_decoded_frames,
        )

    def audio_limits(self) -> AudioLimits:
        return AudioLimits(max_bytes=self.max_bytes, max_duration_s=self.audio.max_duration_s)

    def limits(self) -> MediaLimits:
        """Every limit above, built once per gateway (``runtime.media``), not per item."""
        return MediaLimits(
            self.max_bytes, self.image_limits(), self.video_limits(), self.audio_limits()
        )


class FetchSettings(Strict):
    """``[fetch]``: how media URLs are fetched (public addresses only, always)."""

    connect_timeout_s: float = Field(limits.DEFAULT_CONNECT_TIMEOUT_S, gt=0)
    total_timeout_s: float = Field(limits.DEFAULT_TOTAL_TIMEOUT_S, gt=0)
    max_redirects: int = Field(limits.DEFAULT_MAX_REDIRECTS, ge=0)
    allowed_domains: tuple[str, ...] = Field((), description="empty: any public host")

    def limits(self, max_bytes: int) -> FetchLimits:
        return FetchLimits(
            max_bytes=max_bytes,
            connect_timeout_s=self.connect_timeout_s,
            total_timeout_s=self.total_timeout_s,
            max_redirects=self.max_redirects,
            allowed_domains=self.allowed_domains,
        )


class DecodeSettings(Strict):
    """``[decode]``: the media decoding pool (worker processes, killed when over budget)."""

    workers: int = Field(limits.DEFAULT_DECODE_WORKERS, ge=1)
    timeout_s: float = Field(limits.DEFAULT_DECODE_TIMEOUT_S, gt=0, description="per item")
    memory_mb: int = Field(
        limits.DEFAULT_DECODE_MEMORY_MB, ge=0, description="address space per worker; 0 = no cap"
    )

    threads: int = Field(
        limits.DEFAULT_DECODE_THREADS,
        ge=0,
        description="threads for still images bounded by their header (0: all in workers)",
    )
    thread_max_pixels: int = Field(limits.DEFAULT_THREAD_MAX_PIXELS, ge=1)
    thread_max_bytes: int = Field(limits.DEFAULT_THREAD_MAX_BYTES, ge=1)
    thread_max_side: int = Field(limits.DEFAULT_THREAD_MAX_SIDE, ge=1)
    inline_max_pixels: int = Field(
        limits.DEFAULT_INLINE_MAX_PIXELS,
        ge=0,
        description="a thread-lane image up to this many pixels may be prepared on the event "
        "loop while no thread job runs, at most a tenth of the loop's time (0: never); it saves "
        "the hops to a sleeping thread and back",
    )
    stripe_threads: int | None = Field(
        None,
        ge=0,
        description="threads of the gateway's process that share one large image resize "
        "(0: none; unset: the cores but two, at most 3)",
    )
    device: str = Field(
        "cpu",
        pattern=r"^(cpu|cuda(:[0-9]+)?)$",
        description="where still JPEGs of families with a fixed pixel recipe (LLaVA-1.5, "
        "BLIP-2, VILA...) are decoded and preprocessed: cpu (PIL) or cuda / cuda:N (nvJPEG "
        "through torchvision, the cuda extra; pixels within a level or two of PIL's after "
        "the resize, and KV-reuse ids of their own: docs/operating.md)",
    )

    @model_validator(mode="after")
    def _device_needs_threads(self) -> DecodeSettings:
        if self.device != "cpu" and self.threads < 1:
            raise ValueError("[decode] device decodes in the thread lane: threads must be >= 1")
        return self

    def offload_limits(self) -> OffloadLimits:
        lane = ThreadLimits(
            self.threads,
            self.thread_max_pixels,
            self.thread_max_bytes,
            self.thread_max_side,
            self.stripe_threads,
            self.device,
            inline_max_pixels=self.inline_max_pixels,
        )
        return OffloadLimits(self.workers, self.timeout_s, self.memory_mb or None, lane)


class UpstreamSettings(Strict):
    """``[upstream]``: how long the gateway waits on Triton, and how it notices a dead one.

    A stream that goes silent past a timeout ends with an ``upstream_timeout`` error (an error
    event and ``[DONE]`` once streaming; a 504 before). While a Triton does not answer its
    readiness probe, new requests for its models get 503 at once instead of queueing.
    """

    first_token_timeout_s: float = Field(
        120.0, gt=0, description="arrival at Triton to the first token: queueing and prefill"
    )
    token_timeout_s: float = Field(30.0, gt=0, description="the longest gap between tokens")
    request_timeout_s: float = Field(900.0, gt=0, description="a whole request, stream included")
    keepalive_s: float = Field(
        0.0,
        ge=0,
        description="gRPC keepalive ping interval (0: off); a ping unanswered for as long again "
        "closes the connection. Keep it at or above the Triton server's "
        "--grpc-http2-min-recv-ping-interval-without-data-ms (300 s by default), or Triton "
        "answers pings during a long prefill with GOAWAY",
    )
    stream_client: Literal["grpcio", "h2", "auto"] = Field(
        "auto",
        description="what reads the token streams: grpcio (grpc.aio: Triton's socket read in a "
        "poller thread, each response handed to the event loop), h2 (grpclib: HTTP/2 parsed "
        "on the event loop itself; less CPU per token on a saturated core, later first tokens "
        "under flood, a little more to send a large image tensor) or auto (h2, except for "
        "requests carrying over 64 KiB of tensors: images, audio features)",
    )
    ready_check_interval_s: float = Field(
        1.0, gt=0, description="how often each Triton's readiness is probed"
    )
    dns_refresh_s: float = Field(
        10.0, gt=0, description="how often a dns: triton_url is resolved again"
    )
    eject_backoff_s: float = Field(
        1.0,
        gt=0,
        description="a replica a call could not reach is out this long, doubling with each "
        "failure in a row (at most 30 s); a passing readiness probe after a failing one ends it",
    )


class GenerationSettings(Strict):
    """``[generation]``: what one request may ask the model for."""

    max_tokens: int = Field(4096, ge=1, description="the largest max_tokens a request may ask")
    max_prompt_chars: int = Field(
        1 << 20,
        ge=1,
        description="the longest prompt text, in characters, sent to Triton for tokenising; "
        "a served model's max_input_tokens may bound it further",
    )
    max_total_prompt_chars: int = Field(
        4 << 20,
        ge=1,
        description="all the prompt text one request sends to Triton for tokenising: each "
        "prompt once per choice (n), as one Triton request goes out per prompt and choice",
    )


# The settings that lived in one [limits] table before they were grouped by concern: an old
# config still loads (with a warning naming the new place of each key).
LEGACY_LIMITS: dict[str, tuple[str, ...]] = {
    "max_images_per_request": ("media", "max_images_per_request"),
    "max_videos_per_request": ("media", "max_videos_per_request"),
    "max_audio_per_request": ("media", "max_audio_per_request"),
    "max_media_bytes": ("media", "max_bytes"),
    "content_id_salt": ("media", "content_id_salt"),
    "max_image_pixels": ("media", "image", "max_pixels"),
    "jpeg_draft_margin": ("media", "image", "jpeg_draft_margin"),
    "max_video_duration_s": ("media", "video", "max_duration_s"),
    "max_video_frames": ("media", "video", "max_frames"),
    "max_video_side": ("media", "video", "max_side"),
    "max_video_decoded_frames": ("media", "video", "max_decoded_frames"),
    "video_num_frames": ("media", "video", "num_frames"),
    "video_max_num_frames": ("media", "video", "max_num_frames"),
    "video_max_fps": ("media", "video", "max_fps"),
    "max_audio_duration_s": ("media", "audio", "max_duration_s"),
    "fetch_connect_timeout_s": ("fetch", "connect_timeout_s"),
    "fetch_total_timeout_s": ("fetch", "total_timeout_s"),
    "fetch_max_redirects": ("fetch", "max_redirects"),
    "allowed_domains": ("fetch", "allowed_domains"),
    "decode_workers": ("decode", "workers"),
    "decode_timeout_s": ("decode", "timeout_s"),
    "decode_memory_mb": ("decode", "memory_mb"),
    "max_tokens_cap": ("generation", "max_tokens"),
}


def move_legacy_limits(data: dict[str, Any]) -> dict[str, Any]:
    """``[limits]`` keys -> their sections; an unknown key is refused like any typo."""
    legacy = data.pop("limits", None)
    if not legacy:
        return data
    if not isinstance(legacy, dict):
        raise ValueError("'limits' must be a table")
    for key, value in legacy.items():
        if key not in LEGACY_LIMITS:
            raise ValueError(f"unknown setting limits.{key}")
        *sections, name = LEGACY_LIMITS[key]
        table = data
        for section in sections:
            current = table.get(section)
            table[section] = table = dict(current) if isinstance(current, dict) else {}
        table.setdefault(name, value)
        log.warning("setting limits.%s is now %s", key, ".".join(LEGACY_LIMITS[key]))
    return data
