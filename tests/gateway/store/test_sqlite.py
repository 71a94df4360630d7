"""What only the SQLite engine has: its file, its schema version, and its disk (full,
read-only after a crash, unopenable), on real files and a real tmpfs in a namespace."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gateway.errors import StoreUnavailable
from gateway.store import Retention, SqliteStore
from tests import namespaces
from tests.gateway.store.engines import DAY, record


def scenario(name: str, tmp_path: Path, size: str) -> dict[str, Any]:
    reason = namespaces.unavailable()
    if reason is not None:
        pytest.skip(reason)
    folder = tmp_path / "disk"
    folder.mkdir()
    command = [sys.executable, "-m", "tests.gateway.store.disk_faults", name, str(folder)]
    done = subprocess.run(
        namespaces.on_tmpfs(folder, size, command), capture_output=True, timeout=300
    )
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    return json.loads(done.stdout.decode().strip().splitlines()[-1])  # type: ignore[no-any-return]


async def test_the_file_is_made_on_first_use_in_wal_mode(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "responses.sqlite3"
    store = SqliteStore(path, Retention(10, DAY))
    assert not path.exists()  # nothing is created until a response is stored or read
    await store.put(record("resp_1"))
    await store.close()
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert db.execute("PRAGMA user_version").fetchone() == (4,)
        assert db.execute("PRAGMA auto_vacuum").fetchone() == (2,)  # incremental


async def test_a_version_1_file_is_migrated_and_its_sizes_counted(tmp_path: Path) -> None:
    path = tmp_path / "responses.sqlite3"
    stored = record("resp_old")
    response, items = stored.encoded()
    with sqlite3.connect(path) as db:
        db.execute(
            "CREATE TABLE responses (id TEXT PRIMARY KEY, scope TEXT NOT NULL, created_at REAL "
            "NOT NULL, previous_id TEXT, response TEXT NOT NULL, input_items TEXT NOT NULL)"
        )
        db.execute("INSERT INTO responses VALUES (?, '', ?, NULL, ?, ?)",
                   ("resp_old", stored.created_at, response, items))  # fmt: skip
        db.execute("PRAGMA user_version = 1")
    store = SqliteStore(path, Retention(10, DAY, max_bytes_per_scope=len(response) + len(items)))
    assert await store.get("resp_old", "") is not None
    with pytest.raises(Exception, match="quota"):  # the old row counts against the quota
        await store.check_room("", 1)
    await store.close()


async def test_a_store_that_cannot_open_its_file_is_unavailable_then_heals(
    tmp_path: Path,
) -> None:
    """The setup that failed leaves no handle open and is tried again on the next call."""
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    store = SqliteStore(blocker / "responses.sqlite3", Retention(10, DAY))
    for _ in range(3):
        with pytest.raises(StoreUnavailable) as raised:
            await store.put(record("resp_1"))
        assert raised.value.status_code == 503 and raised.value.retry_after_s
    blocker.unlink()
    blocker.mkdir()
    await store.put(record("resp_1"))
    assert await store.get("resp_1", "") is not None
    await store.close()


async def test_a_corrupt_file_is_reported_and_its_connection_closed(tmp_path: Path) -> None:
    path = tmp_path / "responses.sqlite3"
    path.write_bytes(b"this is not a database" * 100)
    store = SqliteStore(path, Retention(10, DAY))
    with pytest.raises(Exception) as raised:
        await store.get("resp_1", "")
    assert getattr(raised.value, "code", None) == "store_failed"
    await store.close()


def test_a_full_disk_refuses_writes_but_deletes_free_space(tmp_path: Path) -> None:
    seen = scenario("full", tmp_path, "16m")
    assert seen["refused"] == "store_full" and seen["stored"] > 5
    assert all(seen["deleted"]) and seen["gone"]  # deleting works on the full disk
    assert seen["again"]  # and the space it freed is used again


def test_a_read_only_disk_after_a_crash_is_refused_then_heals_without_a_restart(
    tmp_path: Path,
) -> None:
    seen = scenario("read_only", tmp_path, "16m")
    assert seen["wal_left"]
    assert seen["codes"] == ["store_unavailable"]
    assert seen["leaked"] <= 2  # 40 refused calls, no handle kept (the bug: 26-36)
    assert seen["found"] and seen["deleted"]
