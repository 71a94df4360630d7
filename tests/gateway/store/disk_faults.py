"""The SQLite store on a disk that fills up or turns read-only: scenarios run inside a mount
namespace over a small tmpfs (``tests/namespaces.py``), each printing what it saw as one JSON
line: ``python -m tests.gateway.store.disk_faults SCENARIO FOLDER``."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from gateway.errors import StoreFull, StoreUnavailable
from gateway.store import Retention, SqliteStore
from tests.gateway.store.engines import DAY, record

BIG = "x" * 256 * 1024


def open_files() -> int:
    return len(os.listdir("/proc/self/fd"))


async def full(folder: Path) -> dict[str, Any]:
    """Store until the disk is full; then delete through the store, and store again."""
    store = SqliteStore(folder / "responses.sqlite3", Retention(100_000, DAY))
    stored = 0
    refused = ""
    while stored < 200:
        try:
            await store.put(record(f"resp_{stored:03d}", text=BIG))
        except StoreFull as exc:
            refused = exc.code
            break
        stored += 1
    deleted = [await store.delete(f"resp_{n:03d}", "") for n in range(min(stored, 12))]
    gone = await store.get("resp_000", "") is None
    await store.put(record("resp_again", text="small"))
    again = await store.get("resp_again", "") is not None
    await store.close()
    return {"stored": stored, "refused": refused, "deleted": deleted, "gone": gone,
            "again": again}  # fmt: skip


def crash_after_a_write(path: Path) -> None:
    """A process that stores a response and is killed (SIGKILL) before it closes: its WAL
    files stay beside the database."""
    script = (
        "import asyncio, os, signal\n"
        "from gateway.store import Retention, SqliteStore\n"
        "from tests.gateway.store.engines import record\n"
        f"store = SqliteStore(__import__('pathlib').Path({str(path)!r}), Retention(10, 86400))\n"
        "asyncio.run(store.put(record('resp_kept')))\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    subprocess.run([sys.executable, "-c", script], check=False, timeout=60)


async def read_only(folder: Path) -> dict[str, Any]:
    """A crash leaves the WAL, the disk comes back read-only: every call is refused 503 and
    leaks no file handle; once the disk is writable, the same store serves again."""
    path = folder / "responses.sqlite3"
    crash_after_a_write(path)
    wal_left = path.with_name(path.name + "-wal").exists()
    subprocess.run(["mount", "-o", "remount,ro", str(folder)], check=True)
    store = SqliteStore(path, Retention(10, DAY))
    codes: list[str] = []
    before = open_files()
    for _ in range(40):
        try:
            await store.get("resp_kept", "")
            codes.append("ok")
        except StoreUnavailable as exc:
            codes.append(exc.code)
    leaked = open_files() - before
    subprocess.run(["mount", "-o", "remount,rw", str(folder)], check=True)
    started = time.monotonic()
    found = await store.get("resp_kept", "")
    healed_s = time.monotonic() - started
    await store.put(record("resp_new"))
    deleted = await store.delete("resp_kept", "")
    await store.close()
    return {"wal_left": wal_left, "codes": sorted(set(codes)), "leaked": leaked,
            "found": found is not None, "healed_s": healed_s, "deleted": deleted}  # fmt: skip


def main() -> None:
    scenario, folder = sys.argv[1], Path(sys.argv[2])
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    result = asyncio.run({"full": full, "read_only": read_only}[scenario](folder))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
