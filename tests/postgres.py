"""A private PostgreSQL server for the tests: ``initdb`` in a temporary folder, listening on a
free loopback port (its unix socket in that folder too), stopped and removed at the end.

PostgreSQL refuses to run as root, and CI runs as root: there the cluster belongs to
``nobody`` and every server command runs as that user; a normal user runs it as itself.
Skipped, with the reason, only where the server binaries are not installed.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path

import asyncpg

from gateway.triton.embedded import free_loopback_port

SETTINGS = (
    "-c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off "
    "-c full_page_writes=off -c shared_buffers=16MB -c max_connections=60"
)


def server_binaries() -> Path | None:
    """The folder of ``initdb`` and ``pg_ctl``: on PATH, else Debian's newest."""
    found = shutil.which("initdb")
    if found and shutil.which("pg_ctl"):
        return Path(found).parent
    folders = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(p.split("/")[-2]))
    return Path(folders[-1]) if folders else None


class PostgresServer:
    """One cluster; ``stop()`` and ``start()`` again keep its data and port (a restart)."""

    def __init__(self, binaries: Path) -> None:
        self.binaries = binaries
        self.folder = Path(tempfile.mkdtemp(prefix="mmgw-pg-"))
        self.data = self.folder / "data"
        self.port = free_loopback_port()
        self._as: list[str] = []
        if os.geteuid() == 0:  # postgres will not run as root
            nobody = pwd.getpwnam("nobody")
            os.chown(self.folder, nobody.pw_uid, nobody.pw_gid)
            # Through setpriv, not subprocess's user=/group=: with those Python forks instead of
            # vforking, and in a test process holding gRPC channels, gRPC's fork handlers can
            # freeze the child before it execs (a session once hung on such a pg_ctl).
            self._as = ["setpriv", f"--reuid={nobody.pw_uid}", f"--regid={nobody.pw_gid}",
                        "--clear-groups", "--"]  # fmt: skip

    def _run(self, *command: str) -> None:
        subprocess.run(
            [*self._as, str(self.binaries / command[0]), *command[1:]], check=True,
            cwd=self.folder, capture_output=True, timeout=120, env={**os.environ, "LC_ALL": "C"},
        )  # fmt: skip

    def init(self) -> None:
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust",
                  "-E", "UTF8", "--no-sync")  # fmt: skip

    def start(self) -> None:
        options = f"{SETTINGS} -p {self.port} -k {self.folder}"
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.folder / "log"), "-w",
                  "-t", "60", "-o", options, "start")  # fmt: skip

    def stop(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")

    def remove(self) -> None:
        with contextlib.suppress(subprocess.CalledProcessError):  # already stopped
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
        shutil.rmtree(self.folder, ignore_errors=True)

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    async def new_database(self) -> str:
        """A fresh, empty database's URL: each test its own."""
        name = f"t_{uuid.uuid4().hex[:12]}"
        connection = await asyncpg.connect(self.url())
        try:
            await connection.execute(f"CREATE DATABASE {name}")
        finally:
            await connection.close()
        return self.url(name)
