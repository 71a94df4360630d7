"""docker-compose.llmapi.yml laid over docker-compose.yml as ``docker compose -f ... -f ...``
merges them (Compose's merge rules for the keys it uses), checked without Docker: the result
validates against the Compose Specification and launches what ``mmgw trtllm-repo --backend
llmapi`` printed for the same folders."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from gateway.cli import main
from tests.deploy.test_compose import COMPOSE, ROOT, compose_schema, interpolate
from tests.server_repo.nvidia_llmapi import write_llmapi_checkout
from tests.server_repo.trtllm.test_llmapi import hf_folder

OVERRIDE = ROOT / "docker-compose.llmapi.yml"


def _target(volume: str) -> str:
    return volume.split(":")[1]


def merge(base: Any, override: Any, key: str = "") -> Any:
    """Compose's merge: mappings key by key, ``command`` replaced, ``volumes`` by target."""
    if isinstance(base, dict) and isinstance(override, dict):
        merged = dict(base)
        for name, value in override.items():
            merged[name] = merge(base[name], value, name) if name in base else value
        return merged
    if key == "volumes" and isinstance(base, list):
        kept = [v for v in base if _target(v) not in {_target(o) for o in override}]
        return kept + list(override)
    return override


def merged(env: dict[str, str]) -> dict[str, Any]:
    files = [yaml.safe_load(path.read_text()) for path in (COMPOSE, OVERRIDE)]
    return interpolate(merge(*files), env)


def tool_env(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[dict[str, str], str]:
    """The .env and the launch line of a real run over /srv/models (a --path-map)."""
    models = tmp_path / "models"
    hf_folder(models / "Qwen2.5-VL-3B-Instruct")
    write_llmapi_checkout(tmp_path / "TensorRT-LLM")
    env_file = tmp_path / ".env"
    code = main([
        "trtllm-repo", "--backend", "llmapi", "--templates", str(tmp_path / "TensorRT-LLM"),
        "--model", str(models / "Qwen2.5-VL-3B-Instruct"),
        "--output", str(models / "triton_repo"), "--path-map", f"{models}=/srv/models",
        "--env-file", str(env_file),
    ])  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 0, err
    env = dict(line.split("=", 1) for line in env_file.read_text().splitlines())
    launch = next(line.strip() for line in out.splitlines() if "trtllm-llmapi-launch" in line)
    return env, launch


def test_the_llmapi_variant_matches_the_compose_specification(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    env, _ = tool_env(tmp_path, capsys)
    schema = compose_schema()
    validator = jsonschema.validators.validator_for(schema)(schema)
    document = merged({**env, "POSTGRES_PASSWORD": "s3cret"})
    assert not [e.message for e in validator.iter_errors(document)]


def test_triton_runs_what_the_tool_printed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    env, launch = tool_env(tmp_path, capsys)
    services = merged({**env, "POSTGRES_PASSWORD": "s3cret"})["services"]
    triton = services["triton"]
    assert triton["image"] == "nvcr.io/nvidia/tritonserver:26.07-trtllm-python-py3"
    assert triton["command"][:3] == shlex.split(launch)
    assert triton["command"][3:] == ["--http-port=8000", "--grpc-port=8001", "--metrics-port=8002"]
    assert "/srv/models:/srv/models:ro" in triton["volumes"]
    gateway = services["gateway"]
    assert "/srv/models:/srv/models:ro" in gateway["volumes"]  # the tokenizer folder
    assert any(v.endswith(":/etc/mmgw/gateway.toml:ro") for v in gateway["volumes"])
    assert gateway["volumes"][0].split(":")[0] == env["GATEWAY_CONFIG"]
