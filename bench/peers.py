"""Peers measured beside the gateway, each in its own virtual environment under ``build/bench``.

Why separate environments: ``litellm[proxy]`` and ``aiperf`` pin older ``huggingface_hub``,
``openai`` and ``rich`` than this project's environment holds (checked with
``pip install --dry-run``); installed side by side they would downgrade what transformers and
the tests use. ``build/`` is git-ignored; the first run creates the environment (network
needed once), later runs reuse it.

LiteLLM runs as its proxy server with its ``triton`` provider against Triton's
``generate`` endpoint: it streams through ``generate_stream`` (it puts ``max_tokens`` under
``parameters``, which Triton's generate extension maps to the input of that name), so it
stands in front of the very same Triton and model as the gateway.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from bench.procs import Service, free_port, say, start_service, wait_for_http
from bench.stack import API_KEY, BENCH_MODEL, REPO_ROOT, SERVED_ID

VENVS = REPO_ROOT / "build" / "bench"
LITELLM_REQUIREMENT = "litellm[proxy]==1.106.2"
AIPERF_REQUIREMENT = "aiperf==0.13.0"


def ensure_venv(name: str, requirement: str) -> Path:
    """``build/bench/<name>-venv`` with ``requirement`` installed; its ``bin`` folder."""
    venv = VENVS / f"{name}-venv"
    marker = venv / ".installed"
    if marker.is_file() and marker.read_text() == requirement:
        return venv / "bin"
    say(f"creating {venv} with {requirement} (once; needs the package index) ...")
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run(
        [str(venv / "bin" / "pip"), "install", "--quiet", requirement],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    marker.write_text(requirement)
    return venv / "bin"


def litellm_config(triton_http_url: str) -> str:
    return f"""model_list:
  - model_name: {SERVED_ID}
    litellm_params:
      model: triton/{BENCH_MODEL}
      api_base: {triton_http_url}/v2/models/{BENCH_MODEL}/generate
"""


def start_litellm(triton_http_url: str, workdir: Path, cpus: set[int] | None) -> Service:
    """LiteLLM's proxy (one worker, its defaults otherwise) in front of Triton's generate."""
    bin_dir = ensure_venv("litellm", LITELLM_REQUIREMENT)
    config = workdir / "litellm.yaml"
    config.write_text(litellm_config(triton_http_url))
    port = free_port()
    env = dict(
        os.environ,
        LITELLM_MASTER_KEY=API_KEY,
        LITELLM_LOCAL_MODEL_COST_MAP="True",  # no fetch of the price list at start-up
        LITELLM_TELEMETRY="False",
    )
    command = [
        str(bin_dir / "litellm"),
        "--config",
        str(config),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--num_workers",
        "1",
    ]
    service = start_service("litellm", command, port, workdir / "litellm.log", cpus, env)
    wait_for_http(service, ["/health/liveliness"], timeout_s=300)
    return service
