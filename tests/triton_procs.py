"""What a running tritonserver left on the machine, read from /proc and /dev/shm.

Independent of the launcher: a server's Python-backend stubs are found as its children, and
each stub's shared-memory region is the second argument of its command line (Triton 2.51's
``triton_python_backend_stub MODEL.py SHM_REGION ...``). Captured before a crash, the
snapshot tells afterwards whether anything of the dead server is still there.
"""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass
from pathlib import Path

SHM = Path("/dev/shm")


def _cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, ppid) of a process, or None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()
    return fields[0], int(fields[1])


def children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            stat = _stat(int(entry.name))
            if stat is not None and stat[1] == pid:
                found.append(int(entry.name))
    return found


@dataclass(frozen=True)
class Stub:
    pid: int
    cmdline: tuple[str, ...]
    shm_region: str

    @property
    def alive(self) -> bool:
        """Still running as the same process (a zombie or a reused pid does not count)."""
        stat = _stat(self.pid)
        return stat is not None and stat[0] != "Z" and tuple(_cmdline(self.pid)) == self.cmdline

    @property
    def rss_mb(self) -> float:
        try:
            for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        except OSError:
            pass
        return 0.0


@dataclass(frozen=True)
class ServerSnapshot:
    """One tritonserver's stubs and their shared-memory files, captured while it runs."""

    pid: int
    stubs: tuple[Stub, ...]

    @classmethod
    def of(cls, server_pid: int) -> ServerSnapshot:
        stubs = []
        for pid in children(server_pid):
            cmd = _cmdline(pid)
            if cmd and cmd[0].endswith("triton_python_backend_stub") and len(cmd) > 2:
                stubs.append(Stub(pid, tuple(cmd), cmd[2]))
        return cls(server_pid, tuple(stubs))

    @property
    def shm_files(self) -> list[Path]:
        return [SHM / stub.shm_region for stub in self.stubs]

    def orphans(self) -> list[Stub]:
        return [stub for stub in self.stubs if stub.alive]

    def leftover_shm(self) -> list[Path]:
        return [path for path in self.shm_files if path.exists()]

    async def wait_gone(self, within_s: float) -> tuple[list[Stub], list[Path]]:
        """Poll until no stub or shm file of this server remains, for up to ``within_s``;
        returns what remains then."""
        deadline = time.monotonic() + within_s
        while True:
            orphans, shm = self.orphans(), self.leftover_shm()
            if (not orphans and not shm) or time.monotonic() > deadline:
                return orphans, shm
            await asyncio.sleep(0.1)


def process_group(pgid: int) -> list[int]:
    """Live (not zombie) processes whose process group is ``pgid``."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            text = (entry / "stat").read_text()
        except OSError:
            continue
        fields = text[text.rindex(")") + 2 :].split()
        if fields[0] != "Z" and int(fields[2]) == pgid:
            members.append(int(entry.name))
    return members


def alive(pid: int) -> bool:
    stat = _stat(pid)
    return stat is not None and stat[0] != "Z"


def shm_names() -> set[str]:
    return set(os.listdir(SHM)) if SHM.is_dir() else set()
