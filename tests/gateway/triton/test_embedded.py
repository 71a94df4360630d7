"""The launcher against the real tritonserver: readiness, loopback ports, restart on death."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from gateway.errors import UpstreamUnavailable
from gateway.triton.embedded import EmbeddedTriton, StubPython, TritonInstall

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


def test_another_interpreter_is_probed_like_this_one() -> None:
    assert StubPython.at(Path(sys.executable)) == StubPython.current()
    assert StubPython.current().refusal() is None  # the project pins numpy<2


def venv_with_numpy(tmp_path: Path, version: str) -> Path:
    """A real venv whose ``numpy`` reports ``version`` (a stand-in package: installing
    NumPy 2 would need the network)."""
    venv = tmp_path / "models-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    (Path(site) / "numpy").mkdir(parents=True)
    (Path(site) / "numpy" / "__init__.py").write_text(f"__version__ = {version!r}\n")
    return python


async def test_models_environment_with_numpy_2_is_refused_before_launch(
    identity_repository: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    python = venv_with_numpy(tmp_path_factory.mktemp("envs"), "2.1.3")
    assert StubPython.at(python).numpy == "2.1.3"
    server = EmbeddedTriton(identity_repository, ready_timeout_s=30, python=python)
    with pytest.raises(UpstreamUnavailable, match=r"NumPy 2\.1\.3.*embedded\.python"):
        await server.start()
    assert server.pid is None  # refused before any tritonserver was started


async def test_models_run_in_the_named_environment(
    identity_repository: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The stub imports from ``embedded.python``'s environment, not the gateway's."""
    venv = tmp_path_factory.mktemp("envs") / "models-venv"  # outside the model repository
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(venv)],
        check=True,
    )
    python = venv / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    (Path(site) / "only_in_models_venv.py").write_text("OFFSET = 1000\n")
    model = identity_repository / "identity" / "1" / "model.py"
    model.write_text(
        IDENTITY_MODEL.replace(
            'get_input_tensor_by_name(r, "IN").as_numpy()',
            'get_input_tensor_by_name(r, "IN").as_numpy() + only_in_models_venv.OFFSET',
        ).replace(
            "import triton_python_backend_utils",
            "import only_in_models_venv\nimport triton_python_backend_utils",
        )
    )
    server = EmbeddedTriton(identity_repository, ready_timeout_s=120, python=python)
    await server.start()
    try:
        body = {"inputs": [{"name": "IN", "shape": [1], "datatype": "INT32", "data": [7]}]}
        async with httpx.AsyncClient(trust_env=False, timeout=30) as http:
            answer = await http.post(f"{server.http_url}/v2/models/identity/infer", json=body)
        assert answer.status_code == 200, answer.text
        assert answer.json()["outputs"][0]["data"] == [1007]
    finally:
        await server.stop()


async def test_models_environment_that_is_not_python_is_refused(
    identity_repository: Path, tmp_path: Path
) -> None:
    server = EmbeddedTriton(identity_repository, python=tmp_path / "no-such-python")
    with pytest.raises(UpstreamUnavailable, match="not a working Python"):
        await server.start()


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
