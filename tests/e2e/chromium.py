"""Debian's Chromium for the browser tests: found, installed with apt-get, or a skip reason.

The suite installs what it needs (the README's test command is all CI runs), but a
browser is not a pip package: Playwright's own download needs the open internet, so the
tests drive Debian's ``chromium`` instead, installing it when root and apt-get allow.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

CHROMIUM = Path(os.environ.get("MMGW_TEST_CHROMIUM", "/usr/bin/chromium"))
APT_TIMEOUT_S = 900
# Without the background-networking flags Chromium keeps calling home, which on a closed
# network means a flood of failing connections; the profile is Playwright's fresh temp dir.
LAUNCH_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def _apt(*args: str) -> tuple[bool, str]:
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    try:
        done = subprocess.run(
            ["apt-get", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=APT_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, str(exc)
    return done.returncode == 0, (done.stderr or done.stdout)[-600:]


def ensure_chromium() -> tuple[Path | None, str]:
    """``(path, "")`` when Chromium is there or could be installed, else ``(None, reason)``."""
    if CHROMIUM.exists():
        return CHROMIUM, ""
    if not sys.platform.startswith("linux") or shutil.which("apt-get") is None:
        return None, f"{CHROMIUM} is missing and there is no apt-get to install Debian's chromium"
    if os.geteuid() != 0:
        return None, f"{CHROMIUM} is missing; installing Debian's chromium needs root"
    ok, detail = _apt("install", "-y", "chromium")
    if not ok:  # a fresh machine often has no package lists yet
        _apt("update")
        ok, detail = _apt("install", "-y", "chromium")
    if not ok:
        return None, f"apt-get install -y chromium failed: {detail.strip()}"
    if not CHROMIUM.exists():
        return None, f"apt-get installed chromium, but {CHROMIUM} is still missing"
    return CHROMIUM, ""
