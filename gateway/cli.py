"""The ``mmgw`` command: argument parsing only; the work lives in the app."""

from __future__ import annotations

import argparse
import importlib.util
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gateway.config import ServedModel, Settings, load_settings
from gateway.observability.logging import configure_logging
from server_repo.trtllm import cli as trtllm_cli

if TYPE_CHECKING:
    from fastapi import FastAPI


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mmgw", description="OpenAI-compatible multimodal gateway"
    )
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="serve the API (co-launches Triton by default)")
    serve.add_argument("--config", type=Path, help="TOML config file")
    serve.add_argument("--host", help="listen address (default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="listen port (default 8000)")
    serve.add_argument(
        "--triton-url",
        help="host:port of an external Triton's gRPC endpoint; launches nothing",
    )
    serve.add_argument(
        "--device", choices=["cpu", "cuda", "auto"], help="embedded reference device"
    )
    serve.add_argument("--log-level", default="info")
    trtllm = commands.add_parser(
        "trtllm-repo",
        help="write a checked Triton TensorRT-LLM model repository from built engines",
    )
    trtllm_cli.add_arguments(trtllm)
    return parser


def settings_from_args(args: argparse.Namespace) -> Settings:
    settings = load_settings(args.config)
    updates: dict[str, object] = {}
    server = settings.server.model_copy(
        update={k: v for k, v in (("host", args.host), ("port", args.port)) if v is not None}
    )
    updates["server"] = server
    if args.device:
        updates["embedded"] = settings.embedded.model_copy(update={"device": args.device})
    if args.triton_url:
        updates["models"] = [
            ServedModel.model_validate({**m.model_dump(), "triton_url": args.triton_url})
            for m in settings.models
        ]
        updates["embedded"] = settings.embedded.model_copy(update={"enabled": False})
    return Settings.model_validate({**settings.model_dump(), **updates})


def fast_server_options() -> dict[str, Any]:
    """uvloop when installed (``uvicorn[standard]`` brings it), said explicitly.

    uvicorn's ``auto`` picks it when it imports and silently falls back to asyncio otherwise;
    naming it keeps the per-chunk path the benchmarks measured. The HTTP protocol is always
    the gateway's own (httptools, which ``uvicorn[standard]`` brings too, with the request
    head bounded: ``gateway/server/``).
    """
    options: dict[str, Any] = {}
    if importlib.util.find_spec("uvloop") is not None:
        options["loop"] = "uvloop"
    return options


def uvicorn_options(settings: Settings, app: FastAPI, log_level: str) -> dict[str, Any]:
    """Everything ``mmgw serve`` passes to ``uvicorn.run`` besides the app."""
    from gateway.server import protocol_class

    return {
        "host": settings.server.host,
        "port": settings.server.port,
        **fast_server_options(),
        "http": protocol_class(settings.server, app),
        "log_level": log_level,
        "log_config": None,  # configure_logging owns the handlers: one format for all
        "access_log": False,  # the gateway writes its own access line, with timings and sizes
        "timeout_graceful_shutdown": math.ceil(settings.server.drain_timeout_s),
    }


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "trtllm-repo":
        return trtllm_cli.run(args)
    try:
        settings = settings_from_args(args)
    except (ValueError, FileNotFoundError) as exc:
        print(f"mmgw: configuration error: {exc}", file=sys.stderr)
        return 2
    configure_logging(settings.observability.log_format, args.log_level)
    import uvicorn

    from gateway.app import create_app
    from gateway.drain import draining_server

    app = create_app(settings)
    options = uvicorn_options(settings, app, args.log_level)
    drain_s = settings.server.drain_timeout_s
    draining_server(uvicorn.Config(app, **options), app.state.drain, drain_s).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
