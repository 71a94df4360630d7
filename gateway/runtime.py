"""The state one running gateway holds, built in the app's lifespan and torn down there.

Nothing here is module-level: tests build as many runtimes as they like. Contracts are
read from Triton at start-up; a model whose Triton is not reachable yet is looked up
again on first use, so the gateway can start before an external Triton does.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from gateway.config import ServedModel, Settings
from gateway.errors import GatewayError, ModelNotFound
from gateway.families.llmapi import Llmapi
from gateway.families.registry import get_family
from gateway.guides import GuideChecker
from gateway.media.decoder import Decoder
from gateway.media.fetch import MediaFetcher
from gateway.media.identity import ExtraIdRegistry
from gateway.media.offload import Offloader, OffloadLimits
from gateway.media.plane import Fetcher, MediaPlane
from gateway.observability.metrics import GatewayMetrics
from gateway.served import DeploymentMismatch, ServedRuntime
from gateway.services import Media, Preparation
from gateway.store import PostgresStore, ResponseStore, Retention, SqliteStore
from gateway.store.background import BackgroundWork
from gateway.triton.backend import TritonBackend
from gateway.triton.client import TritonClient
from gateway.triton.embedded import EmbeddedReplicas, EmbeddedTriton
from gateway.triton.lora import LoraLedger
from gateway.triton.readiness import ReadinessWatch
from gateway.triton.replicas import ReplicaSet, Routing, parse_dns
from gateway.triton.replicas.discovery import is_dns

log = logging.getLogger(__name__)

__all__ = ["BackgroundWork", "DeploymentMismatch", "Runtime", "ServedRuntime", "build_runtime"]


@dataclass
class Runtime:
    """What a running gateway holds. Routes get it typed (``routes/state.RuntimeDep``) and
    hand the pipeline only the narrow services it asks for: a served model (``model(id)``,
    carrying its generation policy), ``preparation`` (media, documents, guides), the store."""

    settings: Settings
    models: dict[str, ServedRuntime]
    clients: dict[str, TritonBackend]
    fetcher: Fetcher
    extra_ids: ExtraIdRegistry
    # Media decoding: worker processes, bounded, a time budget per item (``mmgw serve``), or
    # the in-process decoder of in-process tests.
    offload: Decoder
    embedded: EmbeddedReplicas | None = None
    # The app's metrics; the media plane reports through its hooks (``media_fetched``...).
    metrics: GatewayMetrics = field(default_factory=GatewayMetrics)
    # Stored responses (/v1/responses); the file is opened on first use.
    responses: ResponseStore | None = None
    readiness: ReadinessWatch = field(init=False)
    background: BackgroundWork = field(init=False)
    # The fetcher, decoder and id registry above, with every media limit built once.
    media: MediaPlane = field(init=False)
    # What a request's preparation asks for (``services.py``): media, documents (rendered
    # PDFs kept a while), guides (compiled in sandboxed processes started on the first guide).
    preparation: Preparation = field(init=False)

    def __post_init__(self) -> None:
        self.media = MediaPlane(
            self.fetcher, self.offload, self.settings.media.limits(), self.extra_ids
        )
        if self.responses is None:
            self.responses = response_store(self.settings)
        self.background = BackgroundWork(self.settings.responses.max_background)
        self.metrics.watch_collisions(lambda: self.extra_ids.collisions)
        media = Media(self.media, self.settings.media, self.metrics)
        self.preparation = Preparation.of(media, GuideChecker.of(self.settings.guides))
        self.readiness = ReadinessWatch(
            {url: (client, self._triton_models(url)) for url, client in self.clients.items()}
        )
        for served in self.models.values():
            served.readiness = self.readiness
            served.bind_policy(self.settings)

    def _triton_models(self, url: str) -> list[str]:
        names = {m.config.triton_model for m in self.models.values() if m.client.url == url}
        return sorted(names)

    def model(self, model_id: str) -> ServedRuntime:
        """The served model; 404 when there is none, 503 at once while its Triton is down."""
        try:
            served = self.models[model_id]
        except KeyError:
            raise ModelNotFound(
                f"The model '{model_id}' does not exist or is not served here; see GET /v1/models",
                param="model",
            ) from None
        self.readiness.require(served.client.url, served.config.triton_model)
        return served

    @property
    def replica_sets(self) -> list[ReplicaSet]:
        return [c for c in self.clients.values() if isinstance(c, ReplicaSet)]

    def start_watching(self) -> None:
        """Probe every Triton's readiness (every replica's, in a set) and follow DNS names in
        the background (the app's lifespan calls it)."""
        self.readiness.start(self.settings.upstream.ready_check_interval_s)
        for replica_set in self.replica_sets:
            replica_set.start()

    async def ready(self) -> bool:
        """True when every Triton answers ready and has its served models loaded."""
        names: dict[str, list[str]] = {}
        for served in self.models.values():
            names.setdefault(served.client.url, []).append(served.config.triton_model)
        checks = [self.clients[url].is_ready(models) for url, models in names.items()]
        return all(await asyncio.gather(*checks))

    @property
    def store(self) -> ResponseStore:
        assert self.responses is not None  # set in __post_init__
        return self.responses

    async def aclose(self) -> None:
        await self.readiness.stop()
        await self.background.stop(self.settings.server.drain_timeout_s)  # they write the store
        await self.store.close()
        await self.media.aclose()
        await self.preparation.guides.aclose()
        for client in self.clients.values():
            await client.close()
        if self.embedded is not None:
            await self.embedded.stop()


def response_store(settings: Settings) -> ResponseStore:
    """The stored responses' store, as ``[responses]`` configures it: PostgreSQL when a
    ``store_url`` is set, else the SQLite file (either opened lazily)."""
    config = settings.responses
    retention = Retention(
        config.max_responses, config.max_age_days * 86400, config.max_total_bytes,
        config.max_bytes_per_key,
    )  # fmt: skip
    if config.store_url is not None:
        return PostgresStore(config.store_url, retention, config.timeout_s, config.max_connections)
    return SqliteStore(config.path, retention, config.timeout_s)


def embedded_environment(settings: Settings) -> dict[str, str]:
    """Variables the reference models read inside the co-launched Triton."""
    env: dict[str, str] = {
        "MMGW_REFERENCE_DEVICE": settings.embedded.device,
        "MMGW_REFERENCE_TOKENIZERS": str(settings.embedded.tokenizers_dir),
    }
    if settings.embedded.cache_dir is not None:
        env["MMGW_REFERENCE_CACHE"] = str(settings.embedded.cache_dir)
    for triton_model, checkpoint in settings.embedded.checkpoints.items():
        env[f"MMGW_{triton_model.upper()}_CHECKPOINT"] = checkpoint
    return env


def embedded_triton(settings: Settings, on_restart: Callable[[], None]) -> EmbeddedReplicas:
    """The co-launched Tritons (``[embedded] replicas`` of them) serving every model that names
    no ``triton_url`` (not started)."""

    def one() -> EmbeddedTriton:
        return EmbeddedTriton(
            settings.embedded.model_repository,
            env=embedded_environment(settings),
            models=sorted({m.triton_model for m in settings.models if m.triton_url is None}),
            ready_timeout_s=settings.embedded.ready_timeout_s,
            start_attempts=settings.embedded.start_attempts,
            start_backoff_s=settings.embedded.start_backoff_s,
            stub_timeout_s=settings.embedded.stub_timeout_s,
            model_load_threads=settings.embedded.model_load_threads,
            on_restart=on_restart,
            python=settings.embedded.python,
        )

    return EmbeddedReplicas.of(settings.embedded.replicas, one)


async def build_runtime(
    settings: Settings,
    metrics: GatewayMetrics | None = None,
    connect: Callable[[str], TritonBackend] | None = None,
    decoder: Decoder | None = None,
) -> Runtime:
    """Launch the embedded Triton if needed, connect, and read every model's contract.

    ``connect`` makes the backend for one Triton URL (tests pass an in-process fake);
    ``decoder`` decodes media (None: the worker processes, started here; in-process tests
    pass ``media.decoder.InProcessDecoder``)."""
    metrics = metrics or GatewayMetrics()
    embedded = None
    if settings.needs_embedded:
        embedded = embedded_triton(settings, metrics.triton_restarted)
        await embedded.start()
    clients: dict[str, TritonBackend] = {}
    keepalive_s, stream_client = settings.upstream.keepalive_s, settings.upstream.stream_client
    connect = connect or (lambda url: TritonClient(url, keepalive_s, stream_client))
    models: dict[str, ServedRuntime] = {}
    ledgers: dict[tuple[str, str], LoraLedger] = {}
    for served in settings.models:
        url = served.triton_target or (",".join(embedded.grpc_urls) if embedded else "")
        if url not in clients:
            clients[url] = await _backend(url, served, settings, connect, metrics)
        client = clients[url]
        # No family: NVIDIA's llmapi model (checked when its contract is read).
        family = get_family(served.family, served.family_options) if served.family else Llmapi()
        family = family.engine_images(served.max_images)  # a configured copy, if it differs
        if served.lora and not family.supports_lora:
            raise ValueError(f"model {served.id!r}: family {family.name!r} takes no LoRA adapters")
        remember = not isinstance(client, ReplicaSet)
        ledger = ledgers.setdefault((url, served.triton_model), LoraLedger(remember=remember))
        tokenizer = served.tokenizer
        if tokenizer is None and served.triton_url is None:
            tokenizer = settings.embedded.tokenizers_dir / served.triton_model
        models[served.id] = ServedRuntime(
            served, family, client, tokenizer_path=tokenizer, lora=ledger
        )
    for served_runtime in models.values():
        family = served_runtime.family
        # What a deployment must add where NVIDIA has no server side for the family is worth a
        # line at every start; NVIDIA's own server side is in /v1/models (a clean start-up).
        level = logging.DEBUG if family.nvidia_server_side else logging.INFO
        log.log(
            level,
            "model %s (family %s): %s",
            served_runtime.config.id,
            family.name,
            family.server_side(),
        )
        try:
            await served_runtime.get_contract()  # a DeploymentMismatch stops the start-up
        except GatewayError as exc:
            log.warning("%s; will retry on first request", exc.message)
    fetcher = MediaFetcher(
        settings.fetch.limits(settings.media.max_bytes),
        unsafe_allow_private_addresses_for_tests=settings.unsafe_allow_private_media_urls_for_tests,
    )
    return Runtime(
        settings=settings,
        models=models,
        clients=clients,
        fetcher=fetcher,
        extra_ids=ExtraIdRegistry(),
        offload=decoder or await _start_offload(settings.decode.offload_limits()),
        embedded=embedded,
        metrics=metrics,
    )


async def _backend(
    url: str,
    served: ServedModel,
    settings: Settings,
    connect: Callable[[str], TritonBackend],
    metrics: GatewayMetrics,
) -> TritonBackend:
    """One Triton's client, or a replica set over several (a comma list or a dns: name)."""
    if not is_dns(url) and "," not in url:
        return connect(url)
    several: list[str] | None = None if is_dns(url) else url.split(",")
    policy = served.routing or "affinity"
    replica_set = ReplicaSet(
        url,
        parse_dns(url) if several is None else several,
        connect,
        Routing(policy, served.spill_ratio, served.spill_floor),
        eject_backoff_s=settings.upstream.eject_backoff_s,
        dns_refresh_s=settings.upstream.dns_refresh_s,
        probe_timeout_s=min(2.0, 0.8 * settings.upstream.ready_check_interval_s),
        metrics=metrics.replicas,
    )
    await replica_set.refresh()  # a dns: name's first addresses
    return replica_set


async def _start_offload(limits: OffloadLimits) -> Offloader:
    """The media worker pool, started (workers import the decoders now, not on first use)."""
    offload = Offloader(limits, preload=("gateway.pipeline._media_jobs",))
    await offload.start()
    return offload
