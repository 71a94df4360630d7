"""Processes under test: launch pinned, read their CPU time and memory, wait for their port.

Everything here reads Linux's ``/proc`` directly (no psutil): the bench must not add a
dependency to measure a few counters, and ``/proc/<pid>/stat`` of a thread-group leader
already sums the CPU time of all its threads.
"""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import socket
import subprocess
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")


def say(message: str) -> None:
    """Progress output: one flushed line, so a long run shows where it is."""
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", flush=True)


def cpu_seconds(pid: int) -> float:
    """User plus system CPU seconds the process has used so far (all its threads)."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def rss_bytes(pid: int) -> int:
    """Resident set size now."""
    with open(f"/proc/{pid}/statm", encoding="ascii") as statm:
        return int(statm.read().split()[1]) * PAGE_BYTES


def descendants(pid: int) -> list[int]:
    """Every live process below ``pid`` (Triton's Python-backend stubs, LiteLLM's workers)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            with open(f"/proc/{entry}/stat", encoding="ascii") as stat:
                parent = int(stat.read().rsplit(")", 1)[1].split()[1])
            children.setdefault(parent, []).append(int(entry))
    found: list[int] = []
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def tree_cpu_seconds(pid: int, name: str) -> dict[str, float]:
    """CPU seconds of ``pid`` and each live descendant, keyed ``name:pid``.

    Keyed per process so a delta can skip processes that came or went in between (Triton
    replaces its Python-backend stub when the bench reloads the model with another pace).
    """
    found = {}
    for member in [pid, *descendants(pid)]:
        with contextlib.suppress(OSError):
            found[f"{name}:{member}"] = cpu_seconds(member)
    return found


def parse_cpus(spec: str) -> set[int] | None:
    """'1' or '0,2-3' -> a CPU set; 'all' -> None (no pinning)."""
    if spec == "all":
        return None
    cpus: set[int] = set()
    for part in spec.split(","):
        low, _, high = part.partition("-")
        cpus.update(range(int(low), int(high or low) + 1))
    return cpus


def pin_self(cpus: set[int] | None) -> None:
    """Restrict this process (and the children it starts afterwards) to ``cpus``."""
    os.sched_setaffinity(0, cpus if cpus is not None else range(os.cpu_count() or 1))


def raise_fd_limit(wanted: int = 65536) -> int:
    """Raise RLIMIT_NOFILE towards ``wanted`` (capped by the hard limit); children inherit it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = min(wanted, hard) if hard != resource.RLIM_INFINITY else wanted
    if target > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return max(soft, target)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Service:
    """A server process under test, started pinned, with its log in a file."""

    name: str
    process: subprocess.Popen[bytes]
    port: int
    log_path: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    def stop(self, grace_s: float = 15.0) -> None:
        """SIGTERM, wait, then SIGKILL the whole session (workers included)."""
        if self.process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(grace_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


def start_service(
    name: str,
    command: Sequence[str],
    port: int,
    log_path: Path,
    cpus: set[int] | None,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> Service:
    """Start ``command`` in its own session, pinned to ``cpus``, its output to ``log_path``."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    log = log_path.open("wb")

    def pin() -> None:
        if cpus is not None:
            os.sched_setaffinity(0, cpus)

    process = subprocess.Popen(
        list(command),
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        env=dict(env) if env is not None else None,
        cwd=cwd,
        start_new_session=True,
        preexec_fn=pin,
    )
    log.close()
    return Service(name, process, port, log_path)


def wait_for_http(service: Service, paths: Iterable[str], timeout_s: float = 180.0) -> None:
    """Poll until one of ``paths`` answers 200 on the service's port; fail if it dies."""
    import httpx

    deadline = time.monotonic() + timeout_s
    with httpx.Client(timeout=2.0, trust_env=False) as http:
        while time.monotonic() < deadline:
            if service.process.poll() is not None:
                tail = service.log_path.read_text(errors="replace")[-3000:]
                raise RuntimeError(f"{service.name} exited early:\n{tail}")
            for path in paths:
                with contextlib.suppress(httpx.HTTPError):
                    if http.get(f"http://127.0.0.1:{service.port}{path}").status_code == 200:
                        return
            time.sleep(0.25)
    raise RuntimeError(f"{service.name} was not ready within {timeout_s:.0f} s")
