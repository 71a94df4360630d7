"""Nothing of a dead tritonserver stays on the machine: its stubs are killed, its Python
backend's shared-memory regions removed.

What Triton 2.51 leaves when it dies (checked on the wheel's server): each model instance runs
in a ``triton_python_backend_stub`` that tritonserver forks into its own process group (the
launcher starts the server with ``start_new_session=True``, so the group id is the server's
pid). A stub whose server died notices within ~300 ms and exits, unless it was sending
responses at that moment: then every one of its threads waits on a futex for ever, and the stub
lives on under PID 1, holding its memory and its ``/dev/shm`` region, which nobody removes
(the server unlinks the regions only when it unloads a model).

Other Tritons may run on the same machine (other gateways, other tests), so only what belongs
to one launch is touched. The launcher names it: each launch passes a fresh ``tag`` as the
Python backend's region prefix (``--backend-config=python,shm-region-prefix-name=TAG``), so
the server carries the tag in its arguments, every stub in its region argument
(``TAG<uuid>``), and every region file starts with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import signal
import sys
from dataclasses import dataclass, field
from pathlib import Path

SHM_DIR = Path("/dev/shm")
TAG_PREFIX = "mmgw_triton_"
# A killed process is gone at once unless it sleeps in the kernel; past this, it is reported.
REAP_WAIT_S = 10.0


def new_tag() -> str:
    """A region prefix no other launch uses: this gateway's pid and 8 random hex digits."""
    return f"{TAG_PREFIX}{os.getpid()}_{secrets.token_hex(4)}_"


@dataclass(frozen=True)
class _Process:
    pid: int
    pgid: int


def _scan(tag: str, pgid: int | None) -> tuple[list[_Process], list[int]]:
    """Live (not zombie) processes with ``tag`` in their command line, and the pids of live
    members of process group ``pgid``."""
    needle = tag.encode()
    tagged, group = [], []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            fields = stat[stat.rindex(")") + 2 :].split()
            if fields[0] == "Z":
                continue
            if int(fields[2]) == pgid:
                group.append(int(entry.name))
            if needle in (entry / "cmdline").read_bytes():
                tagged.append(_Process(int(entry.name), int(fields[2])))
        except (OSError, ValueError):  # gone meanwhile, or not ours to read
            continue
    return tagged, group


def _kill_if_tagged(pid: int, tag: str) -> None:
    """SIGKILL ``pid`` if it still carries ``tag``; through a pidfd where Linux has them, so a
    pid reused between the check and the signal is never hit."""
    with contextlib.suppress(ProcessLookupError, FileNotFoundError, PermissionError):
        if not hasattr(os, "pidfd_open"):
            if tag.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                os.kill(pid, signal.SIGKILL)
            return
        pidfd = os.pidfd_open(pid)
        try:
            if tag.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        finally:
            os.close(pidfd)


@dataclass
class Leftovers:
    """What one clean-up found and removed."""

    killed: list[int] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    survivors: list[int] = field(default_factory=list)

    def __str__(self) -> str:
        text = f"killed {len(self.killed)} leftover process(es) {self.killed}, "
        text += f"removed {len(self.removed)} shared-memory file(s)"
        if self.survivors:
            text += f"; still alive after SIGKILL: {self.survivors}"
        return text


async def reap(pgid: int | None, tag: str, wait_s: float = REAP_WAIT_S) -> Leftovers:
    """SIGKILL every process of one launch and remove its shared-memory regions.

    ``pgid`` is the server's process group (its pid). It is signalled as a whole only while a
    process carrying ``tag`` is still in it: that member keeps the group id from being given to
    anyone else, so the signal cannot reach another program's group. This also kills what
    the models started themselves (same group, no tag) along with the stubs. Tagged processes
    outside the group are killed one by one. Waits up to ``wait_s`` for them to go.
    """
    if not sys.platform.startswith("linux"):
        return Leftovers()
    tagged, group = _scan(tag, pgid)
    ours = pgid is not None and any(p.pgid == pgid for p in tagged)
    leftovers = Leftovers(killed=sorted({p.pid for p in tagged} | set(group if ours else ())))
    if ours:
        assert pgid is not None
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)
    for process in tagged:
        _kill_if_tagged(process.pid, tag)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait_s
    remaining = leftovers.killed
    while remaining and loop.time() < deadline:
        await asyncio.sleep(0.05)
        tagged, group = _scan(tag, pgid)
        remaining = sorted({p.pid for p in tagged} | set(group if ours else ()))
    leftovers.survivors = remaining
    leftovers.removed = remove_regions(tag)
    return leftovers


def remove_regions(tag: str) -> list[str]:
    """Unlink the ``/dev/shm`` files whose names start with ``tag``; returns their names."""
    removed = []
    with contextlib.suppress(OSError):
        for path in SHM_DIR.glob(f"{tag}*"):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
                removed.append(path.name)
    return removed
