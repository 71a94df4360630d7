"""Co-launch the wheel's ``tritonserver``, keep it ready, restart it, leave nothing behind.

Ports are free loopback ports chosen at the first start, never the gateway's own, and kept
across restarts. A server that exits before it is ready is started again, up to
``start_attempts`` times with a doubling pause; once running, the watchdog restarts a server
that dies (pauses doubling from ``restart_backoff_s`` while restarts fail) and reports each
restart through ``on_restart`` (metrics). Whenever a server is gone, by a crash, a failed start
or ``stop()``, its whole launch is cleaned up first (``cleanup.reap``): the stubs of a crashed
Triton 2.51 can otherwise live on for ever, stuck, with their shared memory.

Its output goes to a file (``output.py``), out of the gateway's: a failure is explained from
it, and while the models load the launcher reports how many are ready.

Loading on a small, busy machine: the Python backend kills a stub that has not started within
``stub-timeout-seconds`` (30 s by default, which 14 models loading at once on 2 loaded cores
exceeded), so the launcher passes ``stub_timeout_s``, and loads at most
``model_load_threads`` models at a time (Triton's default is 4).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from gateway.errors import UpstreamUnavailable
from gateway.triton.embedded.cleanup import new_tag, reap
from gateway.triton.embedded.install import (
    StubPython,
    TritonInstall,
    free_loopback_port,
    server_environment,
)
from gateway.triton.embedded.output import explain, last_error, log_path, read_tail
from gateway.triton.embedded.progress import LoadProgress
from gateway.triton.embedded.spawn import ParentBound

log = logging.getLogger(__name__)

DEFAULT_READY_TIMEOUT_S = 600.0
DEFAULT_START_ATTEMPTS = 3
DEFAULT_START_BACKOFF_S = 2.0
DEFAULT_RESTART_BACKOFF_S = 1.0
MAX_BACKOFF_S = 30.0
DEFAULT_STUB_TIMEOUT_S = 120


def default_load_threads() -> int:
    """Models loaded at once: Triton's 4, but no more than there are cores."""
    return max(1, min(4, os.cpu_count() or 1))


def backoff(first_s: float, failures: int) -> float:
    """The pause after the ``failures``-th failure in a row: doubling, capped."""
    pause: float = min(MAX_BACKOFF_S, first_s * 2 ** max(0, failures - 1))
    return pause


class DiedBeforeReady(UpstreamUnavailable):
    """tritonserver exited while the launcher waited for it to be ready; ``why`` holds the
    lines of its output that say why."""

    def __init__(self, code: int, why: str = "") -> None:
        super().__init__(f"tritonserver exited with code {code} before it was ready")
        self.exit_code = code
        self.why = why


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
    # Per launch: how long to wait for readiness (a server still loading then is not retried).
    ready_timeout_s: float = DEFAULT_READY_TIMEOUT_S
    # Launches of start() when the server exits before it is ready, and the first pause.
    start_attempts: int = DEFAULT_START_ATTEMPTS
    start_backoff_s: float = DEFAULT_START_BACKOFF_S
    # The watchdog's first pause before a restart.
    restart_backoff_s: float = DEFAULT_RESTART_BACKOFF_S
    # The Python backend's limit for a stub to start (Triton's default: 30 s).
    stub_timeout_s: int = DEFAULT_STUB_TIMEOUT_S
    # Models loaded at once; None: default_load_threads().
    model_load_threads: int | None = None
    log_verbose: int = 0
    on_restart: Callable[[], None] | None = None
    http_port: int = 0
    grpc_port: int = 0
    metrics_port: int = 0
    restarts: int = 0
    _process: asyncio.subprocess.Process | None = None
    _tag: str = ""  # this launch's shared-memory prefix (cleanup.py)
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
        threads = self.model_load_threads or default_load_threads()
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
            f"--model-load-thread-count={threads}",
            f"--backend-config=python,shm-region-prefix-name={self._tag}",
            f"--backend-config=python,stub-timeout-seconds={self.stub_timeout_s}",
            f"--log-verbose={self.log_verbose}",
            *self._model_control(),
        ]

    def _model_control(self) -> list[str]:
        if self.models is None:
            return []
        return ["--model-control-mode=explicit", *(f"--load-model={m}" for m in self.models)]

    async def start(self) -> None:
        """Launch (again while it dies before it is ready), wait for readiness, then watch."""
        self._stopping = False
        attempts = max(1, self.start_attempts)
        for attempt in range(1, attempts + 1):
            try:
                await self._launch_and_wait()
                break
            except DiedBeforeReady as exc:
                if attempt == attempts:
                    raise UpstreamUnavailable(
                        f"{exc.message}; gave up after {attempts} attempt(s). "
                        f"Its output says:\n{exc.why}"
                    ) from exc
                pause = backoff(self.start_backoff_s, attempt)
                reason = last_error(read_tail(self.log_file))
                log.warning(
                    "%s (attempt %d of %d)%s; retrying in %.1f s",
                    exc.message,
                    attempt,
                    attempts,
                    f": {reason}" if reason else "",
                    pause,
                )
                await asyncio.sleep(pause)
        self._watchdog = asyncio.create_task(self._watch(), name="triton-watchdog")

    async def stop(self, grace_s: float = 10.0) -> None:
        """Terminate the server: SIGTERM, wait up to ``grace_s``, then SIGKILL; then kill
        whatever of it is left (its process group) and remove its shared memory."""
        self._stopping = True
        self._ready.clear()
        if self._watchdog:
            self._watchdog.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watchdog
        await self._terminate(grace_s)
        await self._clean_up("stopped")
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
            log.warning(
                "tritonserver (pid %s) still runs %.0f s after SIGTERM; killing it",
                process.pid,
                grace_s,
            )
            process.kill()
            await process.wait()

    async def _clean_up(self, why: str) -> None:
        """Kill what is left of the current launch (the server too, if it still runs) and
        remove its shared-memory regions; logs what it found."""
        process = self._process
        if process is None or not self._tag:
            return
        leftovers = await reap(process.pid, self._tag)
        await process.wait()  # the server itself is killed with its group
        if leftovers.killed or leftovers.removed or leftovers.survivors:
            log.warning("tritonserver (pid %s) %s: %s", process.pid, why, leftovers)

    async def _launch_and_wait(self) -> None:
        """One launch; on any failure (or cancellation) it is killed and cleaned up."""
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
        self._tag = new_tag()
        output = self.log_file
        log.log(
            logging.DEBUG if self.restarts else logging.INFO,
            "starting tritonserver over %s (its output: %s)",
            self.model_repository,
            output,
        )
        log.debug("tritonserver grpc %s, shm prefix %s", self.grpc_url, self._tag)
        bound = ParentBound.of(self.command(install, backend_dir), env)
        with output.open("wb") as sink:  # the child keeps its own copy of the descriptor
            try:
                self._process = await asyncio.create_subprocess_exec(
                    *bound.argv,
                    stdin=asyncio.subprocess.DEVNULL,
                    stdout=sink,
                    stderr=asyncio.subprocess.STDOUT,
                    start_new_session=True,
                    pass_fds=bound.pass_fds,
                )
            except BaseException:
                bound.abandon()
                raise
        bound.hand_over()
        try:
            await self._wait_ready()
        except BaseException as exc:
            # Never leave a half-started server: kill its group, remove its regions.
            await self._clean_up(f"failed to start ({exc.__class__.__name__})")
            raise
        self._ready.set()
        log.debug("tritonserver ready (pid %s)", self._process.pid)

    @property
    def log_file(self) -> Path:
        """Where the server's output goes (each launch starts it afresh)."""
        assert self._workdir is not None
        return log_path(self._workdir)

    def explain_failure(self) -> str:
        """The lines of the server's output that say why it failed."""
        return explain(read_tail(self.log_file))

    async def _wait_ready(self) -> None:
        assert self._process is not None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.ready_timeout_s
        progress = LoadProgress(self.log_file)
        async with httpx.AsyncClient(timeout=2.0, trust_env=False) as http:
            while loop.time() < deadline:
                if self._process.returncode is not None:
                    raise DiedBeforeReady(self._process.returncode, self.explain_failure())
                with contextlib.suppress(httpx.HTTPError):
                    response = await http.get(f"{self.http_url}/v2/health/ready")
                    if response.status_code == 200:
                        return
                progress.report()
                await asyncio.sleep(0.25)
        raise UpstreamUnavailable(
            f"tritonserver was not ready within {self.ready_timeout_s:.0f} s "
            f"({progress.summary()}). Its output says:\n{self.explain_failure()}"
        )

    async def _watch(self) -> None:
        """Restart the server whenever it exits, after cleaning up what it left."""
        while not self._stopping:
            assert self._process is not None
            code = await self._process.wait()
            if self._stopping:
                return
            self._ready.clear()
            pid = self._process.pid
            await self._clean_up(f"exited with code {code}")
            log.error(
                "tritonserver (pid %s) exited with code %s; restarting in %.1f s. "
                "Its output says:\n%s",
                pid,
                code,
                self.restart_backoff_s,
                self.explain_failure(),
            )
            failures = 0
            while not self._stopping:
                await asyncio.sleep(backoff(self.restart_backoff_s, failures + 1))
                try:
                    await self._launch_and_wait()
                except Exception as exc:  # the watchdog itself must not die (e.g. OSError)
                    failures += 1
                    log.error(
                        "tritonserver restart failed (%d in a row): %s; retrying in %.1f s",
                        failures,
                        exc.message if isinstance(exc, UpstreamUnavailable) else repr(exc),
                        backoff(self.restart_backoff_s, failures + 1),
                    )
                    continue
                self.restarts += 1
                if self.on_restart:
                    self.on_restart()
                break
