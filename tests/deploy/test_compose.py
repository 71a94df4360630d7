"""docker-compose.yml, deploy/Dockerfile and the Triton launch script, checked without Docker:
the compose file is interpolated as Compose does and validated against the Compose
Specification's JSON schema (vendored by the check-jsonschema package), then its structure
is checked; the launch script is run with DRY_RUN=1."""

from __future__ import annotations

import importlib.resources
import json
import os
import re
import shlex
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from gateway.config import load_settings

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"
ENV = {
    "MODELS_DIR": "/srv/models",
    "TRITON_MODEL_REPO": "/srv/models/triton_repo",
    "POSTGRES_PASSWORD": "s3cret",
}
VARIABLE = re.compile(r"\$\{(?P<name>[A-Z0-9_]+)(?:(?P<op>:?[-?])(?P<arg>[^}]*))?\}")


def interpolate(value: Any, env: dict[str, str]) -> Any:
    """Compose's ${VAR}, ${VAR:-default}, ${VAR-default}, ${VAR:?error} substitution."""
    if isinstance(value, dict):
        return {k: interpolate(v, env) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, env) for v in value]
    if not isinstance(value, str):
        return value

    def substitute(match: re.Match[str]) -> str:
        name, op, arg = match["name"], match["op"], match["arg"]
        present = env.get(name)
        if op in (":-", ":?") and not present:
            present = None
        if present is not None:
            return present
        if op in (":?", "?"):
            raise ValueError(f"{name}: {arg}")
        return arg if op in (":-", "-") else ""

    return VARIABLE.sub(substitute, value)


def compose(env: dict[str, str] | None = None) -> dict[str, Any]:
    return interpolate(yaml.safe_load(COMPOSE.read_text()), env if env is not None else ENV)


def compose_schema() -> dict[str, Any]:
    vendor = importlib.resources.files("check_jsonschema.builtin_schemas.vendor")
    return json.loads(vendor.joinpath("compose-spec.json").read_text())


def test_compose_file_matches_the_compose_specification() -> None:
    schema = compose_schema()
    validator = jsonschema.validators.validator_for(schema)(schema)
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(compose())]
    assert not errors, errors


def test_schema_check_catches_mistakes() -> None:
    broken = compose()
    broken["services"]["triton"]["deploy"]["resources"]["reservations"]["gpus"] = 1
    schema = compose_schema()
    assert list(jsonschema.validators.validator_for(schema)(schema).iter_errors(broken))


def test_required_variables_are_named() -> None:
    with pytest.raises(ValueError, match="TRITON_MODEL_REPO"):
        compose({"MODELS_DIR": "/m", "POSTGRES_PASSWORD": "p"})
    with pytest.raises(ValueError, match="MODELS_DIR"):
        compose({"TRITON_MODEL_REPO": "/m/r", "POSTGRES_PASSWORD": "p"})
    with pytest.raises(ValueError, match="POSTGRES_PASSWORD"):
        compose({"MODELS_DIR": "/m", "TRITON_MODEL_REPO": "/m/r"})


def test_triton_service() -> None:
    triton = compose({**ENV, "TRITON_VERSION": "25.03", "TRITON_WORLD_SIZE": "2"})["services"][
        "triton"
    ]
    assert triton["image"] == "nvcr.io/nvidia/tritonserver:25.03-trtllm-python-py3"
    (gpus,) = triton["deploy"]["resources"]["reservations"]["devices"]
    assert gpus["driver"] == "nvidia" and gpus["capabilities"] == ["gpu"]
    assert gpus["count"] == "2" == triton["environment"]["TRITON_WORLD_SIZE"]
    assert triton["environment"]["TRITON_MODEL_REPO"] == ENV["TRITON_MODEL_REPO"]
    assert "/srv/models:/srv/models:ro" in triton["volumes"]
    launch = next(v for v in triton["volumes"] if v.endswith(":/opt/mmgw/launch.sh:ro"))
    assert (ROOT / launch.split(":")[0]).is_file()
    assert triton["command"] == ["bash", "/opt/mmgw/launch.sh"]
    assert "/v2/health/ready" in " ".join(triton["healthcheck"]["test"])


def test_gateway_services() -> None:
    services = compose()["services"]
    gateway = services["gateway"]
    assert gateway["build"] == {
        "context": ".",
        "dockerfile": "deploy/Dockerfile",
        "target": "gateway",
    }
    assert gateway["depends_on"] == {
        "triton": {"condition": "service_healthy"},
        "postgres": {"condition": "service_healthy"},
    }
    assert gateway["command"] == [
        "serve",
        "--host",
        "0.0.0.0",
        "--config",
        "/etc/mmgw/gateway.toml",
    ]
    config = gateway["volumes"][0].split(":")[0]
    settings = load_settings(ROOT / config)
    assert settings.models[0].triton_url == "triton:8001" and not settings.needs_embedded
    cpu = services["gateway-cpu"]
    assert cpu["profiles"] == ["cpu"] and cpu["build"]["target"] == "embedded"
    assert cpu["depends_on"] == {"postgres": {"condition": "service_healthy"}}
    assert "--config" not in cpu["command"]
    assert "profiles" not in gateway and "profiles" not in services["triton"]


def dockerfile_stages() -> dict[str, str]:
    text = (ROOT / "deploy" / "Dockerfile").read_text()
    parts = re.split(r"^FROM (\S+) AS (\S+)\n", text, flags=re.M)
    return {parts[i + 1]: f"FROM {parts[i]}\n{parts[i + 2]}" for i in range(1, len(parts), 3)}


def test_dockerfile_targets() -> None:
    stages = dockerfile_stages()
    assert list(stages)[-1] == "gateway"  # a plain `docker build` gives the slim image
    assert stages["runtime"].startswith("FROM python:${PYTHON_VERSION}-slim")
    assert "useradd" in stages["runtime"]
    for target in ("gateway", "embedded"):
        assert "USER mmgw" in stages[target]
    assert re.search(r"pip install /tmp/src\n", stages["gateway"])  # the base install only
    assert "torch" not in stages["gateway"]
    assert "/tmp/src[embedded]" in stages["embedded"]


def launch(**env: str) -> list[str]:
    result = subprocess.run(
        ["bash", str(ROOT / "deploy" / "triton" / "launch.sh")],
        env={"PATH": os.environ["PATH"], "DRY_RUN": "1", **env},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return shlex.split(result.stdout)


def test_launch_script_flags() -> None:
    subprocess.run(["bash", "-n", str(ROOT / "deploy" / "triton" / "launch.sh")], check=True)
    argv = launch(TRITON_MODEL_REPO="/m/repo", TRITON_WORLD_SIZE="4")
    flags = {argv[i]: argv[i + 1] for i in range(2, len(argv), 2)}
    assert argv[:2] == ["python3", "/app/scripts/launch_triton_server.py"]
    assert flags["--world_size"] == "4" and flags["--model_repo"] == "/m/repo"
    assert flags["--tensorrt_llm_model_name"] == "tensorrt_llm,multimodal_encoders"
    assert flags["--multimodal_gpu0_cuda_mem_pool_bytes"] == "300000000"
    whisper = launch(TRITON_MODEL_REPO="/m", TRITON_LLM_MODEL_NAMES="tensorrt_llm,whisper_bls")
    assert "tensorrt_llm,whisper_bls" in whisper


def test_launch_script_needs_the_repository() -> None:
    result = subprocess.run(
        ["bash", str(ROOT / "deploy" / "triton" / "launch.sh")],
        env={"PATH": os.environ["PATH"], "DRY_RUN": "1"},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert result.returncode != 0 and "TRITON_MODEL_REPO" in result.stderr


def test_every_gateway_shares_the_postgres_store_on_a_read_only_root(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Stored responses live in the postgres service (one password for both sides), so the
    gateway writes nothing outside its tmpfs and several gateway containers share them."""
    services = compose()["services"]
    postgres = services["postgres"]
    assert postgres["image"] == "postgres:16"
    assert postgres["environment"]["POSTGRES_PASSWORD"] == ENV["POSTGRES_PASSWORD"]
    assert "pg_isready" in postgres["healthcheck"]["test"]
    assert any(v.endswith(":/var/lib/postgresql/data") for v in postgres["volumes"])
    gateway = services["gateway"]
    assert gateway["read_only"] is True and gateway["tmpfs"] == ["/tmp"]
    for name in ("gateway", "gateway-cpu"):
        url = services[name]["environment"]["MMGW_RESPONSES__STORE_URL"]
        assert url == "postgresql://mmgw:s3cret@postgres:5432/mmgw"
        monkeypatch.setenv("MMGW_RESPONSES__STORE_URL", url)
        config = ROOT / services["gateway"]["volumes"][0].split(":")[0]
        assert load_settings(config).responses.store_url == url
    user = postgres["environment"]
    assert (user["POSTGRES_USER"], user["POSTGRES_DB"]) == ("mmgw", "mmgw")
