"""The supervisor's pieces that need no Triton: how many workers, the settings a worker gets,
the socket they share, and `mmgw serve --workers`."""

from __future__ import annotations

import os
import socket
import time

import pytest

from gateway.cli import _parser, settings_from_args
from gateway.config import ServedModel, Settings
from gateway.workers import WorkerSockets, balances_by_port, listening_socket, worker_count


def test_auto_is_one_per_core_but_one_and_never_none() -> None:
    cores = len(os.sched_getaffinity(0))
    assert worker_count("auto") == max(1, cores - 1)
    assert worker_count(3) == 3


def test_workers_point_at_the_supervisor_s_triton_and_launch_nothing() -> None:
    own = ServedModel(id="own", family="llava", triton_model="m", triton_url="triton:8001")
    embedded = ServedModel(id="ref", family="llava", triton_model="reference_llava")
    settings = Settings(models=[own, embedded])
    worker = settings.with_embedded_at("127.0.0.1:9001")
    assert not worker.needs_embedded and worker.embedded.enabled is False
    assert [m.triton_url for m in worker.models] == ["triton:8001", "127.0.0.1:9001"]
    assert worker.models[1].tokenizer == settings.embedded.tokenizers_dir / "reference_llava"
    assert worker.models[0].tokenizer is None


def test_workers_serve_the_supervisor_s_embedded_replicas_as_one_set() -> None:
    embedded = ServedModel(id="ref", family="llava", triton_model="reference_llava")
    settings = Settings(models=[embedded], embedded={"replicas": 2})
    worker = settings.with_embedded_at("127.0.0.1:9001,127.0.0.1:9002")
    # What the worker reads back from the settings file the supervisor writes.
    loaded = Settings.model_validate_json(worker.model_dump_json())
    assert loaded.models[0].triton_url == ["127.0.0.1:9001", "127.0.0.1:9002"]
    assert loaded.models[0].triton_target == "127.0.0.1:9001,127.0.0.1:9002"


def test_the_shared_socket_is_listening_and_inherited() -> None:
    sock = listening_socket("127.0.0.1", 0)
    try:
        assert sock.get_inheritable()
        client = socket.create_connection(sock.getsockname(), timeout=2)
        client.close()
    finally:
        sock.close()


def accepted(sock: socket.socket) -> int:
    """How many connections wait on ``sock`` (accepted and closed here)."""
    sock.setblocking(False)
    count = 0
    while True:
        try:
            conn, _ = sock.accept()
        except BlockingIOError:
            return count
        conn.close()
        count += 1


@pytest.mark.skipif(not balances_by_port(), reason="SO_REUSEPORT balances only on Linux")
def test_every_worker_gets_its_own_socket_and_a_share_of_the_connections() -> None:
    sockets = WorkerSockets.bind("127.0.0.1", 0, 3)
    try:
        assert sockets.per_worker and sockets.address[1] != 0
        own = [sockets.of(slot) for slot in range(3)]
        assert len({s.fileno() for s in own}) == 3
        assert all(s.getsockname() == sockets.address and s.get_inheritable() for s in own)
        clients = [socket.create_connection(sockets.address, timeout=2) for _ in range(90)]
        time.sleep(0.2)  # the handshakes complete in the kernel; nothing accepts yet
        shares = [accepted(s) for s in own]
        for client in clients:
            client.close()
        # The kernel hashes each connection to one socket: all arrive, none left out
        # (one socket taking none of 90 has odds of about 1e-15).
        assert sum(shares) == 90 and min(shares) > 0, shares
    finally:
        sockets.close()


@pytest.mark.skipif(not balances_by_port(), reason="SO_REUSEPORT balances only on Linux")
def test_a_released_slot_s_share_goes_to_the_others_until_it_is_bound_again() -> None:
    sockets = WorkerSockets.bind("127.0.0.1", 0, 2)
    try:
        sockets.release(1)
        clients = [socket.create_connection(sockets.address, timeout=2) for _ in range(20)]
        time.sleep(0.2)
        assert accepted(sockets.of(0)) == 20
        renewed = sockets.of(1)  # bound again on the same port for the replacement
        assert renewed.getsockname() == sockets.address
        for client in clients:
            client.close()
    finally:
        sockets.close()


@pytest.mark.skipif(not balances_by_port(), reason="SO_REUSEPORT balances only on Linux")
def test_a_port_another_group_listens_on_is_refused_not_shared() -> None:
    other = WorkerSockets.bind("127.0.0.1", 0, 2)  # another gateway's workers, same user
    try:
        with pytest.raises(OSError):
            WorkerSockets.bind("127.0.0.1", other.address[1], 2)
    finally:
        other.close()


def test_one_worker_or_no_balancing_shares_one_socket() -> None:
    sockets = WorkerSockets.bind("127.0.0.1", 0, 1)
    try:
        assert not sockets.per_worker and sockets.of(0) is sockets.of(5)
    finally:
        sockets.close()


@pytest.mark.parametrize(("given", "expected"), [("4", 4), ("auto", "auto"), (None, 1)])
def test_the_workers_flag(given: str | None, expected: object) -> None:
    argv = ["serve", *(["--workers", given] if given else [])]
    assert settings_from_args(_parser().parse_args(argv)).server.workers == expected


def test_a_nonsense_worker_count_is_a_configuration_error() -> None:
    with pytest.raises(ValueError, match="workers"):
        settings_from_args(_parser().parse_args(["serve", "--workers", "0"]))
