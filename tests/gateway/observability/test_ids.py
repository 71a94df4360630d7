"""Request and completion ids: 32 hex digits, unique, and not repeated by a forked worker."""

from __future__ import annotations

import os
import re

import pytest

from gateway.observability.ids import hex_id


def test_ids_are_uuid4_hex_shaped_and_unique() -> None:
    ids = [hex_id() for _ in range(10_000)]
    assert all(re.fullmatch(r"[0-9a-f]{32}", i) for i in ids)
    assert len(set(ids)) == len(ids)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="POSIX fork")
def test_a_forked_worker_does_not_repeat_its_parents_ids() -> None:
    """Workers forked from one process would otherwise continue the same sequence: the
    parent's next id and the child's first would be the same."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its first id, then out
        os.write(write, hex_id().encode())
        os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    child = os.read(read, 64).decode()
    os.close(read)
    assert re.fullmatch(r"[0-9a-f]{32}", child)
    assert child != hex_id()
