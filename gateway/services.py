"""The narrow services a request's preparation asks for, built once by the ``Runtime`` (its
``preparation``): media, documents, guides. The pipeline takes these, never the runtime.

Each holds only what its part of the pipeline reads, so a test builds the one it exercises
(a ``Media`` over an in-process decoder, a ``GuideChecker`` over its own limits) without a
whole gateway, and the pipeline cannot reach the store, the Triton clients or the settings
at large through them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from gateway.config import MediaSettings
from gateway.guides import GuideChecker
from gateway.media.cache import ContentCache
from gateway.media.decoder import Decoder
from gateway.media.identity import ExtraIdRegistry
from gateway.media.pdf import PdfLimits, RenderedDocument
from gateway.media.plane import Fetcher, MediaPlane

__all__ = ["Documents", "Media", "MediaMetrics", "Preparation"]


class MediaMetrics(Protocol):
    """The metric hooks media preparation reports through (``GatewayMetrics`` has them)."""

    def media_fetched(self, kind: str, seconds: float, size: int) -> None: ...

    def media_decoded(self, kind: str, seconds: float, pixels: int) -> None: ...

    def media_preprocessed(self, kind: str, seconds: float) -> None: ...

    def media_item(self, where: str) -> None: ...

    def media_on_device(self, decoded: bool) -> None: ...

    def media_prepared(self, model: str, seconds: float) -> None: ...

    def document_pages_sent(self, model: str, pages: int) -> None: ...

    def queued(self, queue: str, seconds: float) -> None: ...

    def kv_reuse_id_sent(self, model: str) -> None: ...


@dataclass(frozen=True)
class Media:
    """What media preparation needs: the plane (fetcher, decoder, KV-reuse ids, the limits
    built once), the ``[media]`` table it reads per request (counts, salt, sampling, token
    budgets), and where it reports."""

    plane: MediaPlane
    settings: MediaSettings
    metrics: MediaMetrics

    @classmethod
    def of(
        cls,
        fetcher: Fetcher,
        decoder: Decoder,
        settings: MediaSettings,
        metrics: MediaMetrics,
        extra_ids: ExtraIdRegistry | None = None,
    ) -> Media:
        """A media service with a plane of its own over ``fetcher`` and ``decoder`` (a test's,
        or a tool's; a runtime hands in the plane it closes)."""
        plane = MediaPlane(fetcher, decoder, settings.limits(), extra_ids or ExtraIdRegistry())
        return cls(plane, settings, metrics)


def _document_cache() -> ContentCache[RenderedDocument]:
    return ContentCache(32, 256 * 1024 * 1024, 600.0)


@dataclass(frozen=True)
class Documents:
    """PDF file parts' service: the media it fetches and renders with, and the rendered
    documents kept a while by their bytes and caps (a conversation re-sends its document every
    turn)."""

    media: Media
    caps: PdfLimits  # [media.pdf], built once
    render_timeout_s: float
    cache: ContentCache[RenderedDocument] = field(default_factory=_document_cache)

    @classmethod
    def of(cls, media: Media) -> Documents:
        pdf = media.settings.pdf
        return cls(media, pdf.pdf_limits(), pdf.render_timeout_s)


@dataclass(frozen=True)
class Preparation:
    """Everything a request's preparation needs besides its served model (which carries its
    own generation policy): media, documents, guides. Frozen, built once per runtime."""

    media: Media
    documents: Documents
    guides: GuideChecker

    @classmethod
    def of(cls, media: Media, guides: GuideChecker) -> Preparation:
        return cls(media, Documents.of(media), guides)
