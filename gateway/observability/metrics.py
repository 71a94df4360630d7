"""Prometheus metrics: one registry per app, the metric families, and cheap hooks to feed them.

A registry per ``GatewayMetrics`` rather than prometheus-client's global one: tests build
several apps in one process, and a global registry would refuse the second app's metrics
(duplicate names) or mix their counts. Everything per token is one ``observe`` on a labelled
child resolved once per request (see ``RequestRecord``); nothing here formats or logs.

The media plane reports through the ``media_*`` and ``queued`` hooks; it knows no model, so
media metrics are labelled by kind (image, video, audio) only.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    multiprocess,
)
from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

from gateway.observability.realtime_metrics import RealtimeMetrics

# Set for worker processes by the supervisor; prometheus_client reads it when it is imported.
MULTIPROC_DIR = "PROMETHEUS_MULTIPROC_DIR"

# Seconds. Time to first token spans a cached text prompt (ms) to a cold multi-image prefill.
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
# Seconds between two streamed tokens: sub-ms on tiny models, tens of ms on large ones.
TOKEN_GAP_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.08, 0.15, 0.3, 0.6, 1.5)
# Seconds a whole request takes, a long answer included.
REQUEST_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
# Seconds for one media item's fetch, decode or preprocessing, or a wait for a worker.
MEDIA_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 20.0)


class _CollisionCollector(Collector):
    """``ExtraIdRegistry.collisions`` read at scrape time, so the registry needs no hook."""

    def __init__(self) -> None:
        self.source: Callable[[], int] | None = None

    def collect(self) -> Iterator[Metric]:
        value = self.source() if self.source is not None else 0
        yield CounterMetricFamily(
            "mmgw_kv_reuse_id_collisions",
            "64-bit KV-reuse id collisions detected and re-derived (so never shared).",
            value=value,
        )


class ReplicaMetrics:
    """Per Triton replica: calls, calls open, health, ejections, retries. Updated as they
    happen (a few operations per call, none per token), so under ``--workers`` every worker's
    are added up like the rest (the in-flight gauge over live workers; health is 1 when any
    live worker routes to the replica)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        r = registry
        self.requests = Counter(
            "mmgw_replica_requests", "Calls sent to each Triton replica (a retry counts on both).",
            ["replica"], registry=r,
        )  # fmt: skip
        self.in_flight = Gauge(
            "mmgw_replica_in_flight", "Calls open on each Triton replica.", ["replica"],
            registry=r, multiprocess_mode="livesum",
        )  # fmt: skip
        self.healthy = Gauge(
            "mmgw_replica_healthy",
            "1 while a replica is routed to (probe passing, not ejected, config agreeing).",
            ["replica"], registry=r, multiprocess_mode="livemax",
        )  # fmt: skip
        self.ejections = Counter(
            "mmgw_replica_ejections",
            "Times a replica was taken out after a call could not reach it.",
            ["replica"], registry=r,
        )  # fmt: skip
        self.retries = Counter(
            "mmgw_replica_retries",
            "Calls that failed on a replica before their first byte and were retried on the "
            "next.",
            ["replica"], registry=r,
        )  # fmt: skip


class GatewayMetrics:
    """The gateway's metric families in their own registry, plus the hooks that feed them."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self._define_request_metrics()
        self._define_media_metrics()
        self._collisions = _CollisionCollector()
        self.registry.register(self._collisions)
        self.replicas = ReplicaMetrics(self.registry)
        self.realtime = RealtimeMetrics(self.registry)

    def _define_request_metrics(self) -> None:
        r = self.registry
        self.requests = Counter(
            "mmgw_requests",
            "HTTP requests by served model, endpoint, status and OpenAI error code.",
            ["model", "endpoint", "status", "code"],
            registry=r,
        )
        self.request_seconds = Histogram(
            "mmgw_request_duration_seconds",
            "Arrival to last byte sent (a streamed answer included).",
            ["model", "endpoint"],
            buckets=REQUEST_BUCKETS,
            registry=r,
        )
        self.first_token_seconds = Histogram(
            "mmgw_time_to_first_token_seconds",
            "Arrival to the first generated token (media, queueing and prefill included).",
            ["model"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.inter_token_seconds = Histogram(
            "mmgw_inter_token_seconds",
            "Gap between two consecutive tokens of one answer.",
            ["model"],
            buckets=TOKEN_GAP_BUCKETS,
            registry=r,
        )
        self.tokens = Counter(
            "mmgw_tokens", "Tokens by model and type (prompt, completion).", ["model", "type"],
            registry=r,
        )  # fmt: skip
        self.in_flight = Gauge(
            "mmgw_in_flight_requests", "API requests being served.", registry=r,
            multiprocess_mode="livesum",  # several workers: the sum over the live ones
        )  # fmt: skip
        self.kv_reuse_ids = Counter(
            "mmgw_kv_reuse_ids_sent",
            "Requests sent to Triton with a prompt_table_extra_id (content identity).",
            ["model"],
            registry=r,
        )
        self.replica_cached_tokens = Counter(
            "mmgw_replica_cached_tokens",
            "Prompt tokens served from a replica's KV cache (usage cached_tokens), by replica.",
            ["model", "replica"],
            registry=r,
        )
        self.triton_restarts = Counter(
            "mmgw_triton_restarts", "Times the embedded tritonserver died and was restarted.",
            registry=r,
        )  # fmt: skip

    def _define_media_metrics(self) -> None:
        r = self.registry
        self.media_seconds = Histogram(
            "mmgw_media_seconds",
            "Per media item: time to fetch, decode or preprocess (stage label).",
            ["kind", "stage"],
            buckets=MEDIA_BUCKETS,
            registry=r,
        )
        self.media_prepare_seconds = Histogram(
            "mmgw_media_prepare_seconds",
            "Per request: all its media fetched, decoded and preprocessed (concurrently).",
            ["model"],
            buckets=MEDIA_BUCKETS,
            registry=r,
        )
        self.queue_seconds = Histogram(
            "mmgw_queue_seconds",
            "Time waited for a bounded worker pool (queue label, e.g. decode).",
            ["queue"],
            buckets=MEDIA_BUCKETS,
            registry=r,
        )
        self.media_bytes = Counter(
            "mmgw_media_bytes", "Media bytes fetched or read from data: URLs.", ["kind"],
            registry=r,
        )  # fmt: skip
        self.media_pixels = Counter(
            "mmgw_media_pixels", "Decoded pixels (width x height, per frame).", ["kind"],
            registry=r,
        )  # fmt: skip
        self.media_device_images = Counter(
            "mmgw_media_device_images",
            "Still JPEGs sent to [decode] device: decoded there, or declined (PIL decoded them).",
            ["outcome"], registry=r,
        )  # fmt: skip
        self.media_items = Counter(
            "mmgw_media_items",
            "Media items prepared, by where: process (a media worker), thread (the thread "
            "lane) or loop (a small image the event loop prepared itself).",
            ["where"], registry=r,
        )  # fmt: skip
        self.media_tokens = Counter(
            "mmgw_media_tokens",
            "Prompt tokens that are media features (usage prompt_tokens_details), by model and "
            "modality (image, video, audio).",
            ["model", "modality"],
            registry=r,
        )
        self.document_pages = Counter(
            "mmgw_document_pages", "PDF pages sent as images, by model.", ["model"],
            registry=r,
        )  # fmt: skip

    # Hooks for the media plane: one call per item, so their cost does not matter.
    def media_fetched(self, kind: str, seconds: float, size: int) -> None:
        """One media item's bytes are in hand (fetched over HTTP or read from a data: URL)."""
        self.media_seconds.labels(kind, "fetch").observe(seconds)
        self.media_bytes.labels(kind).inc(size)

    def media_decoded(self, kind: str, seconds: float, pixels: int) -> None:
        """One item decoded to pixels (or samples: pass 0 pixels for audio)."""
        self.media_seconds.labels(kind, "decode").observe(seconds)
        if pixels:
            self.media_pixels.labels(kind).inc(pixels)

    def media_item(self, where: str) -> None:
        """One item prepared in a worker process, a lane thread or on the event loop."""
        self.media_items.labels(where).inc()

    def media_on_device(self, decoded: bool) -> None:
        """A still JPEG went to the device: decoded there, or declined (PIL's after all)."""
        self.media_device_images.labels("decoded" if decoded else "declined").inc()

    def media_preprocessed(self, kind: str, seconds: float) -> None:
        """One item turned into the family's model input (resize, normalise, tile...)."""
        self.media_seconds.labels(kind, "preprocess").observe(seconds)

    def media_prepared(self, model: str, seconds: float) -> None:
        """All of one request's media are ready (the pipeline calls this)."""
        self.media_prepare_seconds.labels(model).observe(seconds)

    def document_pages_sent(self, model: str, pages: int) -> None:
        """A request's PDF documents became ``pages`` page images (rendered or cached)."""
        if pages:
            self.document_pages.labels(model).inc(pages)

    def queued(self, queue: str, seconds: float) -> None:
        """Time a piece of work waited for a slot in a bounded pool."""
        self.queue_seconds.labels(queue).observe(seconds)

    def kv_reuse_id_sent(self, model: str) -> None:
        self.kv_reuse_ids.labels(model).inc()

    def triton_restarted(self) -> None:
        """``EmbeddedTriton.on_restart``."""
        self.triton_restarts.inc()

    def watch_collisions(self, read: Callable[[], int]) -> None:
        """Report ``read()`` (the ExtraIdRegistry's collision count) at every scrape."""
        self._collisions.source = read

    def render(self) -> tuple[bytes, str]:
        """The text exposition format and its content type. Under a supervisor
        (``PROMETHEUS_MULTIPROC_DIR`` set: ``mmgw serve --workers N``) the metric families
        are every worker's added up, read from their shared files; the collisions count is
        this worker's."""
        directory = os.environ.get(MULTIPROC_DIR)
        if not directory:
            return generate_latest(self.registry), CONTENT_TYPE_LATEST
        combined = CollectorRegistry()
        multiprocess.MultiProcessCollector(combined, path=directory)
        combined.register(self._collisions)
        return generate_latest(combined), CONTENT_TYPE_LATEST
