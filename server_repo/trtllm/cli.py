"""``mmgw trtllm-repo``: the options, and the run that prints what to do next.

``gateway/cli.py`` owns the ``mmgw`` parser and calls ``add_arguments`` and ``run`` here, so
the gateway's command line stays argument parsing only and this tool stays importable on
its own (nothing heavy is imported until ``run``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from server_repo.trtllm.families import SUPPORTED_FAMILIES, get_spec
from server_repo.trtllm.request import (
    COMPOSE_TRITON_URL,
    DEFAULT_KV_CACHE_FRACTION,
    DEFAULT_TRITON_URL,
    LlmapiRepoRequest,
    PathMap,
    RepoRequest,
)

if TYPE_CHECKING:
    from server_repo.trtllm.assemble import Result


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``trtllm-repo`` options (backend, engine paths, sizes, switches, outputs)."""
    parser.add_argument(
        "--backend",
        choices=["engine", "llmapi"],
        default="engine",
        help="engine: built TensorRT engines (ensemble/BLS, needs --family); llmapi: NVIDIA's "
        "PyTorch-backend model over a Hugging Face folder (--model), no engine build",
    )
    parser.add_argument("--family", choices=sorted(SUPPORTED_FAMILIES), help="engine backend")
    parser.add_argument("--model", type=Path, help="llmapi: the Hugging Face model folder")
    parser.add_argument(
        "--templates",
        type=Path,
        required=True,
        help="TensorRT-LLM checkout (triton_backend/all_models: llmapi/ for --backend llmapi), "
        "tensorrtllm_backend checkout, or an all_models/ directory such as /app/all_models "
        "copied out of the Triton TRT-LLM container",
    )
    parser.add_argument("--output", type=Path, required=True, help="repository to write")
    engines = parser.add_argument_group("engines")
    engines.add_argument("--llm-engine", "--decoder-engine", dest="llm_engine", type=Path)
    engines.add_argument("--visual-engine", type=Path, help="build_visual_engine.py output")
    engines.add_argument("--encoder-engine", type=Path, help="Whisper encoder engine")
    engines.add_argument("--tokenizer-dir", type=Path, help="Hugging Face model/tokenizer dir")
    engines.add_argument("--whisper-assets", type=Path, help="dir with multilingual.tiktoken")
    sizes = parser.add_argument_group("sizes")
    sizes.add_argument("--max-batch", type=int, help="Triton max batch (default: the engine's)")
    sizes.add_argument("--max-images", type=int, default=1, help="images per request (1)")
    sizes.add_argument("--features-per-image", type=int, help="override the family's count")
    sizes.add_argument("--kv-cache-fraction", type=float, default=DEFAULT_KV_CACHE_FRACTION)
    sizes.add_argument("--cross-kv-cache-fraction", type=float, help="mllama/whisper (0.5)")
    sizes.add_argument("--world-size", type=int, default=1, help="GPUs (tensor parallel)")
    switches = parser.add_argument_group("switches")
    switches.add_argument(
        "--kv-cache-reuse",
        action=argparse.BooleanOptionalAction,
        help="KV block reuse (default: off for engines, which must be built for it; on for llmapi)",
    )
    switches.add_argument(
        "--multimodal",
        action=argparse.BooleanOptionalAction,
        help="llmapi: read image_url (default: on for a vision model)",
    )
    switches.add_argument("--streaming", action=argparse.BooleanOptionalAction, default=False)
    switches.add_argument("--entry", choices=["ensemble", "bls"], default="ensemble")
    switches.add_argument(
        "--guided-decoding",
        action="store_true",
        help="structured output (response_format, tools): xgrammar in tensorrt_llm, its "
        "tokenizer info from --tokenizer-dir, the guide inputs wired through the ensemble",
    )
    out = parser.add_argument_group("gateway and launch")
    out.add_argument("--model-id", help="OpenAI model id (default: the tokenizer dir's name)")
    out.add_argument(
        "--triton-url",
        help=f"Triton's gRPC host:port in the gateway config (default {DEFAULT_TRITON_URL}, "
        f"where the printed launch command serves it; with --env-file, {COMPOSE_TRITON_URL}: "
        "the compose service)",
    )
    out.add_argument("--gateway-config", type=Path, help="TOML to write (<output>/../gateway.toml)")
    out.add_argument("--env-file", type=Path, help="also write docker-compose variables here")
    out.add_argument("--launch-script", type=PurePosixPath, help="launch_triton_server.py path")
    out.add_argument(
        "--path-map",
        action="append",
        default=[],
        metavar="LOCAL=/SERVER",
        help="write LOCAL paths as the server sees them (repeatable)",
    )
    out.add_argument("--force", action="store_true", help="replace an existing --output")


def _default_triton_url(args: argparse.Namespace) -> str:
    return COMPOSE_TRITON_URL if args.env_file is not None else DEFAULT_TRITON_URL


def request_from_args(args: argparse.Namespace) -> RepoRequest:
    """Translate parsed options into the request every later step reads."""
    return RepoRequest(
        spec=get_spec(args.family),
        templates=args.templates,
        output=args.output,
        llm_engine=args.llm_engine,
        visual_engine=args.visual_engine,
        encoder_engine=args.encoder_engine,
        tokenizer_dir=args.tokenizer_dir,
        max_batch_size=args.max_batch,
        max_images=args.max_images,
        features_per_image=args.features_per_image,
        kv_cache_fraction=args.kv_cache_fraction,
        cross_kv_cache_fraction=args.cross_kv_cache_fraction,
        kv_cache_reuse=bool(args.kv_cache_reuse),
        streaming=args.streaming,
        world_size=args.world_size,
        entry=args.entry,
        model_id=args.model_id,
        triton_url=args.triton_url or _default_triton_url(args),
        gateway_config=args.gateway_config,
        launch_script=args.launch_script,
        whisper_assets=args.whisper_assets,
        path_maps=tuple(PathMap.parse(text) for text in args.path_map),
        force=args.force,
        guided_decoding=args.guided_decoding,
    )


def llmapi_request_from_args(args: argparse.Namespace) -> LlmapiRepoRequest:
    """The ``--backend llmapi`` request; engine-only options are refused, not ignored."""
    engine_only = {
        "--family": args.family, "--llm-engine": args.llm_engine,
        "--visual-engine": args.visual_engine, "--encoder-engine": args.encoder_engine,
        "--guided-decoding": args.guided_decoding or None,
    }  # fmt: skip
    given = [name for name, value in engine_only.items() if value is not None]
    if given:
        raise ValueError(f"{', '.join(given)}: engine-path options; --backend llmapi takes none")
    if args.model is None:
        raise ValueError("--backend llmapi needs --model, the Hugging Face model folder")
    return LlmapiRepoRequest(
        templates=args.templates,
        output=args.output,
        model=args.model,
        model_id=args.model_id,
        triton_url=args.triton_url or _default_triton_url(args),
        gateway_config=args.gateway_config,
        world_size=args.world_size,
        kv_cache_fraction=args.kv_cache_fraction,
        kv_cache_reuse=args.kv_cache_reuse is not False,
        multimodal=args.multimodal,
        path_maps=tuple(PathMap.parse(text) for text in args.path_map),
        force=args.force,
    )


def _build(args: argparse.Namespace) -> tuple[Result, str]:
    """The repository of the chosen backend, and the Triton URL its gateway config names."""
    from server_repo.trtllm.assemble import build_repository
    from server_repo.trtllm.llmapi import build_llmapi_repository

    if args.backend == "llmapi":
        llmapi = llmapi_request_from_args(args)
        return build_llmapi_repository(llmapi), llmapi.triton_url
    if args.family is None:
        raise ValueError("--backend engine needs --family")
    if args.model is not None:
        raise ValueError("--model is for --backend llmapi; engines take --tokenizer-dir")
    request = request_from_args(args)
    return build_repository(request), request.triton_url


def run(args: argparse.Namespace) -> int:
    """Build the repository; print where it is and how to launch it. Exit 2 when refused."""
    from server_repo.trtllm.assemble import refuse_overwrite
    from server_repo.trtllm.errors import RepoError

    try:
        if args.env_file is not None:
            refuse_overwrite(args.env_file, args.force, "--env-file")
        result, triton_url = _build(args)
    except (RepoError, ValueError) as exc:
        print(f"mmgw trtllm-repo: {exc}", file=sys.stderr)
        return 2
    env_lines = "".join(f"{key}={value}\n" for key, value in result.compose_env.items())
    if args.env_file is not None:
        args.env_file.write_text(env_lines)
    print(f"model repository: {result.repository}")
    print(f"gateway config:   {result.gateway_config}")
    print(f"  (triton_url = {triton_url!r}; --triton-url HOST:PORT to change it)")
    for note in result.notes:
        print(f"note: {note}")
    if args.backend == "llmapi":
        print("\nlaunch Triton (inside NVIDIA's TensorRT-LLM container):")
    else:
        print("\nlaunch Triton (inside the Triton TRT-LLM container; export PMIX_MCA_gds=hash if")
        print("MPI_Init_thread fails):")
    print(f"  {result.launch_command}")
    print("\nor with docker compose, set in .env:")
    print("".join(f"  {line}\n" for line in env_lines.splitlines()), end="")
    return 0
