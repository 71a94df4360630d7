"""The services a request's preparation takes (``gateway/services.py``): built once per
runtime from its settings, holding only what their part of the pipeline reads."""

from __future__ import annotations

from gateway.config import EmbeddedSettings, GuideSettings, MediaSettings, ServedModel, Settings
from gateway.guides import GuideChecker
from gateway.media.decoder import InProcessDecoder
from gateway.media.fetch import MediaFetcher
from gateway.media.identity import ExtraIdRegistry
from gateway.observability.metrics import GatewayMetrics
from gateway.runtime import Runtime
from gateway.services import Documents, Media, Preparation


async def test_a_runtime_builds_its_preparation_once_over_its_own_plane() -> None:
    settings = Settings(
        models=[ServedModel(id="m", family="llava", triton_model="t", triton_url="f:1")],
        embedded=EmbeddedSettings(enabled=False),
        media={"max_images_per_request": 3, "pdf": {"max_pages": 7, "render_timeout_s": 9}},
        guides={"cache_bytes": 123_456},
    )  # fmt: skip
    runtime = Runtime(settings, {}, {}, MediaFetcher(), ExtraIdRegistry(), InProcessDecoder())
    try:
        preparation = runtime.preparation
        assert preparation.media.plane is runtime.media  # the plane the runtime closes
        assert preparation.media.metrics is runtime.metrics
        assert preparation.media.settings.max_images_per_request == 3
        assert preparation.documents.media is preparation.media
        assert preparation.documents.caps == settings.media.pdf.pdf_limits()
        assert preparation.documents.caps.max_pages == 7
        assert preparation.documents.render_timeout_s == 9
        assert preparation.guides.limits.cache_bytes == 123_456
        assert not preparation.guides.sandbox.pids  # no compile worker before the first guide
    finally:
        await runtime.aclose()


async def test_a_media_service_of_its_own_for_a_test_or_a_tool() -> None:
    settings = MediaSettings(max_bytes=1234)
    fetcher, decoder = MediaFetcher(), InProcessDecoder()
    media = Media.of(fetcher, decoder, settings, GatewayMetrics())
    try:
        assert media.plane.fetcher is fetcher and media.plane.decoder is decoder
        assert media.plane.limits == settings.limits() and media.plane.limits.max_bytes == 1234
        documents = Documents.of(media)
        other = Documents.of(media)
        assert documents.cache is not other.cache  # each holds its own rendered documents
        guides = GuideChecker.of(GuideSettings())
        preparation = Preparation.of(media, guides)
        assert preparation.documents.caps == settings.pdf.pdf_limits()
        await guides.aclose()
    finally:
        await media.plane.aclose()
