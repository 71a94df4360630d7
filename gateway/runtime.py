"""The state one running gateway holds, built in the app's lifespan and torn down there.

Nothing here is module-level: tests build as many runtimes as they like. Contracts are
read from Triton at start-up; a model whose Triton is not reachable yet is looked up
again on first use, so the gateway can start before an external Triton does.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gateway.config import ServedModel, Settings
from gateway.errors import GatewayError, ModelNotFound, RateLimited
from gateway.families.base import Family
from gateway.families.capabilities import Capabilities
from gateway.families.chat_template import TemplateError
from gateway.families.llmapi import NVIDIA_LLMAPI, Llmapi, LlmapiModel
from gateway.families.registry import get_family
from gateway.families.vocabulary import Vocabulary
from gateway.media.cache import ContentCache
from gateway.media.decoder import Decoder
from gateway.media.fetch import MediaFetcher
from gateway.media.identity import ExtraIdRegistry
from gateway.media.offload import Offloader, OffloadLimits
from gateway.media.pdf import RenderedDocument
from gateway.media.plane import Fetcher, MediaPlane
from gateway.observability.metrics import GatewayMetrics
from gateway.sandbox import SandboxPool, VerdictCache
from gateway.store import PostgresStore, ResponseStore, Retention, SqliteStore
from gateway.triton.backend import TritonBackend
from gateway.triton.client import TritonClient
from gateway.triton.contract import ModelContract
from gateway.triton.embedded import EmbeddedReplicas, EmbeddedTriton
from gateway.triton.lora import LoraLedger
from gateway.triton.readiness import ReadinessWatch
from gateway.triton.replicas import ReplicaSet, Routing, parse_dns
from gateway.triton.replicas.discovery import is_dns

log = logging.getLogger(__name__)
# TensorRT-LLM's KvCacheConfig default tokens_per_block, for an llmapi model that sets none.
LLMAPI_TOKENS_PER_BLOCK = 32


class DeploymentMismatch(ValueError):
    """A served model's settings do not fit the Triton model it names (a start-up error)."""


# What a guide compile worker imports before its first guide (the compiler and its job).
GUIDE_WORKER_MODULES = (
    "llguidance", "llguidance.gbnf_to_lark", "gateway.pipeline.structured.engine",
)  # fmt: skip


@dataclass
class ServedRuntime:
    """One served model: its settings, family, Triton client and discovered contract."""

    config: ServedModel
    family: Family
    client: TritonBackend
    contract: ModelContract | None = None
    # The engine's tokenizer (top_logprobs), from the config or published by the embedded model.
    tokenizer_path: Path | None = None
    _vocabulary: asyncio.Future[Vocabulary | None] | None = None
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    # LoRA task ids this Triton model has had the weights of (shared by its served ids).
    lora: LoraLedger = field(default_factory=LoraLedger)
    # Its Triton's readiness (set by the Runtime): calls in flight hear when it is lost.
    readiness: ReadinessWatch | None = None
    # Served by NVIDIA's llmapi Triton model: its chat template and tokenizer (read with the
    # contract); None on the engine path.
    llmapi: LlmapiModel | None = None
    _capabilities: Capabilities | None = None

    def on_lost(self, lost: Callable[[], None]) -> Callable[[], None]:
        """Call ``lost()`` when this model's Triton loses its readiness; returns what stops
        listening."""
        if self.readiness is None:
            return lambda: None
        return self.readiness.listen(self.client.url, self.config.triton_model, lost)

    async def get_contract(self) -> ModelContract:
        if self.contract is None:
            async with self._lock:
                if self.contract is None:
                    contract = await self.client.contract(self.config.triton_model)
                    if contract.kind == "llmapi":
                        self.llmapi = await asyncio.to_thread(self._load_llmapi, contract)
                    else:
                        self._bind_engine(contract)
                    self.contract = contract
                    self._capabilities = self._capabilities_of(contract)
        return self.contract

    @property
    def capabilities(self) -> Capabilities:
        """What this model takes (``families/capabilities.py``), fixed once its contract is
        read; before that (a test seam without Triton), the family's and settings' own view,
        as if the deployment declared every input the family uses."""
        if self._capabilities is not None:
            return self._capabilities
        capabilities = self._capabilities_of(self.contract)
        if self.contract is not None:
            self._capabilities = capabilities
        return capabilities

    def _capabilities_of(self, contract: ModelContract | None) -> Capabilities:
        return Capabilities.of(
            self.config.id,
            self.family,
            triton_model=self.config.triton_model,
            contract=contract.kind if contract is not None else "engine",
            declares=contract.declares if contract is not None else lambda _: True,
            engine_max_images=self.config.max_images,
        )

    def _bind_engine(self, contract: ModelContract) -> None:
        if self.config.family is None:
            raise DeploymentMismatch(
                f"model {self.config.id!r} names no family, and its Triton model "
                f"{contract.name!r} is not NVIDIA's llmapi model (it declares no "
                "'sampling_param_max_tokens'): set family to the model family it serves"
            )
        contract.require(self.family.required_inputs, "a TensorRT-LLM text contract")
        # A family with several contracts comes back holding the one it met; the instance
        # configured at start-up is not changed.
        self.family = self.family.bound(frozenset(contract.inputs), contract.name)
        self.family.check_deployment(contract.parameters, contract.name)

    def _load_llmapi(self, contract: ModelContract) -> LlmapiModel:
        """The chat template and tokenizer NVIDIA's llmapi model needs the gateway to hold (it
        takes finished prompts); a ``DeploymentMismatch`` naming the setting when they are not
        there."""
        where = (
            f"model {self.config.id!r} is served by NVIDIA's llmapi Triton model {contract.name!r}"
        )
        if self.tokenizer_path is None:
            raise DeploymentMismatch(
                f"{where}, which takes finished prompts: set tokenizer to the Hugging Face "
                "model folder (its chat template and tokenizer.json)"
            )
        try:
            return LlmapiModel.load(self.tokenizer_path)
        except TemplateError as exc:
            raise DeploymentMismatch(f"{where}: {exc}") from None

    def server_side(self) -> str:
        """The Triton server side this model relies on, for /v1/models."""
        if self.llmapi is not None:
            return NVIDIA_LLMAPI
        return self.family.server_side()

    async def vocabulary(self) -> Vocabulary | None:
        """The engine's vocabulary, read once (off the event loop); None when none is known
        or it cannot be read (logged)."""
        if self.tokenizer_path is None:
            return None
        if self._vocabulary is None:  # one load, shared by the requests that wait for it
            self._vocabulary = asyncio.ensure_future(self._load(self.tokenizer_path))
        return await asyncio.shield(self._vocabulary)

    async def _load(self, path: Path) -> Vocabulary | None:
        try:
            return await asyncio.to_thread(Vocabulary.load, path)
        except OSError as exc:
            log.warning("model %s: %s", self.config.id, exc)  # once: the verdict is kept
            return None

    @property
    def max_seq_len(self) -> int | None:
        """The engine's prompt + output limit: configured, else its Triton config's."""
        if self.config.max_seq_len:
            return self.config.max_seq_len
        return self.contract.int_parameter("max_seq_len") if self.contract else None

    @property
    def tokens_per_block(self) -> int | None:
        if self.config.kv_tokens_per_block:
            return self.config.kv_tokens_per_block
        if self.llmapi is not None:  # its config.pbtxt has no parameters; model.yaml's default
            return LLMAPI_TOKENS_PER_BLOCK
        return self.contract.int_parameter("tokens_per_block") if self.contract else None


class BackgroundWork:
    """The background responses this process runs (``background: true``), detached from the
    HTTP requests that started them: at most ``limit`` at once (the next is refused with 429),
    and stopped with the process (``stop``: given ``grace_s`` to finish, then cancelled; a
    cancelled run records itself failed)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.tasks: dict[str, asyncio.Task[None]] = {}

    def check_room(self) -> None:
        if len(self.tasks) >= self.limit:
            raise RateLimited(
                f"this gateway runs {self.limit} background responses already; retry later",
                param="background",
            )

    def start(self, key: str, work: Coroutine[Any, Any, None]) -> None:
        self.check_room()
        task = asyncio.create_task(work, name=f"background {key}")
        self.tasks[key] = task
        task.add_done_callback(lambda _: self.tasks.pop(key, None))

    def cancel(self, key: str) -> bool:
        """Cancel the run here, if it runs here (a cancel on another gateway is seen by the
        run's own watch of the store)."""
        task = self.tasks.get(key)
        return task is not None and task.cancel()

    async def stop(self, grace_s: float) -> None:
        running = list(self.tasks.values())
        if not running:
            return
        _, late = await asyncio.wait(running, timeout=grace_s)
        for task in late:
            task.cancel()
        await asyncio.gather(*late, return_exceptions=True)


@dataclass
class Runtime:
    """What a running gateway holds. Routes get it typed (``routes/state.RuntimeDep``); the
    media pipeline asks for its narrow services only (``media``: the plane built once)."""

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
    # Guides are compiled in sandboxed processes, started on the first guide (none before).
    guide_sandbox: SandboxPool = field(init=False)
    guide_verdicts: VerdictCache = field(init=False)
    # The fetcher, decoder and id registry above, with every media limit built once.
    media: MediaPlane = field(init=False)
    # Rendered PDFs by their bytes and caps: a conversation re-sends its document every turn.
    documents: ContentCache[RenderedDocument] = field(
        default_factory=lambda: ContentCache(32, 256 * 1024 * 1024, 600.0)
    )

    def __post_init__(self) -> None:
        self.media = MediaPlane(
            self.fetcher, self.offload, self.settings.media.limits(), self.extra_ids
        )
        if self.responses is None:
            self.responses = response_store(self.settings)
        self.background = BackgroundWork(self.settings.responses.max_background)
        self.metrics.watch_collisions(lambda: self.extra_ids.collisions)
        guides = self.settings.guides
        self.guide_sandbox = SandboxPool(guides.sandbox_limits(), preload=GUIDE_WORKER_MODULES)
        self.guide_verdicts = VerdictCache(guides.cache_bytes, guides.max_message_chars)
        self.readiness = ReadinessWatch(
            {url: (client, self._triton_models(url)) for url, client in self.clients.items()}
        )
        for served in self.models.values():
            served.readiness = self.readiness

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
        await self.guide_sandbox.aclose()
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
        family.engine_images(served.max_images)
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
