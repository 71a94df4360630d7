"""deploy/k8s-llmapi: the Kustomize overlay for NVIDIA's llmapi (PyTorch-backend) Triton,
rendered by ``kubectl kustomize`` and validated against the Kubernetes schemas (strict), then
its wiring checked against what ``mmgw trtllm-repo --backend llmapi`` writes."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import tomllib
import yaml

from gateway.cli import main
from tests.deploy.test_k8s import KUBERNETES_VERSIONS, ROOT, by_kind, container
from tests.server_repo.nvidia_llmapi import write_llmapi_checkout
from tests.server_repo.trtllm.test_llmapi import hf_folder

OVERLAY = ROOT / "deploy" / "k8s-llmapi"

pytestmark = pytest.mark.skipif(shutil.which("kubectl") is None, reason="needs kubectl")


@pytest.fixture(scope="module")
def objects() -> list[dict[str, Any]]:
    result = subprocess.run(
        ["kubectl", "kustomize", str(OVERLAY)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "KUBECONFIG": os.devnull},
    )
    assert result.returncode == 0, result.stderr
    return [d for d in yaml.safe_load_all(result.stdout) if d]


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_rendered_objects_match_the_kubernetes_schemas(
    objects: list[dict[str, Any]], version: str
) -> None:
    assert len(objects) == 13
    for obj in objects:
        kubernetes_validate.validate(obj, version, strict=True)


def test_triton_is_launched_through_trtllm_llmapi_launch(objects: list[dict[str, Any]]) -> None:
    main_container = container(by_kind(objects, "StatefulSet", "triton"))
    assert main_container["image"] == "nvcr.io/nvidia/tritonserver:26.07-trtllm-python-py3"
    assert main_container["command"][:3] == [
        "trtllm-llmapi-launch", "tritonserver", "--model-repository=$(TRITON_MODEL_REPO)",
    ]  # fmt: skip
    assert main_container["env"] == [{"name": "TRITON_MODEL_REPO", "value": "/models/triton_repo"}]
    mounts = {m["name"]: m["mountPath"] for m in main_container["volumeMounts"]}
    assert mounts["models"] == "/models"


def test_the_gateway_reads_the_model_folder_the_tool_names(
    objects: list[dict[str, Any]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    models = tmp_path / "models"
    hf_folder(models / "Qwen2.5-VL-3B-Instruct")
    write_llmapi_checkout(tmp_path / "TensorRT-LLM")
    code = main([
        "trtllm-repo", "--backend", "llmapi", "--templates", str(tmp_path / "TensorRT-LLM"),
        "--model", str(models / "Qwen2.5-VL-3B-Instruct"), "--output", str(models / "triton_repo"),
        "--path-map", f"{models}=/models",
        "--triton-url", "dns:///triton.mmgw.svc.cluster.local:8001",
    ])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    written = tomllib.loads((models / "gateway.toml").read_text())["models"][0]
    config = by_kind(objects, "ConfigMap", "gateway-config")
    assert tomllib.loads(config["data"]["gateway.toml"])["models"][0] == written
    gateway = by_kind(objects, "Deployment", "gateway")
    mounts = {m["name"]: m for m in container(gateway)["volumeMounts"]}
    assert Path(written["tokenizer"]).is_relative_to(mounts["models"]["mountPath"])
    volumes = {v["name"]: v for v in gateway["spec"]["template"]["spec"]["volumes"]}
    assert volumes["models"]["persistentVolumeClaim"]["claimName"] == "trtllm-models"
