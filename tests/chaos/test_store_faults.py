"""The SQLite response store of a real gateway process (the launcher over the fake Triton) on a
disk that comes back read-only after a crash (issue 22, item 6).

The gateway is killed (SIGKILL) after storing a response, so its WAL files stay; it is started
again in a mount namespace where the store's folder is read-only (a bind mount of the real
folder). Every store request is then 503 ``store_unavailable`` with Retry-After, and the
process keeps no file handle per request (the bug: 26-36 leaked per 40 requests). The folder is
made writable again from outside the process: the same process serves the stored response,
continues it and deletes it, with no restart (the bug: 500 until a restart).
"""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import httpx
import pytest

from tests import namespaces
from tests.chaos.clients import launch

URL = "/v1/responses"
ASK = {"model": "fake-llava", "input": "Remember me."}


def open_files(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


async def test_a_store_read_only_after_a_crash_is_503_then_heals_without_a_restart(
    tmp_path: Path,
) -> None:
    reason = namespaces.unavailable()
    if reason is not None:
        pytest.skip(reason)
    folder = tmp_path / "store"
    folder.mkdir()
    sections = {"responses": {"store_path": str(folder / "responses.sqlite3")}}
    async with launch({}, sections=sections) as first:
        async with httpx.AsyncClient(base_url=first.url, trust_env=False, timeout=30) as http:
            created = (await http.post(URL, json=ASK)).json()
        first.process.send_signal(signal.SIGKILL)
        await first.process.wait()
    assert (folder / "responses.sqlite3-wal").exists()  # the crash left its WAL

    def read_only(command: list[str]) -> list[str]:
        return namespaces.on_bind_mount(folder, "ro", command)

    async with launch({}, sections=sections, wrap=read_only) as second:
        pid = second.process.pid
        path = f"{URL}/{created['id']}"
        async with httpx.AsyncClient(base_url=second.url, trust_env=False, timeout=30) as http:
            await http.get(path)  # the first attempt's own imports and threads
            before = open_files(pid)
            for index in range(40):
                call = http.get(path) if index % 2 else http.post(URL, json=ASK)
                refused = await call
                assert refused.status_code == 503, refused.text
                assert refused.json()["error"]["code"] == "store_unavailable"
                assert refused.headers["retry-after"] == "1"
            assert open_files(pid) - before <= 2
            unstored = await http.post(URL, json={**ASK, "store": False})
            assert unstored.status_code == 200  # what needs no store is served throughout
            await asyncio.to_thread(namespaces.remount, pid, folder, "bind,rw")
            assert (await http.get(path)).json() == created
            follow = await http.post(URL, json={**ASK, "previous_response_id": created["id"]})
            assert follow.status_code == 200, follow.text
            assert (await http.delete(path)).status_code == 200
