"""``mmgw serve --workers N``: N gateway processes on one port, one embedded Triton.

One Python process cannot relay what an 8-GPU node generates (vLLM grew
``--api-server-count`` for the same reason). The supervisor, the process ``mmgw serve``
starts, binds the listening sockets, launches and supervises the embedded Triton once, and
starts N workers (``python -m gateway.workers``) that each inherit one socket and serve the app
on it, their settings pointing at that Triton.

Each worker has its own listening socket on the one port (``SO_REUSEPORT``, Linux): the kernel
spreads new connections over the sockets by a hash of their addresses, so every worker gets
its share. With one shared socket, whichever worker woke first took the connection, and one
busy worker could take most of them (issue 28: 1.1 of 4 cores busy in the worst run). Where
the option does not balance (not Linux), the workers share one socket as before. A worker's
socket outlives it: connections queued on it wait for its replacement, which starts at once
after a healthy run; a replacement that must pause (its predecessors kept dying young) gets a
new socket, and the old one is closed so the others take its share meanwhile.

- A worker that exits unexpectedly is replaced (pauses doubling while replacements keep dying
  young); its live gauges are dropped from the shared metrics.
- SIGTERM or SIGINT is passed on to every worker, which drains as a single server does
  (``gateway/drain.py``); the supervisor waits for them, then stops Triton.
- ``/metrics`` on any worker adds up every worker (prometheus_client's multiprocess mode: the
  supervisor gives them one ``PROMETHEUS_MULTIPROC_DIR``); the supervisor writes there too
  (Triton restarts).
- Per worker, not shared: the in-flight cap, the media cache, the decode pool, LoRA bookkeeping.

The settings travel to the workers as JSON in a file only this user can read (they may hold
API keys), in the supervisor's run folder, removed at the end.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import shutil
import signal
import socket
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from gateway.config import Settings
from gateway.errors import UpstreamUnavailable
from gateway.server.ready import address_url, ready_line
from gateway.triton.embedded.launcher import backoff
from gateway.triton.embedded.spawn import die_with_parent

log = logging.getLogger(__name__)

SETTINGS_FILE = "MMGW_WORKER_SETTINGS_FILE"
SOCKET_FD = "MMGW_WORKER_FD"
# The supervisor's pid: a worker asks to die with it (and exits if it is already gone).
SUPERVISOR_PID = "MMGW_SUPERVISOR_PID"
METRICS_DIR = "PROMETHEUS_MULTIPROC_DIR"
BACKLOG = 2048
# A worker that lived at least this long was healthy: its replacement starts at once.
HEALTHY_AFTER_S = 10.0
REPLACE_BACKOFF_S = 0.5


def worker_count(value: int | str) -> int:
    """``auto``: one per core this process may run on, but one (left to Triton and the
    kernel's network work); at least one."""
    if value == "auto":
        return max(1, len(os.sched_getaffinity(0)) - 1)
    return int(value)


def balances_by_port() -> bool:
    """Whether this kernel spreads connections over sockets sharing a port (Linux's
    ``SO_REUSEPORT``; BSDs and macOS accept the option but hand every connection to one)."""
    return sys.platform.startswith("linux") and hasattr(socket, "SO_REUSEPORT")


def listening_socket(host: str, port: int, reuse_port: bool = False) -> socket.socket:
    """A listening socket workers inherit; ``reuse_port`` lets others join its port."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if reuse_port:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    sock.listen(BACKLOG)
    sock.set_inheritable(True)
    return sock


def _refuse_if_taken(host: str, port: int) -> None:
    """Fail as a plain bind would when the port is in use. A socket with ``SO_REUSEPORT``
    could otherwise join another process's group on it (another gateway of this user left
    running) and silently split its traffic."""
    probe = listening_socket(host, port)  # raises EADDRINUSE when anything listens there
    probe.close()


@dataclass
class WorkerSockets:
    """One listening socket per worker slot on one port, or one shared by all of them."""

    host: str
    port: int
    per_worker: bool
    _sockets: dict[int, socket.socket] = field(default_factory=dict)

    @classmethod
    def bind(cls, host: str, port: int, workers: int) -> WorkerSockets:
        """Bind slot 0 (port 0 picks the port every other slot then joins), then the rest."""
        per_worker = workers > 1 and balances_by_port()
        if per_worker and port:
            _refuse_if_taken(host, port)
        first = listening_socket(host, port, reuse_port=per_worker)
        sockets = cls(host, first.getsockname()[1], per_worker, {0: first})
        try:
            for slot in range(1, workers if per_worker else 1):
                sockets.renew(slot)
        except OSError:
            sockets.close()
            raise
        return sockets

    @property
    def address(self) -> tuple[str, int]:
        host, port = self._sockets[0].getsockname()[:2]
        return host, port

    def of(self, slot: int) -> socket.socket:
        """The socket worker ``slot`` accepts on (the shared one without ``per_worker``)."""
        if not self.per_worker:
            return self._sockets[0]
        if slot not in self._sockets:
            self.renew(slot)
        return self._sockets[slot]

    def renew(self, slot: int) -> None:
        """Bind a fresh socket for ``slot`` on the port, closing any it had."""
        old = self._sockets.pop(slot, None)
        if old is not None:
            old.close()
        self._sockets[slot] = listening_socket(self.host, self.port, reuse_port=True)

    def release(self, slot: int) -> None:
        """Close slot's own socket until a worker needs it again (shared: nothing to do).
        Connections queued on it are reset rather than left waiting on a socket nobody
        accepts from; new ones go to the other workers' sockets."""
        if self.per_worker:
            old = self._sockets.pop(slot, None)
            if old is not None:
                old.close()

    def close(self) -> None:
        for sock in self._sockets.values():
            sock.close()
        self._sockets.clear()


@dataclass
class Supervisor:
    """Starts, replaces and stops the workers; owns the socket, Triton and the run folder."""

    settings: Settings
    workers: int
    log_level: str = "info"
    _stopping: asyncio.Event = field(default_factory=asyncio.Event)
    _processes: dict[int, asyncio.subprocess.Process] = field(default_factory=dict)

    async def run(self) -> None:
        run_dir = Path(tempfile.mkdtemp(prefix="mmgw-run-"))  # 0700: only this user
        metrics_dir = run_dir / "metrics"
        metrics_dir.mkdir()
        _share_metrics(metrics_dir)
        server = self.settings.server
        sockets = WorkerSockets.bind(server.host, server.port, self.workers)
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._stopping.set)
        embedded = None
        try:
            settings = self.settings
            if settings.needs_embedded:
                from gateway.observability.metrics import GatewayMetrics
                from gateway.runtime import embedded_triton

                embedded = embedded_triton(settings, GatewayMetrics().triton_restarted)
                await embedded.start()
                # One URL, or a comma list of replicas ([embedded] replicas) the workers
                # serve as one replica set.
                settings = settings.with_embedded_at(",".join(embedded.grpc_urls))
            env = self._environment(settings, run_dir, metrics_dir)
            ids = [model.id for model in settings.models]
            ready = ready_line(address_url(sockets.address), ids)
            shared = "a socket each" if sockets.per_worker else "one shared socket"
            log.info("%s; %d workers on %s", ready, self.workers, shared)
            slots = [
                asyncio.create_task(self._keep(i, env, sockets, metrics_dir))
                for i in range(self.workers)
            ]
            await self._stopping.wait()
            await self._stop_workers(slots)
        finally:
            if embedded is not None:
                await embedded.stop()
            sockets.close()
            shutil.rmtree(run_dir, ignore_errors=True)

    def _environment(self, settings: Settings, run_dir: Path, metrics_dir: Path) -> dict[str, str]:
        settings_file = run_dir / "settings.json"
        settings_file.touch(mode=0o600)
        settings_file.write_text(settings.model_dump_json())
        return {
            **os.environ,
            SETTINGS_FILE: str(settings_file),
            METRICS_DIR: str(metrics_dir),
        }

    async def _keep(
        self, slot: int, env: dict[str, str], sockets: WorkerSockets, metrics_dir: Path
    ) -> None:
        """Run worker ``slot`` until the supervisor stops, replacing it whenever it exits."""
        failures = 0
        while not self._stopping.is_set():
            started = time.monotonic()
            fd = sockets.of(slot).fileno()
            process = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "gateway.workers", "--log-level", self.log_level,
                env={**env, SOCKET_FD: str(fd), SUPERVISOR_PID: str(os.getpid())},
                pass_fds=(fd,),  # no preexec_fn: the worker sets its own parent-death signal
            )  # fmt: skip
            self._processes[slot] = process
            code = await process.wait()
            _forget(process.pid, metrics_dir)
            if self._stopping.is_set():
                return
            failures = failures + 1 if time.monotonic() - started < HEALTHY_AFTER_S else 0
            pause = backoff(REPLACE_BACKOFF_S, failures) if failures else 0.0
            if pause:
                sockets.release(slot)  # the other workers take its share while it pauses
            log.warning(
                "gateway worker %d (pid %d) exited with code %s; replacing it in %.1f s",
                slot, process.pid, code, pause,
            )  # fmt: skip
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), pause)

    async def _stop_workers(self, slots: list[asyncio.Task[None]]) -> None:
        """SIGTERM every worker (each drains), wait for them, kill any still running."""
        for process in self._processes.values():
            if process.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    process.send_signal(signal.SIGTERM)
        grace = self.settings.server.drain_timeout_s + 5.0
        _, late = await asyncio.wait(slots, timeout=grace)
        for process in self._processes.values():
            if process.returncode is None:
                log.warning("gateway worker pid %d still runs after %.0f s; killing it",
                            process.pid, grace)  # fmt: skip
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
        if late:
            await asyncio.wait(late)


def _share_metrics(directory: Path) -> None:
    """This process and its workers write their metrics under ``directory``.

    prometheus_client picks its value store when it is imported, from the environment; this
    process has imported it already, so its store is switched here, before any metric of this
    process is made, and the workers are started with the variable set."""
    from prometheus_client import values

    os.environ[METRICS_DIR] = str(directory)
    values.ValueClass = values.MultiProcessValue()


def _forget(pid: int, metrics_dir: Path) -> None:
    """A worker is gone: its live gauges (in-flight requests) no longer count."""
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(pid, str(metrics_dir))


def serve(settings: Settings, workers: int, log_level: str) -> int:
    """``mmgw serve`` with several workers: supervise until SIGTERM or SIGINT. A start-up
    that fails (the embedded Triton) is said in one line, as ``mmgw serve`` says it, exit 3."""
    try:
        asyncio.run(Supervisor(settings, workers, log_level).run())
    except UpstreamUnavailable as exc:
        log.error("mmgw could not start: %s", exc.message)
        return 3
    return 0


def worker_main(argv: list[str] | None = None) -> int:
    """One worker: the app on the inherited socket, with the supervisor's settings."""
    import argparse

    import uvicorn

    from gateway.app import create_app
    from gateway.drain import draining_server
    from gateway.observability.logging import configure_logging
    from gateway.server.options import uvicorn_options

    parser = argparse.ArgumentParser(prog="python -m gateway.workers")
    parser.add_argument("--log-level", default="info")
    args = parser.parse_args(argv)
    if SUPERVISOR_PID in os.environ:
        die_with_parent(int(os.environ[SUPERVISOR_PID]))
    settings = Settings.model_validate(json.loads(Path(os.environ[SETTINGS_FILE]).read_text()))
    configure_logging(settings.observability.log_format, args.log_level)
    sock = socket.socket(fileno=int(os.environ[SOCKET_FD]))
    app = create_app(settings)
    options = uvicorn_options(settings, app, args.log_level)
    drain_s = settings.server.drain_timeout_s
    server = draining_server(uvicorn.Config(app, **options), app.state.drain, drain_s)
    server.run(sockets=[sock])
    return 0


if __name__ == "__main__":
    sys.exit(worker_main())
