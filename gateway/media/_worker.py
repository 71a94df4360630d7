"""One media worker process: its life inside (``worker_entry``: receive a job, run it, reply)
and its handle outside (``Worker``, ``spawn_worker``). ``offload.py`` pools them.

A worker is a fresh interpreter (``python -c``), never a ``fork`` of the threaded gateway;
jobs and replies travel by pickle over a pipe each way. A job's error is mapped here, in the
worker: the gateway's own errors pass as they are, an out-of-memory becomes
``MediaTooLarge``, anything else ``MediaDecodeError`` (logged, not echoed).
"""

from __future__ import annotations

import contextlib
import importlib
import json
import logging
import os
import resource
import signal
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from gateway.errors import GatewayError, MediaDecodeError, MediaTooLarge

log = logging.getLogger(__name__)

Reply = tuple[bool, Any]
_BOOT = "from gateway.media._worker import worker_entry; worker_entry()"


def worker_entry() -> None:
    """A worker's life (``python -c``): set up from argv, then receive (function, args) and
    reply (ok, result or error) until the parent closes the pipe or goes away."""
    read_fd, write_fd, config = int(sys.argv[1]), int(sys.argv[2]), json.loads(sys.argv[3])
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    sys.path[:] = config["sys_path"]
    for module in config["preload"]:
        importlib.import_module(module)
    if config["memory_limit_mb"]:
        limit = config["memory_limit_mb"] * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    inbox, outbox = Connection(read_fd, writable=False), Connection(write_fd, readable=False)
    while True:
        try:
            function, args = inbox.recv()
        except (EOFError, OSError):
            return
        outbox.send(call_job(function, args))


def call_job(function: Callable[..., Any], args: tuple[Any, ...]) -> Reply:
    """``function(*args)`` with its errors mapped as a worker maps them (the thread lane too)."""
    try:
        return True, function(*args)
    except GatewayError as exc:
        return False, exc
    except MemoryError:
        return False, MediaTooLarge(
            "The media needs more memory to decode than this server allows."
        )
    except Exception as exc:  # a decoder error nobody mapped: log it here, say little outside
        name = getattr(function, "__name__", "?")
        log.warning("media worker: %s in %s", type(exc).__name__, name)
        return False, MediaDecodeError("The media could not be decoded.")


@dataclass(eq=False)  # identity semantics: workers live in a set
class Worker:
    process: subprocess.Popen[bytes]
    outbox: Connection
    inbox: Connection

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        """Not exited (reaps it if it has: ``poll`` is a non-blocking ``waitpid``)."""
        return self.process.poll() is None

    def call(self, function: Callable[..., Any], args: tuple[Any, ...]) -> Reply:
        """One round trip; runs in a helper thread. EOFError/OSError: the worker died."""
        self.outbox.send((function, args))
        reply: Reply = self.inbox.recv()
        return reply

    def kill(self) -> None:
        """SIGKILL (a stuck decoder ignores anything gentler), then reap it."""
        with contextlib.suppress(OSError):
            self.process.kill()
        for connection in (self.outbox, self.inbox):
            with contextlib.suppress(OSError):
                connection.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(5)


def spawn_worker(preload: Sequence[str], memory_limit_mb: int | None) -> Worker:
    """Start one worker interpreter with a pipe each way (blocking: call it in a thread)."""
    to_child_r, to_child_w = os.pipe()
    from_child_r, from_child_w = os.pipe()
    config = {"sys_path": sys.path, "preload": list(preload), "memory_limit_mb": memory_limit_mb}
    command = [sys.executable, "-c", _BOOT, str(to_child_r), str(from_child_w)]
    try:
        process = subprocess.Popen(
            [*command, json.dumps(config)],
            pass_fds=(to_child_r, from_child_w),
            stdin=subprocess.DEVNULL,
        )
    finally:
        os.close(to_child_r)
        os.close(from_child_w)
    return Worker(
        process,
        outbox=Connection(to_child_w, readable=False),
        inbox=Connection(from_child_r, writable=False),
    )
