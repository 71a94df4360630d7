"""Decide whether the request and the engines agree, before anything is written.

Each rule mirrors a value NVIDIA's guides ask users to keep in sync by hand. Every
disagreement is collected (not just the first) and each message names both values and
where each came from, so one run tells the user everything to fix.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from server_repo.trtllm.engines import Engines, LlmEngine, VisualEngine
from server_repo.trtllm.errors import EngineError, InconsistentInput
from server_repo.trtllm.families import WHISPER_FRAMES
from server_repo.trtllm.request import RepoRequest

Check = Callable[[RepoRequest, Engines], list[str]]


def _need(path: Path | None, option: str, family: str) -> Path:
    if path is None:
        raise EngineError(f"family {family} needs {option}")
    if not path.is_dir():
        raise EngineError(f"{option} {path}: not a directory")
    return path


def load_engines(request: RepoRequest) -> Engines:
    """Read the engine directories the family's layout needs."""
    name = request.spec.name
    if request.spec.layout == "whisper":
        decoder = LlmEngine.load(_need(request.llm_engine, "--decoder-engine", name))
        encoder = LlmEngine.load(_need(request.encoder_engine, "--encoder-engine", name))
        return Engines(llm=decoder, encoder=encoder)
    llm = LlmEngine.load(_need(request.llm_engine, "--llm-engine", name))
    visual = VisualEngine.load(_need(request.visual_engine, "--visual-engine", name))
    _need(request.tokenizer_dir, "--tokenizer-dir", name)
    return Engines(llm=llm, visual=visual)


def _sizes(request: RepoRequest, engines: Engines) -> list[str]:
    problems = []
    built = engines.llm.max_batch_size
    if request.max_batch_size is not None and request.max_batch_size > built:
        problems.append(
            f"--max-batch {request.max_batch_size} exceeds the engine's "
            f"build_config.max_batch_size {built} ({engines.llm.config_path})"
        )
    if not 0 < request.kv_cache_fraction < 1:
        problems.append(f"--kv-cache-fraction {request.kv_cache_fraction} must be in (0, 1)")
    if request.world_size != engines.llm.world_size:
        problems.append(
            f"--world-size {request.world_size} != the engine's pretrained_config.mapping "
            f"world size {engines.llm.world_size} ({engines.llm.config_path}); "
            "one MPI rank serves one engine shard"
        )
    if request.max_images < (1 if request.spec.layout == "multimodal" else 0):
        problems.append(f"--max-images {request.max_images} must be at least 1")
    return problems


def _feature_budget(request: RepoRequest, engines: Engines) -> list[str]:
    spec = request.spec
    if spec.layout != "multimodal":
        return []
    where, built = engines.llm.budget(spec.budget_field)
    batch = engines.llm.max_batch_size
    wanted = spec.feature_budget(batch, request.max_images, request.features)
    if built == wanted:
        return []
    factors = f"{request.features} features x {request.max_images} images"
    if spec.budget_scales_with_batch:
        factors = f"max_batch_size {batch} x {factors}"
    return [
        f"{where} {built} in {engines.llm.config_path} != {factors} = {wanted}; rebuild the "
        "engine with that budget, or pass the --max-images/--features-per-image it was built for"
    ]


def _dtypes(request: RepoRequest, engines: Engines) -> list[str]:
    spec = request.spec
    if engines.llm.dtype is None or engines.llm.dtype == spec.engine_dtype:
        return []
    return [
        f"family {spec.name} is served with encoder_input_features_data_type "
        f"{spec.encoder_features_type}, which needs a {spec.engine_dtype} engine; "
        f"pretrained_config.dtype is {engines.llm.dtype} ({engines.llm.config_path})"
    ]


def _cross_kv(request: RepoRequest, engines: Engines) -> list[str]:
    fraction = request.cross_kv_cache_fraction
    if not request.spec.encoder_decoder:
        if fraction is None:
            return []
        return [
            f"--cross-kv-cache-fraction {fraction} is only for encoder-decoder families "
            f"(mllama, whisper); {request.spec.name} has no cross-attention KV cache"
        ]
    value = request.cross_fraction
    if value is None or not 0 < value < 1:
        return [f"cross_kv_cache_fraction {value} must be in (0, 1) for {request.spec.name}"]
    return []


def _reuse(request: RepoRequest, engines: Engines) -> list[str]:
    if not request.kv_cache_reuse:
        return []
    problems = []
    llm = engines.llm
    if not llm.paged_context_fmha:
        problems.append(
            "--kv-cache-reuse (enable_kv_cache_reuse True) needs an engine built with "
            "--use_paged_context_fmha enable; build_config.plugin_config.use_paged_context_fmha "
            f"is {llm.plugin('use_paged_context_fmha')} ({llm.config_path})"
        )
    if not llm.paged_kv_cache:
        problems.append(f"--kv-cache-reuse needs a paged KV cache; {llm.config_path} has none")
    return problems


def _visual(request: RepoRequest, engines: Engines) -> list[str]:
    visual: VisualEngine | None = engines.visual
    if visual is None:
        return []
    problems = []
    allowed = request.spec.visual_model_types
    if visual.model_type is not None and allowed and visual.model_type not in allowed:
        problems.append(
            f"visual engine builder_config.model_type {visual.model_type!r} "
            f"({visual.config_path}) is not a {request.spec.name} encoder ({', '.join(allowed)})"
        )
    if visual.max_batch_size and visual.max_batch_size < request.max_images:
        problems.append(
            f"visual engine builder_config.max_batch_size {visual.max_batch_size} < "
            f"--max-images {request.max_images}: one request's images would not fit"
        )
    return problems


def _entry(request: RepoRequest, engines: Engines) -> list[str]:
    spec = request.spec
    if request.entry == "bls" and spec.image_tensor not in (None, "image_input"):
        return [
            f"--entry bls: NVIDIA's tensorrt_llm_bls takes only image_input, but {spec.name} "
            f"sends {spec.image_tensor}; use --entry ensemble"
        ]
    return []


def _guided(request: RepoRequest, engines: Engines) -> list[str]:
    if request.guided_decoding and request.spec.layout == "whisper":
        return ["--guided-decoding: whisper_bls takes no guide inputs (it is for LLM families)"]
    return []


def _whisper(request: RepoRequest, engines: Engines) -> list[str]:
    encoder = engines.encoder
    if encoder is None:
        return []
    problems = []
    if encoder.max_input_len < WHISPER_FRAMES:
        problems.append(
            f"Whisper encoder build_config.max_input_len {encoder.max_input_len} "
            f"({encoder.config_path}) < {WHISPER_FRAMES} mel frames (one 30 s window)"
        )
    if encoder.n_mels is None:
        problems.append(f"{encoder.config_path}: no pretrained_config.n_mels; not an encoder?")
    if encoder.dtype and engines.llm.dtype and encoder.dtype != engines.llm.dtype:
        problems.append(
            f"Whisper encoder dtype {encoder.dtype} != decoder dtype {engines.llm.dtype}"
        )
    return problems


CHECKS: tuple[Check, ...] = (
    _sizes,
    _feature_budget,
    _dtypes,
    _cross_kv,
    _reuse,
    _visual,
    _entry,
    _guided,
    _whisper,
)


def check(request: RepoRequest, engines: Engines) -> None:
    """Raise ``InconsistentInput`` listing every disagreement, or return quietly."""
    problems = [problem for rule in CHECKS for problem in rule(request, engines)]
    if problems:
        raise InconsistentInput(problems)
