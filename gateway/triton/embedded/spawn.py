"""Children that die with the gateway: Linux's parent-death signal, set without a
``preexec_fn`` (which would make Python fork instead of vfork; see ``ParentBound``)."""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

PR_SET_PDEATHSIG = 1


def die_with_parent(parent_pid: int | None = None) -> None:
    """In the child: ask Linux to SIGTERM it if the gateway dies without cleaning up (and exit
    at once if ``parent_pid`` is already gone: the signal would never come)."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
        if parent_pid is not None and os.getppid() != parent_pid:
            os._exit(1)


# The child's first step before it becomes ``tritonserver``: its parent-death signal, then exec
# with the environment meant for the server. Not a ``preexec_fn``: with one, Python forks
# instead of vforking, and grpc's fork handlers (the gateway holds gRPC channels) can freeze
# the forked child on a lock before it reaches exec (seen: a child stuck on a futex with
# grpc's event_engine threads, and a start-up that never ends). The shim runs in the gateway's
# own environment (isolated: -I -S); the server's comes through a pipe, not the command line,
# which any user of the host can read (the environment may hold API keys).
_SHIM = (
    "import ctypes, json, os, sys\n"
    "try:\n"
    "    ctypes.CDLL(None).prctl(1, 15)\n"  # PR_SET_PDEATHSIG, SIGTERM (Linux)
    "except AttributeError:\n"
    "    pass\n"  # elsewhere: the watchdog and the process group are what is left
    "os.getppid() == int(sys.argv[1]) or os._exit(1)\n"  # the gateway is gone already
    "env = json.load(os.fdopen(int(sys.argv[2])))\n"
    "os.execvpe(sys.argv[3], sys.argv[3:], env)\n"
)


@dataclass
class ParentBound:
    """A command that dies with this process, and the environment it will run with: start
    ``argv`` with ``pass_fds``, then ``hand_over()`` the environment."""

    argv: list[str]
    pass_fds: tuple[int, ...]
    _env: bytes
    _write: int

    @classmethod
    def of(cls, command: Sequence[str], env: Mapping[str, str]) -> ParentBound:
        read, write = os.pipe()
        shim = [sys.executable, "-I", "-S", "-c", _SHIM, str(os.getpid()), str(read)]
        return cls([*shim, *command], (read,), json.dumps(dict(env)).encode(), write)

    def hand_over(self) -> None:
        """Write the environment to the started shim (it execs once it has read it all)."""
        os.close(self.pass_fds[0])  # the child has its own copy
        with contextlib.suppress(BrokenPipeError), os.fdopen(self._write, "wb") as pipe:
            pipe.write(self._env)

    def abandon(self) -> None:
        """The child never started: close both ends."""
        for fd in (*self.pass_fds, self._write):
            with contextlib.suppress(OSError):
                os.close(fd)
