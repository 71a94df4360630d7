"""The launcher against the real tritonserver: readiness, loopback ports, restart on death,
retries of a server that dies before it is ready, and nothing left behind by a failed start."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import site
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway.errors import UpstreamUnavailable
from gateway.triton.embedded import EmbeddedTriton, StubPython, TritonInstall, reap
from tests.triton_procs import SHM, alive, process_group, shm_names

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


# A model whose load goes as ``CRASHY_PLAN`` says, one step per launch of the server (counted
# by the files it writes into ``CRASHY_MARKS``): "hang" starts a helper process, SIGKILLs its
# own tritonserver and then blocks holding the GIL (so the stub can never exit by itself,
# like the stubs a crashed Triton leaves), "raise" fails the load (with --exit-on-error the
# server exits), "slow" never finishes loading, anything else loads.
CRASHY_MODEL = """
import ctypes, json, os, signal, subprocess, time
from pathlib import Path

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        marks = Path(os.environ["CRASHY_MARKS"])
        attempt = len(list(marks.glob("attempt-*"))) + 1
        plan = os.environ["CRASHY_PLAN"].split(",")
        step = plan[attempt - 1] if attempt <= len(plan) else "ok"
        argv = Path("/proc/self/cmdline").read_bytes().split(b"\\0")
        record = {"step": step, "at": time.monotonic(), "stub": os.getpid(),
                  "server": os.getppid(), "region": argv[2].decode()}
        if step == "hang":
            record["helper"] = subprocess.Popen(["sleep", "600"]).pid
        (marks / f"attempt-{attempt}").write_text(json.dumps(record))
        if step == "hang":
            os.kill(os.getppid(), signal.SIGKILL)
            ctypes.PyDLL(None).pause()
        elif step == "raise":
            raise RuntimeError("crashy: this load fails on purpose")
        elif step == "slow":
            time.sleep(600)

    def execute(self, requests):
        return [
            pb_utils.InferenceResponse(
                [pb_utils.Tensor("OUT", pb_utils.get_input_tensor_by_name(r, "IN").as_numpy())]
            )
            for r in requests
        ]
"""


def crashy_server(tmp_path: Path, plan: str, **options: Any) -> tuple[EmbeddedTriton, Path]:
    repository = tmp_path / "repository"
    (repository / "crashy" / "1").mkdir(parents=True)
    (repository / "crashy" / "config.pbtxt").write_text(
        IDENTITY_CONFIG.replace('"identity"', '"crashy"')
    )
    (repository / "crashy" / "1" / "model.py").write_text(CRASHY_MODEL)
    marks = tmp_path / "marks"
    marks.mkdir()
    env = {"CRASHY_MARKS": str(marks), "CRASHY_PLAN": plan}
    return EmbeddedTriton(repository, env=env, ready_timeout_s=120, **options), marks


def attempts(marks: Path) -> list[dict[str, Any]]:
    files = sorted(marks.glob("attempt-*"), key=lambda p: int(p.name.split("-")[1]))
    return [json.loads(path.read_text()) for path in files]


def nothing_left(records: list[dict[str, Any]]) -> None:
    """No server, stub or helper of these launches runs; no region of theirs remains."""
    for record in records:
        for role in ("server", "stub", "helper"):
            if role in record:
                assert not alive(record[role]), f"{role} {record[role]} of {record} still runs"
        assert record["region"] not in shm_names(), f"shm of {record} remains"


async def test_a_server_dying_before_ready_is_retried_with_backoff(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """First launch: the server is SIGKILLed while loading and its stub hangs (with a helper
    process in the group); second: the load fails and the server exits; third: it serves."""
    server, marks = crashy_server(tmp_path, "hang,raise", start_backoff_s=0.5)
    caplog.set_level(logging.INFO, logger="gateway.triton.embedded")
    await server.start()
    try:
        hang, fail, ok = attempts(marks)
        assert [hang["step"], fail["step"], ok["step"]] == ["hang", "raise", "ok"]
        assert server.pid == ok["server"]
        nothing_left([hang, fail])  # the hung stub and its helper were killed
        # Pauses between launches: 0.5 s, then 1.0 s (doubling), plus the launch itself.
        assert fail["at"] - hang["at"] >= 0.5
        assert ok["at"] - fail["at"] >= 1.0
        retries = [r.getMessage() for r in caplog.records if "retrying in" in r.getMessage()]
        killed, failed = retries
        # Killed from outside, the server said nothing about it; a failed load says why.
        assert killed == (
            "tritonserver exited with code -9 before it was ready (attempt 1 of 3); "
            "retrying in 0.5 s"
        )
        assert failed.startswith(
            "tritonserver exited with code 1 before it was ready (attempt 2 of 3): "
        )
        assert "failed to load" in failed and failed.endswith("; retrying in 1.0 s")
        cleaned = [r.getMessage() for r in caplog.records if "leftover" in r.getMessage()]
        assert any(f"[{hang['stub']}, {hang['helper']}]" in m for m in cleaned), cleaned
        async with httpx.AsyncClient(trust_env=False) as http:
            ready = await http.get(f"{server.http_url}/v2/models/crashy/ready")
            assert ready.status_code == 200
    finally:
        await server.stop()
    nothing_left(attempts(marks))


async def test_a_server_that_never_gets_ready_is_given_up_and_cleaned(
    tmp_path: Path,
) -> None:
    server, marks = crashy_server(tmp_path, "hang,raise", start_attempts=2, start_backoff_s=0.1)
    with pytest.raises(UpstreamUnavailable, match=r"before it was ready; gave up after 2"):
        await server.start()
    assert [a["step"] for a in attempts(marks)] == ["hang", "raise"]
    nothing_left(attempts(marks))
    await server.stop()


async def test_a_start_that_times_out_leaves_nothing_behind(tmp_path: Path) -> None:
    server, marks = crashy_server(tmp_path, "slow")
    server.ready_timeout_s = 3
    with pytest.raises(UpstreamUnavailable, match="not ready within 3 s"):
        await server.start()
    (slow,) = attempts(marks)  # a timeout is not retried
    nothing_left([slow])
    await server.stop()


async def test_clean_up_kills_only_its_own_launch(tmp_path: Path) -> None:
    """``reap`` kills the tagged process's whole group (an untagged member too) and tagged
    processes elsewhere, and removes only regions with its prefix."""
    tag, other = "mmgw_triton_test_aaaa_", "mmgw_triton_test_bbbb_"
    sleeper = "import sys, time; time.sleep(600)"
    # A group led by a tagged process, with an untagged child (a model's helper).
    leader = subprocess.Popen(
        ["bash", "-c", f"sleep 600 & exec {sys.executable} -c '{sleeper}' {tag}x"],
        start_new_session=True,
    )
    outside = subprocess.Popen([sys.executable, "-c", sleeper, f"{tag}y"])
    foreign = subprocess.Popen([sys.executable, "-c", sleeper, f"{other}z"], start_new_session=True)
    ours, theirs = SHM / f"{tag}region", SHM / f"{other}region"
    ours.write_bytes(b"x")
    theirs.write_bytes(b"x")
    try:
        for _ in range(100):
            members = process_group(leader.pid)
            if len(members) == 2:
                break
            await asyncio.sleep(0.05)
        assert len(members) == 2, members
        helper = next(pid for pid in members if pid != leader.pid)
        leftovers = await reap(leader.pid, tag)
        assert leftovers.killed == sorted([leader.pid, helper, outside.pid])
        assert leftovers.removed == [ours.name] and not leftovers.survivors
        assert leader.wait(10) == -signal.SIGKILL and outside.wait(10) == -signal.SIGKILL
        for _ in range(100):
            if not alive(helper):
                break
            await asyncio.sleep(0.05)
        assert not alive(helper)
        assert foreign.poll() is None and theirs.exists() and not ours.exists()
    finally:
        for process in (leader, outside, foreign):
            process.kill()
            process.wait()
        theirs.unlink(missing_ok=True)
        ours.unlink(missing_ok=True)


async def test_the_watchdog_backs_off_while_restarts_fail(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """After a crash, launches that die before ready are retried with doubling pauses until
    one serves; the dead server and the failed launches leave nothing."""
    restarts: list[int] = []
    server, marks = crashy_server(
        tmp_path, "ok,raise,raise", restart_backoff_s=0.2, on_restart=lambda: restarts.append(1)
    )
    caplog.set_level(logging.INFO, logger="gateway.triton.embedded")
    await server.start()
    try:
        assert server.pid is not None
        os.kill(server.pid, signal.SIGKILL)
        for _ in range(1200):
            if restarts and server.ready:
                break
            await asyncio.sleep(0.05)
        assert restarts == [1]
        first, fail_1, fail_2, ok = attempts(marks)
        assert [fail_1["step"], fail_2["step"], ok["step"]] == ["raise", "raise", "ok"]
        assert server.pid == ok["server"]
        nothing_left([first, fail_1, fail_2])
        assert fail_2["at"] - fail_1["at"] >= 0.4 and ok["at"] - fail_2["at"] >= 0.8
        failed = [r.getMessage() for r in caplog.records if "restart failed" in r.getMessage()]
        assert [m.split(": ")[0] + " ... " + m.split("; ")[-1] for m in failed] == [
            "tritonserver restart failed (1 in a row) ... retrying in 0.4 s",
            "tritonserver restart failed (2 in a row) ... retrying in 0.8 s",
        ]
    finally:
        await server.stop()
    nothing_left(attempts(marks))
