"""Settings: where the gateway listens, the embedded Triton, logs, and every section, loaded once.

One pydantic-settings class, read from (highest priority first) explicit overrides (the
CLI), ``MMGW_*`` environment variables (nested with ``__``, e.g. ``MMGW_SERVER__PORT``), a
TOML file, then the defaults here. Nothing reads the environment after start-up: the
loaded ``Settings`` is passed to ``create_app``.
"""

from __future__ import annotations

import importlib.util
import logging
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from gateway.config.guides import GuideSettings
from gateway.config.limits import (
    DecodeSettings,
    FetchSettings,
    GenerationSettings,
    MediaSettings,
    Strict,
    UpstreamSettings,
    move_legacy_limits,
)
from gateway.config.models import ServedModel, default_models
from gateway.config.realtime import RealtimeSettings
from gateway.config.response_store import ResponsesSettings
from gateway.triton.embedded import (
    DEFAULT_READY_TIMEOUT_S,
    DEFAULT_START_ATTEMPTS,
    DEFAULT_START_BACKOFF_S,
    DEFAULT_STUB_TIMEOUT_S,
)

PACKAGE_ROOT = Path(__file__).resolve().parent.parent.parent
DEFAULT_REFERENCE_REPOSITORY = PACKAGE_ROOT / "server_repo" / "reference"
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000

log = logging.getLogger(__name__)


class ServerSettings(Strict):
    """Where the gateway itself listens, and what a connection may cost it.

    The head limits and the header deadline are enforced by the HTTP protocol
    (``gateway/server/``), before the app sees the request; the body deadlines by the app, as
    it reads the body. A request holds an in-flight slot only once its body is in.
    """

    host: str = DEFAULT_HOST
    port: int = Field(DEFAULT_PORT, ge=0, le=65535)
    workers: int | Literal["auto"] = Field(
        1,
        description="Gateway processes sharing the listening socket ('auto': one per core "
        "but one); the embedded Triton is launched once, by the supervisor. Caps, caches and "
        "the in-flight limit are per worker.",
    )

    @field_validator("workers")
    @classmethod
    def _some_workers(cls, value: int | str) -> int | str:
        if isinstance(value, int) and not 1 <= value <= 256:
            raise ValueError("workers must be between 1 and 256, or 'auto'")
        return value

    max_body_bytes: int = Field(64 * 1024 * 1024, ge=1024)
    max_in_flight: int = Field(512, ge=1)
    drain_timeout_s: float = Field(30.0, ge=0)
    # Apache's LimitRequestFields; an OpenAI SDK request carries about 15.
    max_headers: int = Field(100, ge=8)
    # The request line and every header field together: room for long tokens and cookies, and
    # bounds what a connection buffers before the app runs.
    max_header_bytes: int = Field(64 * 1024, ge=4096)
    # From a request's first byte (a new connection's opening) to its last header byte.
    header_timeout_s: float = Field(10.0, gt=0)
    # From the end of the headers to the body's last byte, and the longest wait for its next
    # bytes: 64 MiB in 60 s needs 9 Mbit/s; a stall of 15 s outlasts TCP's retransmissions.
    body_timeout_s: float = Field(60.0, gt=0)
    body_idle_timeout_s: float = Field(15.0, gt=0)
    # Apache's MinRate: after the grace period a body must keep arriving at this average rate
    # (each byte extends its deadline by 1/rate s), so a trickle of a byte a second is closed
    # after the grace, not at body_timeout_s; a slow mobile link (2 KB/s) never meets it.
    body_min_rate_bytes_s: float = Field(500.0, ge=0, description="0: no minimum rate")
    body_min_rate_grace_s: float = Field(10.0, ge=0)


# The reference models' own default (server_repo/reference_kit/weights.py DEFAULT_CACHE_DIR).
DEFAULT_REFERENCE_CACHE = Path("~/.cache/mmgw/reference")


class EmbeddedSettings(Strict):
    """The co-launched reference Triton; used when a served model names no ``triton_url``."""

    enabled: bool = True
    model_repository: Path = DEFAULT_REFERENCE_REPOSITORY
    device: Literal["cpu", "cuda", "auto"] = "auto"
    cache_dir: Path | None = None
    ready_timeout_s: float = Field(DEFAULT_READY_TIMEOUT_S, gt=0)
    start_attempts: int = Field(
        DEFAULT_START_ATTEMPTS, ge=1, description="Launches when Triton exits before ready."
    )
    start_backoff_s: float = Field(
        DEFAULT_START_BACKOFF_S, ge=0, description="First pause between them (doubling)."
    )
    stub_timeout_s: int = Field(
        DEFAULT_STUB_TIMEOUT_S, ge=1, description="Python backend's limit for a stub to start."
    )
    model_load_threads: int | None = Field(
        None, ge=1, description="Models loaded at once; default min(4, CPU count)."
    )
    python: Path | None = Field(
        None,
        description="The interpreter whose environment the models run in (its version picks "
        "Triton's Python stub); default: the gateway's own. It needs numpy<2.",
    )
    replicas: int = Field(
        1,
        ge=1,
        le=16,
        description="tritonservers co-launched over the same repository (distinct ports), "
        "each supervised; served as one replica set",
    )
    checkpoints: dict[str, str] = Field(
        default_factory=dict,
        description="Triton model name -> Hugging Face checkpoint directory to serve instead of "
        "the tiny generated weights.",
    )

    @property
    def tokenizers_dir(self) -> Path:
        """Where the reference models publish their tokenizers (``<triton model>/tokenizer.json``)
        for the gateway to read: beside their generated weights."""
        return (self.cache_dir or DEFAULT_REFERENCE_CACHE).expanduser() / "tokenizers"


class ObservabilitySettings(Strict):
    """Logs and metrics. Bodies hold prompts and images, so they are never logged by default."""

    log_format: Literal["auto", "json", "text"] = Field(
        "auto",
        description="'auto': text lines on a terminal (someone reading), JSON lines otherwise "
        "(a container, a pipe, a file: a log shipper reading).",
    )
    log_bodies: bool = Field(
        False,
        description="Debug switch: also log request bodies (prompts, media) at debug level.",
    )
    log_body_max_bytes: int = Field(16 * 1024, ge=0)
    metrics: bool = Field(True, description="Serve Prometheus metrics at /metrics.")
    tracing: bool = Field(
        False,
        description="Export an OpenTelemetry trace per request (its phases: body, admission, "
        "media fetch, decode, preprocess, digest, Triton send, first and last token) over OTLP "
        "HTTP; needs the 'otel' extra.",
    )
    otlp_traces_endpoint: str | None = Field(
        None,
        description="Where traces go, e.g. http://collector:4318/v1/traces; unset: the "
        "OpenTelemetry SDK's OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or http://localhost:4318/v1/traces.",
    )

    @field_validator("tracing")
    @classmethod
    def _exporter_installed(cls, tracing: bool) -> bool:
        """Tracing needs the optional exporter: a configuration error at load, not a traceback
        from the app's start."""
        if tracing and not _installed("opentelemetry.exporter.otlp.proto.http"):
            raise ValueError(
                "tracing is on, but the OpenTelemetry SDK and OTLP exporter are not installed: "
                "pip install 'multimodal-gateway[otel]'"
            )
        return tracing


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a parent package is missing
        return False


class Settings(BaseSettings):
    """Everything the gateway needs to start."""

    model_config = SettingsConfigDict(
        env_prefix="MMGW_", env_nested_delimiter="__", extra="forbid", frozen=True
    )

    server: ServerSettings = Field(default_factory=ServerSettings)
    embedded: EmbeddedSettings = Field(default_factory=EmbeddedSettings)
    media: MediaSettings = Field(default_factory=MediaSettings)
    fetch: FetchSettings = Field(default_factory=FetchSettings)
    decode: DecodeSettings = Field(default_factory=DecodeSettings)
    generation: GenerationSettings = Field(default_factory=GenerationSettings)
    upstream: UpstreamSettings = Field(default_factory=UpstreamSettings)
    # Read only to move an old single [limits] table (or MMGW_LIMITS__* variables) into the
    # sections above; always empty once loaded.
    limits: dict[str, Any] | None = Field(None, exclude=True, deprecated=True)
    observability: ObservabilitySettings = Field(default_factory=ObservabilitySettings)
    responses: ResponsesSettings = Field(default_factory=ResponsesSettings)
    realtime: RealtimeSettings = Field(default_factory=RealtimeSettings)
    guides: GuideSettings = Field(default_factory=GuideSettings)
    models: list[ServedModel] = Field(default_factory=default_models)
    api_keys: tuple[str, ...] = ()
    unsafe_allow_private_media_urls_for_tests: bool = Field(
        False,
        description="Lets media URLs reach loopback/private addresses. Tests only: it disables "
        "the SSRF guard.",
    )

    @model_validator(mode="before")
    @classmethod
    def _legacy_limits(cls, data: Any) -> Any:
        return move_legacy_limits(dict(data)) if isinstance(data, dict) else data

    @field_validator("models")
    @classmethod
    def _unique_ids(cls, models: list[ServedModel]) -> list[ServedModel]:
        ids = [m.id for m in models]
        duplicates = sorted({i for i in ids if ids.count(i) > 1})
        if duplicates:
            raise ValueError(f"duplicate model ids: {duplicates}")
        if not models:
            raise ValueError("at least one model must be served")
        return models

    @model_validator(mode="after")
    def _one_routing_per_target(self) -> Settings:
        """Served ids on the same replicas share one replica set, so one routing."""
        seen: dict[str | None, tuple[object, ...]] = {}
        for model in self.models:
            routing = (model.routing, model.spill_ratio, model.spill_floor)
            first = seen.setdefault(model.triton_target, routing)
            if first != routing:
                where = model.triton_target or "the embedded Triton"
                raise ValueError(
                    f"model {model.id!r}: the models served from {where} must share routing, "
                    "spill_ratio and spill_floor"
                )
        return self

    @model_validator(mode="after")
    def _embedded_needed(self) -> Settings:
        """A model without ``triton_url`` is served by the embedded Triton: it must be on,
        and hold that model (else Triton fails at start-up, the cause deep in its log)."""
        embedded = [m for m in self.models if m.triton_url is None]
        if embedded and not self.embedded.enabled:
            raise ValueError(
                f"model {embedded[0].id!r} has no triton_url, and the embedded Triton is "
                'disabled: give it triton_url = "host:port" (or --triton-url), or set '
                "[embedded] enabled = true"
            )
        repository = self.embedded.model_repository
        for model in embedded if repository.is_dir() else []:
            if not (repository / model.triton_model).is_dir():
                raise ValueError(
                    f"model {model.id!r} has no triton_url, so the embedded Triton serves it, "
                    f"but its repository {repository} has no model {model.triton_model!r}: "
                    'give it triton_url = "host:port" of the Triton that serves it'
                )
        return self

    @property
    def needs_embedded(self) -> bool:
        return self.embedded.enabled and any(m.triton_url is None for m in self.models)

    def with_embedded_at(self, url: str) -> Settings:
        """These settings for a worker process of a supervisor that launched the embedded
        Triton at ``url``: every model it serves points there (with the tokenizer the
        reference model publishes), and the worker launches nothing."""
        models = [
            model
            if model.triton_url is not None
            else model.model_copy(
                update={
                    "triton_url": url,
                    "tokenizer": model.tokenizer
                    or self.embedded.tokenizers_dir / model.triton_model,
                }
            )
            for model in self.models
        ]
        embedded = self.embedded.model_copy(update={"enabled": False})
        return self.model_copy(update={"models": models, "embedded": embedded})

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        toml_file = settings_cls.model_config.get("toml_file")
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        if toml_file:
            sources.append(TomlConfigSettingsSource(settings_cls))
        return tuple(sources)


def load_settings(config_file: Path | None = None, **overrides: Any) -> Settings:
    """Settings from overrides, environment, then ``config_file`` (TOML), then defaults."""
    if config_file is None:
        return Settings(**overrides)
    if not config_file.is_file():
        raise FileNotFoundError(f"config file not found: {config_file}")

    class _FromFile(Settings):
        model_config = SettingsConfigDict(toml_file=config_file)

    loaded = _FromFile(**overrides)
    return Settings.model_validate(loaded.model_dump())
