"""The launcher against the real tritonserver: readiness, loopback ports, restart on death."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import httpx
import pytest

from gateway.triton.embedded import EmbeddedTriton, TritonInstall

IDENTITY_CONFIG = """
name: "identity"
backend: "python"
max_batch_size: 0
input [ { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
"""
IDENTITY_MODEL = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [
            pb_utils.InferenceResponse(
                [pb_utils.Tensor("OUT", pb_utils.get_input_tensor_by_name(r, "IN").as_numpy())]
            )
            for r in requests
        ]
"""


@pytest.fixture
def identity_repository(tmp_path: Path) -> Path:
    model_dir = tmp_path / "identity" / "1"
    model_dir.mkdir(parents=True)
    (tmp_path / "identity" / "config.pbtxt").write_text(IDENTITY_CONFIG)
    (model_dir / "model.py").write_text(IDENTITY_MODEL)
    return tmp_path


def test_install_is_found_with_a_stub_for_this_python() -> None:
    install = TritonInstall.find()
    assert install.binary.name == "tritonserver"
    assert install.stub.parent.name.count(".") == 1


async def test_starts_on_loopback_and_restarts_after_being_killed(
    identity_repository: Path,
) -> None:
    restarts: list[int] = []
    server = EmbeddedTriton(
        identity_repository, ready_timeout_s=120, on_restart=lambda: restarts.append(1)
    )
    await server.start()
    try:
        assert server.ready
        first_pid = server.pid
        async with httpx.AsyncClient(trust_env=False) as http:
            ready = await http.get(f"{server.http_url}/v2/models/identity/ready")
            assert ready.status_code == 200
            assert server.http_url.startswith("http://127.0.0.1:")
            assert first_pid is not None
            os.killpg(first_pid, signal.SIGKILL)
            for _ in range(600):
                if restarts and server.ready:
                    break
                await asyncio.sleep(0.1)
            assert restarts == [1]
            assert server.pid != first_pid
            ready = await http.get(f"{server.http_url}/v2/models/identity/ready")
            assert ready.status_code == 200
    finally:
        await server.stop()
    assert not server.ready


async def test_explicit_models_load_only_those(identity_repository: Path) -> None:
    second = identity_repository / "other"
    (second / "1").mkdir(parents=True)
    (second / "config.pbtxt").write_text(IDENTITY_CONFIG.replace('"identity"', '"other"'))
    (second / "1" / "model.py").write_text(IDENTITY_MODEL)
    server = EmbeddedTriton(identity_repository, ready_timeout_s=120, models=["other"])
    await server.start()
    try:
        async with httpx.AsyncClient(trust_env=False) as http:
            assert (await http.get(f"{server.http_url}/v2/models/other/ready")).status_code == 200
            assert (
                await http.get(f"{server.http_url}/v2/models/identity/ready")
            ).status_code != 200
    finally:
        await server.stop()
