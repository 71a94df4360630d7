"""The ``mmgw`` command: argument parsing only; the work lives in the app."""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
from pathlib import Path

from pydantic import ValidationError

from gateway.config import ServedModel, Settings, load_settings
from gateway.config.environment import unknown_variables
from gateway.config.explain import explain
from gateway.observability.logging import configure_logging
from gateway.routes.docs import gateway_version
from gateway.server.options import fast_server_options, uvicorn_options
from gateway.server.ready import address_url, ready_line
from gateway.workers import serve as supervise
from gateway.workers import worker_count

log = logging.getLogger("gateway.cli")
# uvicorn's exit status when the application's start-up fails.
STARTUP_FAILED = 3

__all__ = ["fast_server_options", "main", "settings_from_args", "uvicorn_options"]


def _parser(repository: bool = True) -> argparse.ArgumentParser:
    """The command line; ``trtllm-repo``'s own arguments only when ``repository``: that
    command alone loads the repository assembler (``server_repo.trtllm``), so ``mmgw serve``
    (every gateway worker's start-up) parses without it."""
    parser = argparse.ArgumentParser(
        prog="mmgw", description="OpenAI-compatible multimodal gateway"
    )
    parser.add_argument("--version", action="version", version=f"mmgw {gateway_version()}")
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
    serve.add_argument(
        "--workers",
        help="gateway processes sharing the port: a number, or 'auto' (one per core but one)",
    )
    serve.add_argument("--log-level", default="info")
    trtllm = commands.add_parser(
        "trtllm-repo",
        help="write a checked Triton TensorRT-LLM model repository: from built engines, or "
        "(--backend llmapi) NVIDIA's PyTorch-backend model over a Hugging Face folder",
    )
    if repository:
        from server_repo.trtllm import cli as trtllm_cli

        trtllm_cli.add_arguments(trtllm)
    return parser


def _workers(value: str | None) -> int | str | None:
    return int(value) if value is not None and value.isdigit() else value


def _external(model: ServedModel, url: str, tokenizers: Path) -> ServedModel | None:
    """``model`` served by the Triton at ``url``. A model on NVIDIA's llmapi contract (no
    family) needs its model folder: the one a reference model published on this machine, if
    any; without one it is left out, said on stderr (it could not start)."""
    fields = {**model.model_dump(), "triton_url": url}
    if model.family is None and model.tokenizer is None:
        published = tokenizers / model.triton_model
        if not published.is_dir():
            print(
                f"mmgw: warning: model {model.id!r} left out: on an external Triton, NVIDIA's "
                "llmapi model needs tokenizer = the model's Hugging Face folder",
                file=sys.stderr,
            )
            return None
        fields["tokenizer"] = published
    return ServedModel.model_validate(fields)


def settings_from_args(args: argparse.Namespace) -> Settings:
    settings = load_settings(args.config)
    updates: dict[str, object] = {}
    given = (("host", args.host), ("port", args.port), ("workers", _workers(args.workers)))
    # A dict, not model_copy: the values given are validated with the rest.
    server = {**settings.server.model_dump(), **{k: v for k, v in given if v is not None}}
    updates["server"] = server
    if args.device:
        updates["embedded"] = settings.embedded.model_copy(update={"device": args.device})
    if args.triton_url:
        moved = [
            _external(m, args.triton_url, settings.embedded.tokenizers_dir) for m in settings.models
        ]
        updates["models"] = [m for m in moved if m is not None]
        updates["embedded"] = settings.embedded.model_copy(update={"enabled": False})
    return Settings.model_validate({**settings.model_dump(), **updates})


def _configuration_error(exc: Exception) -> int:
    """The documented ``mmgw: configuration error: ...`` and exit status 2."""
    detail = explain(exc) if isinstance(exc, ValidationError) else str(exc)
    print(f"mmgw: configuration error: {detail}", file=sys.stderr)
    return 2


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    repository = bool(argv) and argv[0] == "trtllm-repo"
    args = _parser(repository).parse_args(argv)
    if args.command == "trtllm-repo":
        from server_repo.trtllm import cli as trtllm_cli

        return trtllm_cli.run(args)
    ignored = unknown_variables(Settings, os.environ)
    try:
        settings = settings_from_args(args)
    except (ValueError, FileNotFoundError) as exc:
        for warning in ignored:
            print(f"mmgw: warning: {warning}", file=sys.stderr)
        return _configuration_error(exc)
    configure_logging(settings.observability.log_format, args.log_level)
    for warning in ignored:
        log.warning(warning)
    workers = worker_count(settings.server.workers)
    if workers > 1:
        return supervise(settings, workers, args.log_level)
    import uvicorn

    from gateway.app import create_app
    from gateway.drain import draining_server

    app = create_app(settings)
    options = uvicorn_options(settings, app, args.log_level)
    drain_s = settings.server.drain_timeout_s
    model_ids = [model.id for model in settings.models]

    def announce(address: tuple[str, int]) -> None:
        log.info(ready_line(address_url(address), model_ids))

    server = draining_server(uvicorn.Config(app, **options), app.state.drain, drain_s, announce)
    # uvicorn raises the Ctrl+C it deferred once it has shut down; the stop was clean.
    with contextlib.suppress(KeyboardInterrupt):
        server.run()
    return 0 if server.started else STARTUP_FAILED


if __name__ == "__main__":
    sys.exit(main())
