"""The ``mmgw`` command: argument parsing only; the work lives in the app."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from gateway.config import ServedModel, Settings, load_settings


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


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        settings = settings_from_args(args)
    except (ValueError, FileNotFoundError) as exc:
        print(f"mmgw: configuration error: {exc}", file=sys.stderr)
        return 2
    import uvicorn

    from gateway.app import create_app

    uvicorn.run(
        create_app(settings),
        host=settings.server.host,
        port=settings.server.port,
        log_level=args.log_level,
        timeout_graceful_shutdown=int(settings.server.drain_timeout_s),
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
