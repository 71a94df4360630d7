"""One sandbox worker process: its life inside (``child_entry``) and its handle outside
(``Child``, ``spawn_child``).

A child is a fresh interpreter (``python -c``), never a ``fork`` of the threaded gateway. Before
its first job it caps its own address space (``RLIMIT_AS``: a runaway allocation is a
``MemoryError`` or a death, not the host's OOM killer choosing a victim) and its stack
(``RLIMIT_STACK``: native code that recurses too deep, as llguidance does on a 1,000-link
``$ref`` chain, dies by SIGSEGV at a known depth whatever ``ulimit -s`` the operator runs
with, instead of growing into the address space), asks to die with its parent
(``PR_SET_PDEATHSIG``), so a job stuck in C never outlives the gateway, and lowers its own
scheduling priority (``nice`` 10), so the CPU a runaway job burns is not the event loop's.
Jobs and replies travel by pickle over a pipe each way; a job's exception comes back as short
text, never raised here. The media decode workers (``gateway/media/_worker.py``) are children
of the same kind with a runner of their own (``runner``: how a job's errors are mapped), no
stack cap and their usual priority.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import json
import os
import resource
import signal
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

Reply = tuple[bool, Any]  # (True, the job's value) or (False, why it raised)
MAX_ERROR_CHARS = 500  # a job's exception text, as sent back
NICE = 10  # a child's scheduling priority below the gateway's: on a busy host the CPU a
# runaway job burns is taken from idle time first, not from the event loop serving streams
_BOOT = "from gateway.sandbox._child import child_entry; child_entry()"
_PR_SET_PDEATHSIG = 1


def child_entry() -> None:
    """A child's life: limits from argv, then (function, args) in, (ok, value) out, until the
    parent closes the pipe or goes away."""
    read_fd, write_fd, config = int(sys.argv[1]), int(sys.argv[2]), json.loads(sys.argv[3])
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    _die_with_parent()
    if config["nice"]:
        with contextlib.suppress(OSError):  # below the gateway: a job never starves its loop
            os.nice(config["nice"])
    sys.path[:] = config["sys_path"]
    for module in config["preload"]:
        importlib.import_module(module)
    runner_module, _, runner_name = config["runner"].partition(":")
    run: Callable[[Callable[..., Any], tuple[Any, ...]], Reply] = getattr(
        importlib.import_module(runner_module), runner_name
    )
    _cap(resource.RLIMIT_STACK, config["stack_mb"])
    _cap(resource.RLIMIT_AS, config["memory_mb"])
    inbox, outbox = Connection(read_fd, writable=False), Connection(write_fd, readable=False)
    while True:
        try:
            function, args = inbox.recv()
        except (EOFError, OSError):
            return
        outbox.send(run(function, args))


def call(function: Callable[..., Any], args: tuple[Any, ...]) -> Reply:
    try:
        return True, function(*args)
    except Exception as exc:  # the job's own failure: reported, the child goes on
        return False, f"{type(exc).__name__}: {exc}"[:MAX_ERROR_CHARS]


def _cap(which: int, megabytes: int | None) -> None:
    if not megabytes:
        return
    _soft, hard = resource.getrlimit(which)
    wanted = megabytes * 1024 * 1024
    if hard != resource.RLIM_INFINITY:
        wanted = min(wanted, hard)
    resource.setrlimit(which, (wanted, hard))


def _die_with_parent() -> None:
    with contextlib.suppress(OSError, AttributeError):  # Linux only; elsewhere pipes suffice
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


@dataclass(eq=False)  # identity semantics: children live in sets
class Child:
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
        """One round trip; runs in a helper thread. EOFError/OSError: the child died."""
        self.outbox.send((function, args))
        reply: Reply = self.inbox.recv()
        return reply

    def death(self) -> str:
        """How the child ended ("SIGSEGV", "exit 1"), waiting briefly for it to be reaped."""
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(1)
        code = self.process.returncode
        if code is None:
            return "still running"
        if code < 0:
            with contextlib.suppress(ValueError):
                return signal.Signals(-code).name
        return f"exit {code}"

    def kill(self) -> None:
        """SIGKILL (a job stuck in C ignores anything gentler), then reap it."""
        with contextlib.suppress(OSError):
            self.process.kill()
        for connection in (self.outbox, self.inbox):
            with contextlib.suppress(OSError):
                connection.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(5)


def spawn_child(
    preload: Sequence[str],
    memory_mb: int | None,
    stack_mb: int | None,
    *,
    nice: int = NICE,
    runner: str = "gateway.sandbox._child:call",
) -> Child:
    """Start one child interpreter with a pipe each way (blocking: call it in a thread).
    ``runner`` ("module:function") runs each job in the child and maps its errors."""
    to_child_r, to_child_w = os.pipe()
    from_child_r, from_child_w = os.pipe()
    config = {"sys_path": sys.path, "preload": list(preload), "memory_mb": memory_mb,
              "stack_mb": stack_mb, "nice": nice, "runner": runner}  # fmt: skip
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
    return Child(
        process,
        outbox=Connection(to_child_w, readable=False),
        inbox=Connection(from_child_r, writable=False),
    )
