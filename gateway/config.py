"""Settings: which models are served, where Triton is, and every limit, loaded once.

One pydantic-settings class, read from (highest priority first) explicit overrides (the
CLI), ``MMGW_*`` environment variables (nested with ``__``, e.g. ``MMGW_SERVER__PORT``), a
TOML file, then the defaults here. Nothing reads the environment after start-up: the
loaded ``Settings`` is passed to ``create_app``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from gateway.families.whisper.options import WhisperOptions

PACKAGE_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_REFERENCE_REPOSITORY = PACKAGE_ROOT / "server_repo" / "reference"
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
DEFAULT_MAX_TOKENS = 256


class _Strict(BaseModel):
    """Config sections refuse unknown keys: a typo must fail loudly, not be ignored."""

    model_config = ConfigDict(extra="forbid")


class ServerSettings(_Strict):
    """Where the gateway itself listens."""

    host: str = DEFAULT_HOST
    port: int = Field(DEFAULT_PORT, ge=0, le=65535)
    max_body_bytes: int = Field(64 * 1024 * 1024, ge=1024)
    max_in_flight: int = Field(512, ge=1)
    drain_timeout_s: float = Field(30.0, ge=0)


class EmbeddedSettings(_Strict):
    """The co-launched reference Triton; used when a served model names no ``triton_url``."""

    enabled: bool = True
    model_repository: Path = DEFAULT_REFERENCE_REPOSITORY
    device: Literal["cpu", "cuda", "auto"] = "auto"
    cache_dir: Path | None = None
    ready_timeout_s: float = Field(600.0, gt=0)
    python: Path | None = Field(
        None,
        description="The interpreter whose environment the models run in (its version picks "
        "Triton's Python stub); default: the gateway's own. It needs numpy<2.",
    )
    checkpoints: dict[str, str] = Field(
        default_factory=dict,
        description="Triton model name -> Hugging Face checkpoint directory to serve instead of "
        "the tiny generated weights.",
    )


class Limits(_Strict):
    """Per-request caps. Every one is explicit; a request over any of them gets a 400.

    Media: fetch caps, per-kind item counts, image pixels, video size/length/frames, audio
    length, and the decoding pool (worker processes, a time budget per item, memory per
    worker). ``content_id_salt`` is folded into every KV-reuse id: gateways of different
    tenants in front of one Triton get different salts, so they never share a cache entry.
    """

    max_images_per_request: int = Field(8, ge=0)
    max_videos_per_request: int = Field(1, ge=0, description="the wire tensor holds one video")
    max_audio_per_request: int = Field(1, ge=0)
    max_media_bytes: int = Field(20 * 1024 * 1024, ge=1)
    max_image_pixels: int = Field(40_000_000, ge=1)
    jpeg_draft_margin: float = Field(
        1.5,
        ge=0,
        description="Decode large JPEGs at a reduced scale still this many times the model's "
        "input size (much faster); 0 decodes at full size, bit-identical to Hugging Face.",
    )
    max_video_duration_s: float = Field(600.0, gt=0)
    max_video_frames: int = Field(36_000, ge=1, description="frames in the file")
    max_video_side: int = Field(4096, ge=16)
    max_video_decoded_frames: int = Field(
        4096, ge=1, description="frames the sampler may decode for one video"
    )
    video_num_frames: int = Field(8, ge=1, description="frames sampled when a request names none")
    video_max_num_frames: int = Field(32, ge=1, description="most frames a request may ask for")
    video_max_fps: float = Field(30.0, gt=0, description="highest sampling fps a request may ask")
    max_audio_duration_s: float = Field(600.0, gt=0)
    fetch_connect_timeout_s: float = Field(5.0, gt=0)
    fetch_total_timeout_s: float = Field(20.0, gt=0)
    fetch_max_redirects: int = Field(3, ge=0)
    allowed_domains: tuple[str, ...] = ()
    max_tokens_cap: int = Field(4096, ge=1)
    decode_workers: int = Field(2, ge=1, description="media decoding worker processes")
    decode_timeout_s: float = Field(15.0, gt=0, description="time budget per media item")
    decode_memory_mb: int = Field(4096, ge=0, description="address space per worker; 0 = no cap")
    content_id_salt: str = Field("", description="tenant salt for the KV-reuse ids")


class ObservabilitySettings(_Strict):
    """Logs and metrics. Bodies hold prompts and images, so they are never logged by default."""

    log_format: Literal["json", "text"] = "json"
    log_bodies: bool = Field(
        False,
        description="Debug switch: also log request bodies (prompts, media) at debug level.",
    )
    log_body_max_bytes: int = Field(16 * 1024, ge=0)
    metrics: bool = Field(True, description="Serve Prometheus metrics at /metrics.")


class LoraAdapter(_Strict):
    """One LoRA adapter of a served model, as TensorRT-LLM's Triton backend takes it.

    ``weights_path`` is the folder NVIDIA's ``hf_lora_convert.py`` writes:
    ``model.lora_weights.npy`` (fp16, [1, modules x layers, size]) and
    ``model.lora_config.npy`` (int32, [1, modules x layers, 3]). The gateway sends both with
    the first request that uses ``task_id`` on a Triton model, and the id alone afterwards
    (the server caches the adapter).
    """

    task_id: int = Field(ge=1, le=2**64 - 1, description="lora_task_id (UINT64); 0 means none")
    weights_path: Path


class ServedModel(_Strict):
    """One OpenAI model id and the Triton model that serves it."""

    id: str
    family: str
    triton_model: str
    triton_url: str | None = Field(None, description="host:port of Triton's gRPC; None = embedded")
    max_images: int | None = Field(None, ge=0, description="engine's max images per request")
    default_max_tokens: int = Field(DEFAULT_MAX_TOKENS, ge=1)
    kv_tokens_per_block: int | None = Field(
        None, ge=1, description="TRT-LLM tokens_per_block; read from the model config if unset"
    )
    streaming: Literal["delta", "cumulative"] = Field(
        "delta",
        description="'delta': each Triton response holds only new text (the ensemble); "
        "'cumulative': the full text so far (BLS with accumulate_tokens).",
    )
    end_id: int | Literal["server"] | None = Field(
        None,
        description="None: the family's known end id; 'server': send none, so the "
        "deployment's tokenizer EOS applies; or an explicit id (never -1).",
    )
    pad_id: int | None = None
    owned_by: str = "multimodal-gateway"
    lora: list[LoraAdapter] = Field(
        default_factory=list,
        description="LoRA adapters (one table or a list); the first applies when a request "
        "names none (request field 'lora_task_id'), as the InternLM-XComposer2 guide does.",
    )

    @field_validator("lora", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return [value] if isinstance(value, dict | LoraAdapter) else value

    @field_validator("lora")
    @classmethod
    def _unique_task_ids(cls, adapters: list[LoraAdapter]) -> list[LoraAdapter]:
        ids = [adapter.task_id for adapter in adapters]
        if len(set(ids)) != len(ids):
            raise ValueError(f"duplicate LoRA task ids: {ids}")
        return adapters

    whisper: WhisperOptions | None = Field(None, description="family 'whisper' only")

    @property
    def family_options(self) -> BaseModel | None:
        """The family's own options table, for families that take one."""
        return self.whisper

    @model_validator(mode="after")
    def _whisper_options(self) -> ServedModel:
        if self.whisper is not None and self.family != "whisper":
            raise ValueError(f"model {self.id!r}: 'whisper' options need family 'whisper'")
        return self


# What server_repo/reference's two Whisper models were "built" with (their config.pbtxt).
REFERENCE_WHISPER = WhisperOptions(
    vocabulary="bytes", max_prompt_tokens=64, max_sequence_tokens=192
)


def default_models() -> list[ServedModel]:
    """The embedded reference models served when the config names none."""
    return [
        # The tiny reference tokenizers have their own ids: let the server pick its EOS.
        ServedModel(
            id="reference-llava", family="llava", triton_model="reference_llava", end_id="server"
        ),
        ServedModel(
            id="reference-llava-onevision",
            family="llava_onevision",
            triton_model="reference_llava_onevision",
            end_id="server",
        ),
        # The tiny reference Whisper has a byte vocabulary and roomier decoder limits.
        ServedModel(
            id="reference-whisper",
            family="whisper",
            triton_model="reference_whisper",
            whisper=REFERENCE_WHISPER,
        ),
    ]


class Settings(BaseSettings):
    """Everything the gateway needs to start."""

    model_config = SettingsConfigDict(
        env_prefix="MMGW_", env_nested_delimiter="__", extra="forbid", frozen=True
    )

    server: ServerSettings = Field(default_factory=ServerSettings)
    embedded: EmbeddedSettings = Field(default_factory=EmbeddedSettings)
    limits: Limits = Field(default_factory=Limits)
    observability: ObservabilitySettings = Field(default_factory=ObservabilitySettings)
    models: list[ServedModel] = Field(default_factory=default_models)
    api_keys: tuple[str, ...] = ()
    unsafe_allow_private_media_urls_for_tests: bool = Field(
        False,
        description="Lets media URLs reach loopback/private addresses. Tests only: it disables "
        "the SSRF guard.",
    )

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
    def _embedded_needed(self) -> Settings:
        if not self.embedded.enabled and any(m.triton_url is None for m in self.models):
            raise ValueError("models without triton_url need the embedded Triton enabled")
        return self

    @property
    def needs_embedded(self) -> bool:
        return self.embedded.enabled and any(m.triton_url is None for m in self.models)

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
