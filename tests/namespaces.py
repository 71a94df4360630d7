"""A command run in a mount namespace of its own, over a tmpfs it mounts: how the tests get a
disk that fills up or turns read-only without touching the machine's real mounts.

``unshare --user --map-root-user --mount`` needs no privilege where unprivileged user
namespaces are allowed, and works as root (CI). Inside, the command is "root" of its namespace:
it may ``mount -o remount,ro`` its tmpfs; so may another process that joins the namespace with
``nsenter`` (``remount``).
"""

from __future__ import annotations

import functools
import shlex
import subprocess
from pathlib import Path

UNSHARE = ["unshare", "--user", "--map-root-user", "--mount", "--propagation", "private"]


@functools.cache
def unavailable() -> str | None:
    """Why mount namespaces cannot be used here, or None when they can."""
    try:
        probe = subprocess.run(
            [*UNSHARE, "sh", "-c", "mount -t tmpfs tmpfs /mnt && mount -o remount,ro /mnt"],
            capture_output=True, timeout=30,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unshare cannot run: {exc}"
    if probe.returncode != 0:
        return f"no mount namespace with a tmpfs here: {probe.stderr.decode().strip()}"
    return None


def on_tmpfs(folder: Path, size: str, command: list[str]) -> list[str]:
    """``command`` in a new namespace, with a tmpfs of ``size`` mounted on ``folder``."""
    mount = f"mount -t tmpfs -o size={size} tmpfs {shlex.quote(str(folder))}"
    return [*UNSHARE, "sh", "-c", f'{mount} && exec "$@"', "sh", *command]


def on_bind_mount(folder: Path, mode: str, command: list[str]) -> list[str]:
    """``command`` in a new namespace where ``folder`` is bind-mounted on itself, ``ro`` or
    ``rw``: its files stay on the real disk (they outlive the process), only this namespace
    sees them read-only."""
    where = shlex.quote(str(folder))
    mount = f"mount --bind {where} {where} && mount -o remount,bind,{mode} {where}"
    return [*UNSHARE, "sh", "-c", f'{mount} && exec "$@"', "sh", *command]


def remount(pid: int, folder: Path, mode: str) -> None:
    """Make the mount that process ``pid`` has on ``folder`` ``ro`` or ``rw`` (``mode`` may
    carry more options: ``bind,ro``)."""
    subprocess.run(
        ["nsenter", "-t", str(pid), "--user", "--mount", "--preserve-credentials",
         "mount", "-o", f"remount,{mode}", str(folder)],
        check=True, capture_output=True, timeout=30,
    )  # fmt: skip
