"""Co-launch the `tritonserver` shipped in the nvidia-pytriton wheel, keep it ready, restart it.

The wheel carries a real Triton 2.51 binary, its shared libraries and the Python backend.
Three facts make it start outside NVIDIA's container (each learnt the hard way):

- the Python backend wants one folder holding ``libtriton_python.so``,
  ``triton_python_backend_utils.py`` and the stub built for *this* interpreter's version;
- the stub embeds Python and finds the environment through ``python3`` on ``PATH``, so the
  environment's ``bin/`` must come first (``PYTHONPATH`` alone is not enough);
- ``LD_LIBRARY_PATH`` must hold the wheel's libs folder and this interpreter's ``LIBDIR``,
  else the stub loads another libpython and stdlib extension modules fail to import.

The stub is built against NumPy 1: under NumPy 2 it hands every STRING input to the model as
a buffer filled with its first byte (every prompt is lost and the stub dies). The stub also
ignores ``PYTHONPATH``. So the models may run in another interpreter's environment than the
gateway's (``python``, e.g. a venv with ``numpy<2`` beside a NumPy 2 torch install), and
starting a stub over NumPy 2 is refused with that advice.

Ports are free loopback ports chosen at start, never the gateway's own. The supervisor
restarts a server that dies and reports restarts through a callback (metrics).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import importlib.util
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from gateway.errors import UpstreamUnavailable

log = logging.getLogger(__name__)

DEFAULT_READY_TIMEOUT_S = 600.0
DEFAULT_RESTART_BACKOFF_S = 1.0
PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class StubPython:
    """The interpreter whose environment the models run in: its version picks the stub,
    its ``bin/`` goes first on ``PATH`` and its ``LIBDIR`` on ``LD_LIBRARY_PATH``."""

    version: str
    bin_dir: Path
    libdir: str
    numpy: str  # the NumPy version the models will import ("" when there is none)

    @classmethod
    def current(cls) -> StubPython:
        """The gateway's own interpreter (the default)."""
        try:
            import numpy
        except ImportError:
            numpy_version = ""
        else:
            numpy_version = numpy.__version__
        return cls(
            version=f"{sys.version_info.major}.{sys.version_info.minor}",
            bin_dir=Path(sys.executable).parent,
            libdir=sysconfig.get_config_var("LIBDIR") or "",
            numpy=numpy_version,
        )

    @classmethod
    def at(cls, executable: Path) -> StubPython:
        """Another interpreter, asked for its version, ``LIBDIR`` and NumPy."""
        probe = (
            "import json, sys, sysconfig\n"
            "try:\n import numpy; v = numpy.__version__\n"
            "except ImportError:\n v = ''\n"
            "print(json.dumps(['%d.%d' % sys.version_info[:2], "
            "sysconfig.get_config_var('LIBDIR') or '', v]))"
        )
        try:
            found = subprocess.run(
                [str(executable), "-c", probe], capture_output=True, check=True, timeout=60
            )
            version, libdir, numpy_version = json.loads(found.stdout)
        except (OSError, subprocess.SubprocessError, ValueError) as exc:
            raise UpstreamUnavailable(
                f"embedded.python {str(executable)!r} is not a working Python: {exc}"
            ) from exc
        # Not resolved: a venv's bin/ (where python3 means the venv) must stay first on PATH.
        bin_dir = Path(executable).absolute().parent
        return cls(version=version, bin_dir=bin_dir, libdir=libdir, numpy=numpy_version)

    def refusal(self) -> str | None:
        """Why the stub cannot run the models in this environment, if it cannot."""
        if self.numpy.split(".")[0].isdigit() and int(self.numpy.split(".")[0]) >= 2:
            return (
                f"the embedded Triton's Python stub garbles every STRING input under NumPy "
                f"{self.numpy} (it is built for NumPy 1); run the models in an environment "
                "with numpy<2: set embedded.python (MMGW_EMBEDDED__PYTHON) to its interpreter"
            )
        return None


@dataclass(frozen=True)
class TritonInstall:
    """Where the wheel put the server, its libraries and the Python backend pieces."""

    binary: Path
    libs: Path
    python_backend: Path
    stub: Path

    @classmethod
    def find(cls, version: str | None = None) -> TritonInstall:
        """Locate the pieces inside the installed ``nvidia-pytriton`` wheel; ``version``
        names the stub (default: this interpreter's)."""
        # Locate the package without importing it: pytriton's __init__ pulls in its client
        # stack (zmq, tritonclient, ...) that launching the server does not need.
        spec = importlib.util.find_spec("pytriton")
        if spec is None or not spec.submodule_search_locations:
            raise UpstreamUnavailable(
                "the embedded Triton needs the 'embedded' extra: pip install -e '.[embedded]'"
            )
        root = Path(next(iter(spec.submodule_search_locations))).resolve()
        site = root.parent
        version = version or f"{sys.version_info.major}.{sys.version_info.minor}"
        install = cls(
            binary=root / "tritonserver" / "bin" / "tritonserver",
            libs=site / "nvidia_pytriton.libs",
            python_backend=root / "tritonserver" / "backends" / "python",
            stub=root
            / "tritonserver"
            / "python_backend_stubs"
            / version
            / "triton_python_backend_stub",
        )
        missing = [
            p
            for p in (install.binary, install.libs, install.python_backend, install.stub)
            if not p.exists()
        ]
        if missing:
            raise UpstreamUnavailable(f"nvidia-pytriton install is incomplete, missing: {missing}")
        return install

    def backend_dir(self, into: Path) -> Path:
        """Assemble the one-folder Python backend under ``into`` and return its parent."""
        python_dir = into / "python"
        python_dir.mkdir(parents=True, exist_ok=True)
        for source in (
            self.python_backend / "libtriton_python.so",
            self.python_backend / "triton_python_backend_utils.py",
            self.stub,
        ):
            target = python_dir / source.name
            if not target.exists():
                shutil.copy2(source, target)
        return into


def _die_with_parent() -> None:
    """In the child: ask Linux to SIGTERM it if the gateway dies without cleaning up."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def free_loopback_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def server_environment(
    install: TritonInstall,
    base: Mapping[str, str],
    extra: Mapping[str, str],
    python: StubPython | None = None,
) -> dict[str, str]:
    """The environment the stub needs: the models' interpreter first on PATH, both lib
    folders."""
    python = python or StubPython.current()
    env = dict(base)
    env.update(extra)
    env["PATH"] = os.pathsep.join([str(python.bin_dir), env.get("PATH", "")])
    lib_path = [str(install.libs), python.libdir, env.get("LD_LIBRARY_PATH", "")]
    env["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in lib_path if p)
    return env


@dataclass
class EmbeddedTriton:
    """One supervised ``tritonserver`` process serving ``model_repository`` on loopback.

    ``start()`` returns once ``/v2/health/ready`` answers 200; ``stop()`` terminates it.
    While running, a watchdog restarts the server if it exits.
    """

    model_repository: Path
    env: Mapping[str, str] = field(default_factory=dict)
    # The interpreter whose environment the models run in; None: the gateway's own.
    python: Path | None = None
    # Load only these models (explicit model control); None loads the whole repository.
    models: Sequence[str] | None = None
    ready_timeout_s: float = DEFAULT_READY_TIMEOUT_S
    log_verbose: int = 0
    on_restart: Callable[[], None] | None = None
    http_port: int = 0
    grpc_port: int = 0
    metrics_port: int = 0
    restarts: int = 0
    _process: asyncio.subprocess.Process | None = None
    _watchdog: asyncio.Task[None] | None = None
    _workdir: Path | None = None
    _stopping: bool = False
    _ready: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def grpc_url(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    @property
    def ready(self) -> bool:
        return self._ready.is_set()

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    def command(self, install: TritonInstall, backend_dir: Path) -> list[str]:
        return [
            str(install.binary),
            f"--model-repository={self.model_repository}",
            f"--backend-directory={backend_dir}",
            "--http-address=127.0.0.1",
            f"--http-port={self.http_port}",
            "--grpc-address=127.0.0.1",
            f"--grpc-port={self.grpc_port}",
            "--metrics-address=127.0.0.1",
            f"--metrics-port={self.metrics_port}",
            "--allow-metrics=true",
            "--disable-auto-complete-config",
            "--exit-on-error=true",
            "--strict-readiness=true",
            f"--log-verbose={self.log_verbose}",
            *self._model_control(),
        ]

    def _model_control(self) -> list[str]:
        if self.models is None:
            return []
        return ["--model-control-mode=explicit", *(f"--load-model={m}" for m in self.models)]

    async def start(self) -> None:
        """Launch, wait for readiness, then watch the process."""
        self._stopping = False
        await self._launch_and_wait()
        self._watchdog = asyncio.create_task(self._watch(), name="triton-watchdog")

    async def stop(self, grace_s: float = 10.0) -> None:
        """Terminate the server: SIGTERM, wait up to ``grace_s``, then SIGKILL."""
        self._stopping = True
        self._ready.clear()
        if self._watchdog:
            self._watchdog.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watchdog
        await self._terminate(grace_s)
        if self._workdir:
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = None

    async def _terminate(self, grace_s: float) -> None:
        process = self._process
        if process is None or process.returncode is not None:
            return
        process.terminate()
        try:
            await asyncio.wait_for(process.wait(), grace_s)
        except asyncio.TimeoutError:
            process.kill()
            await process.wait()

    async def _launch_and_wait(self) -> None:
        python = StubPython.at(self.python) if self.python else StubPython.current()
        refusal = python.refusal()
        if refusal:
            raise UpstreamUnavailable(refusal)
        install = TritonInstall.find(python.version)
        if self._workdir is None:
            self._workdir = Path(tempfile.mkdtemp(prefix="mmgw-triton-"))
        backend_dir = install.backend_dir(self._workdir / "backends")
        # Ports are chosen once and kept across restarts, so clients reconnect to the same URL.
        if not self.grpc_port:
            self.http_port, self.grpc_port, self.metrics_port = (
                free_loopback_port() for _ in range(3)
            )
        env = server_environment(install, os.environ, self.env, python)
        log.info("starting tritonserver on grpc %s over %s", self.grpc_url, self.model_repository)
        self._process = await asyncio.create_subprocess_exec(
            *self.command(install, backend_dir),
            env=env,
            stdin=asyncio.subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )
        await self._wait_ready()
        self._ready.set()
        log.info("tritonserver ready (pid %s)", self._process.pid)

    async def _wait_ready(self) -> None:
        assert self._process is not None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.ready_timeout_s
        async with httpx.AsyncClient(timeout=2.0, trust_env=False) as http:
            while loop.time() < deadline:
                if self._process.returncode is not None:
                    raise UpstreamUnavailable(
                        f"tritonserver exited with code {self._process.returncode} "
                        "before it was ready"
                    )
                with contextlib.suppress(httpx.HTTPError):
                    response = await http.get(f"{self.http_url}/v2/health/ready")
                    if response.status_code == 200:
                        return
                await asyncio.sleep(0.25)
        await self._terminate(5.0)
        raise UpstreamUnavailable(f"tritonserver was not ready within {self.ready_timeout_s:.0f} s")

    async def _watch(self) -> None:
        """Restart the server whenever it exits, with a short back-off between tries."""
        while not self._stopping:
            assert self._process is not None
            code = await self._process.wait()
            if self._stopping:
                return
            self._ready.clear()
            log.error("tritonserver exited with code %s; restarting", code)
            while not self._stopping:
                await asyncio.sleep(DEFAULT_RESTART_BACKOFF_S)
                try:
                    await self._launch_and_wait()
                except UpstreamUnavailable as exc:
                    log.error("tritonserver restart failed: %s", exc)
                    continue
                self.restarts += 1
                if self.on_restart:
                    self.on_restart()
                break
