"""What the user asked for: one frozen value, built by the CLI and read by every later step."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from server_repo.trtllm.families import FamilySpec

DEFAULT_KV_CACHE_FRACTION = 0.9
#: NVIDIA's guides split enc-dec KV memory half and half between self and cross attention.
DEFAULT_CROSS_KV_CACHE_FRACTION = 0.5
#: Where the gateway finds Triton by default: the launch command's gRPC port on this machine;
#: with --env-file (docker compose), the compose service's name.
DEFAULT_TRITON_URL = "localhost:8001"
COMPOSE_TRITON_URL = "triton:8001"
#: CUDA pool for prompt tables moved between models on GPU 0 (NVIDIA's documented value).
MULTIMODAL_GPU0_POOL_BYTES = 300_000_000


@dataclass(frozen=True)
class PathMap:
    """Rewrites a local path prefix to the path the Triton server will see (a container mount)."""

    local: Path
    server: PurePosixPath

    @classmethod
    def parse(cls, text: str) -> PathMap:
        local, sep, server = text.partition("=")
        if not sep or not local or not server.startswith("/"):
            raise ValueError(f"--path-map wants LOCAL=/server/path, got {text!r}")
        return cls(Path(local).resolve(), PurePosixPath(server))


def server_path(local: Path, path_maps: tuple[PathMap, ...]) -> str:
    """``local`` absolute, with the first ``--path-map`` that covers it applied."""
    resolved = local.resolve()
    for mapping in path_maps:
        if resolved == mapping.local or mapping.local in resolved.parents:
            return str(mapping.server / resolved.relative_to(mapping.local))
    return str(resolved)


@dataclass(frozen=True)
class RepoRequest:
    """Everything ``mmgw trtllm-repo`` was told. Sizes left ``None`` come from the engines."""

    spec: FamilySpec
    templates: Path
    output: Path
    llm_engine: Path | None = None
    visual_engine: Path | None = None
    encoder_engine: Path | None = None
    tokenizer_dir: Path | None = None
    max_batch_size: int | None = None
    max_images: int = 1
    features_per_image: int | None = None
    kv_cache_fraction: float = DEFAULT_KV_CACHE_FRACTION
    cross_kv_cache_fraction: float | None = None
    kv_cache_reuse: bool = False
    streaming: bool = False
    world_size: int = 1
    entry: str = "ensemble"
    model_id: str | None = None
    triton_url: str = DEFAULT_TRITON_URL
    gateway_config: Path | None = None
    launch_script: PurePosixPath | None = None
    whisper_assets: Path | None = None
    path_maps: tuple[PathMap, ...] = field(default_factory=tuple)
    force: bool = False
    guided_decoding: bool = False

    @property
    def features(self) -> int:
        return self.features_per_image or self.spec.features_per_image

    @property
    def cross_fraction(self) -> float | None:
        """The value written: the user's, or the guides' default for enc-dec families."""
        if self.cross_kv_cache_fraction is not None:
            return self.cross_kv_cache_fraction
        return DEFAULT_CROSS_KV_CACHE_FRACTION if self.spec.encoder_decoder else None

    @property
    def triton_model(self) -> str:
        """The Triton model the gateway calls."""
        if self.spec.layout == "whisper":
            return "whisper_bls"
        return "tensorrt_llm_bls" if self.entry == "bls" else "ensemble"

    @property
    def tokenizer_info_path(self) -> Path:
        """Where ``--guided-decoding`` writes xgrammar's tokenizer info (beside the config)."""
        return self.output.resolve() / "tensorrt_llm" / "xgrammar_tokenizer_info.json"

    def server_path(self, local: Path) -> str:
        """``local`` as the Triton server will see it (absolute; ``--path-map`` applied)."""
        return server_path(local, self.path_maps)


@dataclass(frozen=True)
class LlmapiRepoRequest:
    """What ``--backend llmapi`` was told."""

    templates: Path
    output: Path
    model: Path
    model_id: str | None = None
    triton_url: str = DEFAULT_TRITON_URL
    gateway_config: Path | None = None
    world_size: int = 1
    kv_cache_fraction: float = DEFAULT_KV_CACHE_FRACTION
    kv_cache_reuse: bool = True
    multimodal: bool | None = None  # None: a vision model (``vision_config``) turns it on
    path_maps: tuple[PathMap, ...] = field(default_factory=tuple)
    force: bool = False

    def server_path(self, local: Path) -> str:
        """``local`` as the Triton server sees it (absolute; ``--path-map`` applied)."""
        return server_path(local, self.path_maps)
