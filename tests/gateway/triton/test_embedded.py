"""The launcher against the real tritonserver: readiness, loopback ports, restart on death."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import site
import subprocess
import sys
import sysconfig
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


def new_venv(venv: Path) -> tuple[Path, Path]:
    """A venv of this interpreter's version with no packages: (its python, its site-packages)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site_dir = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    return python, Path(site_dir)


def running_site_dirs() -> list[str]:
    """The site directories of the environment running the tests (a venv's own, not its
    base interpreter's unless it was made with ``--system-site-packages``)."""
    paths = sysconfig.get_paths()
    found = [paths["purelib"], paths["platlib"], *site.getsitepackages()]
    if site.ENABLE_USER_SITE:
        found.append(site.getusersitepackages())
    return [path for path in dict.fromkeys(found) if Path(path).is_dir()]


def venv_over_this_environment(venv: Path) -> tuple[Path, Path]:
    """A venv that sees its own site-packages first, then exactly the packages of the
    environment running the tests: (its python, its site-packages).

    Not ``--system-site-packages``: run from a venv, that exposes the *base* interpreter's
    site-packages (which may hold NumPy 2, and lack the project), not the running
    environment's. A ``.pth`` adds the running environment's site directories instead, with
    ``site.addsitedir`` so that their own ``.pth`` files (editable installs) count too.
    """
    python, site_dir = new_venv(venv)
    # One line, exec'd by site.py: no comprehension (its scope would not see ``site``).
    line = f"import site; list(map(site.addsitedir, {running_site_dirs()!r}))\n"
    (site_dir / "running_environment.pth").write_text(line)
    return python, site_dir


def venv_with_numpy(tmp_path: Path, version: str) -> Path:
    """A real venv whose ``numpy`` reports ``version`` (a stand-in package: installing
    NumPy 2 would need the network)."""
    python, site_dir = new_venv(tmp_path / "models-venv")
    (site_dir / "numpy").mkdir(parents=True)
    (site_dir / "numpy" / "__init__.py").write_text(f"__version__ = {version!r}\n")
    return python


def test_a_venv_over_this_environment_sees_its_packages_not_the_base_interpreters(
    tmp_path: Path,
) -> None:
    import numpy

    python, _ = venv_over_this_environment(tmp_path / "venv")
    probe = "import json, sys, numpy; print(json.dumps([numpy.__version__, sys.path]))"
    found = subprocess.run([str(python), "-c", probe], capture_output=True, text=True, check=True)
    numpy_version, path = json.loads(found.stdout)
    assert numpy_version == numpy.__version__  # this environment's NumPy, whatever the base has
    assert StubPython.at(python).refusal() is None
    for site_dir in running_site_dirs():
        assert site_dir in path
    # The base interpreter's site-packages only where the running environment has it too.
    base = sysconfig.get_paths(vars={"base": sys.base_prefix, "platbase": sys.base_prefix})
    assert (base["purelib"] in path) == (base["purelib"] in sys.path)


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
    # Outside the model repository; the stub's NumPy comes from the running environment.
    venv = tmp_path_factory.mktemp("envs") / "models-venv"
    python, site_dir = venv_over_this_environment(venv)
    (site_dir / "only_in_models_venv.py").write_text("OFFSET = 1000\n")
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
