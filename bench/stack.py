"""The system under test: Triton over the bench model repository, and the gateway in front.

Triton is the project's own ``EmbeddedTriton`` over ``server_repo/bench_models`` (only the
``loadgen_ensemble`` fixture); the gateway is the real ``mmgw serve`` in its own process, so
its CPU time and memory can be read from ``/proc`` and it can be pinned to one core.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path

import httpx

from bench.procs import Service, free_port, start_service, wait_for_http
from gateway.triton.embedded import EmbeddedTriton

REPO_ROOT = Path(__file__).resolve().parent.parent
BENCH_REPOSITORY = REPO_ROOT / "server_repo" / "bench_models"
BENCH_MODEL = "loadgen_ensemble"
SERVED_ID = "loadgen"
# A fixed key both proxies require, so each pays for authentication as deployed.
API_KEY = "sk-bench-0123456789abcdef0123456789abcdef"
AUTH_HEADER = ("Authorization", f"Bearer {API_KEY}")


async def start_triton() -> EmbeddedTriton:
    """The co-launched tritonserver serving only the bench fixture; its models run in the
    interpreter named by ``MMGW_EMBEDDED__PYTHON``, as the gateway's would."""
    python = os.environ.get("MMGW_EMBEDDED__PYTHON")
    triton = EmbeddedTriton(
        BENCH_REPOSITORY,
        models=[BENCH_MODEL],
        ready_timeout_s=300,
        python=Path(python) if python else None,
    )
    await triton.start()
    return triton


async def set_token_interval(
    triton: EmbeddedTriton, interval_us: int, delay_us: int = 0, instances: int = 1
) -> None:
    """Reload the fixture with another token pace (Triton's load API, config override).

    ``instances``: fixture copies, each its own stub process and pacer thread; one sends
    about 10,000 tokens/s, so a host with cores to spare needs several to saturate a proxy.
    """
    url = f"{triton.http_url}/v2"
    async with httpx.AsyncClient(timeout=120, trust_env=False) as http:
        config = (await http.get(f"{url}/models/{BENCH_MODEL}/config")).json()
        params = config.setdefault("parameters", {})
        params["token_interval_us"] = {"string_value": str(interval_us)}
        params["first_token_delay_us"] = {"string_value": str(delay_us)}
        config["instance_group"] = [{"count": instances, "kind": "KIND_CPU"}]
        body = {"parameters": {"config": json.dumps(config)}}
        response = await http.post(f"{url}/repository/models/{BENCH_MODEL}/load", json=body)
        response.raise_for_status()


def gateway_config(triton: EmbeddedTriton, port: int, max_in_flight: int, workers: int = 1) -> str:
    """A TOML config serving the fixture as model ``loadgen`` (LLaVA family prompt and images)."""
    worker_line = f"workers = {workers}\n" if workers > 1 else ""  # older checkouts lack it
    return f"""api_keys = ["{API_KEY}"]

[server]
host = "127.0.0.1"
port = {port}
max_in_flight = {max_in_flight}
{worker_line}
[embedded]
enabled = false

[[models]]
id = "{SERVED_ID}"
family = "llava"
triton_model = "{BENCH_MODEL}"
triton_url = "{triton.grpc_url}"
end_id = "server"
"""


def start_floor(
    triton: EmbeddedTriton, workdir: Path, cpus: set[int] | None, workers: int = 1
) -> Service:
    """``bench/floor.py`` (the stack's own cost per token, nothing of the gateway's) with
    ``workers`` processes, pinned to ``cpus`` as the gateway is."""
    port = free_port()
    command = [sys.executable, "-m", "bench.floor", "--port", str(port),
               "--triton", triton.grpc_url, "--model", BENCH_MODEL,
               "--workers", str(workers)]  # fmt: skip
    service = start_service("floor", command, port, workdir.resolve() / "floor.log", cpus)
    wait_for_http(service, ["/health"], timeout_s=60)
    return service


def start_gateway(
    triton: EmbeddedTriton,
    workdir: Path,
    cpus: set[int] | None,
    max_in_flight: int = 4096,
    log_level: str = "info",
    port: int = 0,
    source: Path | None = None,
    workers: int = 1,
    config_text: Callable[[int], str] | None = None,
) -> Service:
    """``mmgw serve`` in its own process, pinned to ``cpus``, ready when /health says so.

    ``source``: run the gateway package of another checkout (a ``git worktree`` of an older
    commit), for before/after runs under the same conditions. ``config_text``: the TOML for
    the chosen port, instead of ``gateway_config``'s (another served model).
    """
    port = port or free_port()
    workdir = workdir.resolve()  # the gateway may run in another folder (``source``)
    config = workdir / "gateway.toml"
    if config_text is None:
        config.write_text(gateway_config(triton, port, max_in_flight, workers))
    else:
        config.write_text(config_text(port))
    command = [sys.executable, "-m", "gateway.cli", "serve", "--config", str(config)]
    # The bench starts Triton itself; the gateway must not see the models' interpreter
    # (an older gateway under --gateway-source would refuse the unknown setting).
    env: dict[str, str] | None = {
        k: v for k, v in os.environ.items() if k != "MMGW_EMBEDDED__PYTHON"
    }
    if source is not None:
        # The other checkout first, the rest of the path kept (installed-by-path deps).
        path = [str(source.resolve()), os.environ.get("PYTHONPATH", "")]
        env = dict(env, PYTHONPATH=os.pathsep.join(p for p in path if p))
    service = start_service(
        "gateway",
        [*command, "--log-level", log_level],
        port,
        workdir / "gateway.log",
        cpus,
        env,
        cwd=source,
    )
    wait_for_http(service, ["/health"], timeout_s=120)
    return service
