"""deploy/k8s: rendered as Kustomize would (resources, namespace, labels, images), each
object validated against the Kubernetes OpenAPI-derived JSON schemas shipped offline by the
kubernetes-validate package (strict: unknown fields fail), then the wiring is checked."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import kubernetes_validate
import pytest
import yaml

from gateway.config import load_settings
from gateway.triton.replicas import parse_dns

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "deploy" / "k8s"
KUBERNETES_VERSIONS = ("1.30.0", "1.33.0")
CLUSTER_SCOPED = {"Namespace", "PersistentVolume", "ClusterRole", "ClusterRoleBinding"}


def _retag(containers: list[dict[str, Any]], images: list[dict[str, str]]) -> None:
    for container in containers:
        name = container["image"].split("@")[0].rsplit(":", 1)[0]
        for rule in images:
            if rule["name"] == name:
                tag = rule.get("newTag", container["image"].rsplit(":", 1)[-1])
                container["image"] = f"{rule.get('newName', name)}:{tag}"


def render(directory: Path = K8S) -> list[dict[str, Any]]:
    """kustomization.yaml's resources with its namespace, labels and images applied."""
    kustomization = yaml.safe_load((directory / "kustomization.yaml").read_text())
    objects: list[dict[str, Any]] = []
    for resource in kustomization["resources"]:
        objects += [d for d in yaml.safe_load_all((directory / resource).read_text()) if d]
    labels: dict[str, str] = {}
    for entry in kustomization.get("labels", []):
        labels |= entry["pairs"]
    for obj in objects:
        metadata = obj.setdefault("metadata", {})
        if obj["kind"] not in CLUSTER_SCOPED and "namespace" in kustomization:
            metadata["namespace"] = kustomization["namespace"]
        metadata["labels"] = {**metadata.get("labels", {}), **labels}
        pod = obj.get("spec", {}).get("template", {}).get("spec", {})
        _retag(
            pod.get("containers", []) + pod.get("initContainers", []),
            kustomization.get("images", []),
        )
    return objects


def by_kind(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    (found,) = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    return found


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_rendered_objects_match_the_kubernetes_schemas(version: str) -> None:
    objects = render()
    assert len(objects) == 13
    for obj in objects:
        kubernetes_validate.validate(obj, version, strict=True)


def test_schema_validation_catches_mistakes() -> None:
    deployment = by_kind(render(), "Deployment", "gateway")
    deployment["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["httpGet"]["url"] = (
        "/"
    )
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, KUBERNETES_VERSIONS[0], strict=True)


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_our_rendering_equals_kubectl_kustomize() -> None:
    result = subprocess.run(
        ["kubectl", "kustomize", str(K8S)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "KUBECONFIG": os.devnull},
    )
    assert result.returncode == 0, result.stderr
    theirs = [d for d in yaml.safe_load_all(result.stdout) if d]

    def key(obj: dict[str, Any]) -> tuple[str, str]:
        return obj["kind"], obj["metadata"]["name"]

    assert sorted(theirs, key=key) == sorted(render(), key=key)


def container(obj: dict[str, Any]) -> dict[str, Any]:
    (only,) = obj["spec"]["template"]["spec"]["containers"]
    return only


def test_triton_statefulset() -> None:
    objects = render()
    triton = by_kind(objects, "StatefulSet", "triton")
    main = container(triton)
    assert main["image"] == "nvcr.io/nvidia/tritonserver:25.01-trtllm-python-py3"
    resources = main["resources"]
    assert resources["limits"]["nvidia.com/gpu"] == resources["requests"]["nvidia.com/gpu"]
    env = {e["name"]: e["value"] for e in main["env"]}
    assert int(env["TRITON_WORLD_SIZE"]) == resources["limits"]["nvidia.com/gpu"]
    assert main["readinessProbe"]["httpGet"]["path"] == "/v2/health/ready"
    assert main["livenessProbe"]["httpGet"]["path"] == "/v2/health/live"
    assert main["startupProbe"]["httpGet"]["path"] == "/v2/health/ready"
    service = by_kind(objects, "Service", triton["spec"]["serviceName"])
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["selector"] == triton["spec"]["template"]["metadata"]["labels"]
    assert {p["port"] for p in service["spec"]["ports"]} == {8000, 8001, 8002}
    volumes = {v["name"]: v for v in triton["spec"]["template"]["spec"]["volumes"]}
    claim = volumes["models"]["persistentVolumeClaim"]["claimName"]
    by_kind(objects, "PersistentVolumeClaim", claim)
    launch = by_kind(objects, "ConfigMap", volumes["launch"]["configMap"]["name"])
    assert launch["data"]["launch.sh"] == (ROOT / "deploy" / "triton" / "launch.sh").read_text()


def test_gateway_deployment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    objects = render()
    gateway = by_kind(objects, "Deployment", "gateway")
    main = container(gateway)
    assert main["args"] == ["serve", "--host", "0.0.0.0", "--config", "/etc/mmgw/gateway.toml"]
    assert main["readinessProbe"]["httpGet"]["path"] == "/health"
    assert gateway["spec"]["template"]["spec"]["securityContext"]["runAsNonRoot"] is True
    service = by_kind(objects, "Service", "gateway")
    assert service["spec"]["selector"] == gateway["spec"]["template"]["metadata"]["labels"]
    hpa = by_kind(objects, "HorizontalPodAutoscaler", "gateway")
    assert hpa["spec"]["scaleTargetRef"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": "gateway",
    }
    assert "cpu" in main["resources"]["requests"]  # the HPA's utilisation needs a request
    volumes = {v["name"]: v for v in gateway["spec"]["template"]["spec"]["volumes"]}
    config = by_kind(objects, "ConfigMap", volumes["config"]["configMap"]["name"])
    (tmp_path / "gateway.toml").write_text(config["data"]["gateway.toml"])
    secret = by_kind(objects, "Secret", main["envFrom"][0]["secretRef"]["name"])
    for name, value in secret["stringData"].items():
        monkeypatch.setenv(name, value)
    settings = load_settings(tmp_path / "gateway.toml")
    assert settings.api_keys == ("replace-me-with-a-long-random-key",)
    # Every replica behind the StatefulSet's headless Service, by DNS.
    statefulset = by_kind(objects, "StatefulSet", "triton")
    target = parse_dns(str(settings.models[0].triton_url))
    namespace = statefulset["metadata"]["namespace"]
    assert target.host == f"{statefulset['spec']['serviceName']}.{namespace}.svc.cluster.local"
    assert target.port == 8001


def test_everything_lands_in_one_namespace() -> None:
    objects = render()
    (namespace,) = [o for o in objects if o["kind"] == "Namespace"]
    names = {o["metadata"].get("namespace") for o in objects if o["kind"] != "Namespace"}
    assert names == {namespace["metadata"]["name"]}
    assert all(o["metadata"]["labels"]["app.kubernetes.io/part-of"] for o in objects)


def test_every_gateway_pod_shares_the_postgres_store(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The URL comes from the Secret, names the postgres Service in the namespace with the
    password the database is given, and the gateway's root file system stays read-only."""
    objects = render()
    gateway = container(by_kind(objects, "Deployment", "gateway"))
    assert gateway["securityContext"]["readOnlyRootFilesystem"] is True
    (url_env,) = [e for e in gateway["env"] if e["name"] == "MMGW_RESPONSES__STORE_URL"]
    ref = url_env["valueFrom"]["secretKeyRef"]
    secret = by_kind(objects, "Secret", ref["name"])["stringData"]
    url = urlsplit(secret[ref["key"]])
    postgres = by_kind(objects, "StatefulSet", "postgres")
    service = by_kind(objects, "Service", postgres["spec"]["serviceName"])
    namespace = postgres["metadata"]["namespace"]
    assert url.scheme == "postgresql"
    assert url.hostname == f"{service['metadata']['name']}.{namespace}.svc.cluster.local"
    assert url.port == service["spec"]["ports"][0]["port"] == 5432
    assert service["spec"]["selector"] == postgres["spec"]["template"]["metadata"]["labels"]
    database = container(postgres)
    env = {e["name"]: e for e in database["env"]}
    password = env["POSTGRES_PASSWORD"]["valueFrom"]["secretKeyRef"]
    assert password["name"] == ref["name"] and url.password == secret[password["key"]]
    assert (url.username, url.path) == (env["POSTGRES_USER"]["value"], "/mmgw")
    assert database["securityContext"]["readOnlyRootFilesystem"] is True
    (claim,) = postgres["spec"]["volumeClaimTemplates"]
    mounts = {m["name"]: m["mountPath"] for m in database["volumeMounts"]}
    assert mounts[claim["metadata"]["name"]] == "/var/lib/postgresql/data"
    assert env["PGDATA"]["value"].startswith(mounts[claim["metadata"]["name"]] + "/")
    config = by_kind(objects, "ConfigMap", "gateway-config")
    (tmp_path / "gateway.toml").write_text(config["data"]["gateway.toml"])
    monkeypatch.setenv("MMGW_RESPONSES__STORE_URL", secret[ref["key"]])
    assert load_settings(tmp_path / "gateway.toml").responses.store_url == secret[ref["key"]]
