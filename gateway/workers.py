"""``mmgw serve --workers N``: N gateway processes on one listening socket, one embedded Triton.

One Python process cannot relay what an 8-GPU node generates (vLLM grew
``--api-server-count`` for the same reason). The supervisor, the process ``mmgw serve``
starts, binds the listening socket, launches and supervises the embedded Triton once, and
starts N workers (``python -m gateway.workers``) that inherit the socket and serve the app on
it, their settings pointing at that Triton. The kernel hands each new connection to one worker.

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
from gateway.triton.embedded.launcher import backoff, die_with_parent

log = logging.getLogger(__name__)

SETTINGS_FILE = "MMGW_WORKER_SETTINGS_FILE"
SOCKET_FD = "MMGW_WORKER_FD"
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


def listening_socket(host: str, port: int) -> socket.socket:
    """The one socket every worker accepts on (inherited by them)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(BACKLOG)
    sock.set_inheritable(True)
    return sock


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
        sock = listening_socket(self.settings.server.host, self.settings.server.port)
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
            env = self._environment(settings, run_dir, metrics_dir, sock)
            ids = [model.id for model in settings.models]
            ready = ready_line(address_url(sock.getsockname()[:2]), ids)
            log.info("%s; %d workers", ready, self.workers)
            slots = [
                asyncio.create_task(self._keep(i, env, sock, metrics_dir))
                for i in range(self.workers)
            ]
            await self._stopping.wait()
            await self._stop_workers(slots)
        finally:
            if embedded is not None:
                await embedded.stop()
            sock.close()
            shutil.rmtree(run_dir, ignore_errors=True)

    def _environment(
        self, settings: Settings, run_dir: Path, metrics_dir: Path, sock: socket.socket
    ) -> dict[str, str]:
        settings_file = run_dir / "settings.json"
        settings_file.touch(mode=0o600)
        settings_file.write_text(settings.model_dump_json())
        return {
            **os.environ,
            SETTINGS_FILE: str(settings_file),
            SOCKET_FD: str(sock.fileno()),
            METRICS_DIR: str(metrics_dir),
        }

    async def _keep(
        self, slot: int, env: dict[str, str], sock: socket.socket, metrics_dir: Path
    ) -> None:
        """Run worker ``slot`` until the supervisor stops, replacing it whenever it exits."""
        failures = 0
        while not self._stopping.is_set():
            started = time.monotonic()
            process = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "gateway.workers", "--log-level", self.log_level,
                env=env, pass_fds=(sock.fileno(),), preexec_fn=die_with_parent,
            )  # fmt: skip
            self._processes[slot] = process
            code = await process.wait()
            _forget(process.pid, metrics_dir)
            if self._stopping.is_set():
                return
            failures = failures + 1 if time.monotonic() - started < HEALTHY_AFTER_S else 0
            pause = backoff(REPLACE_BACKOFF_S, failures) if failures else 0.0
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
