"""The supervisor's pieces that need no Triton: how many workers, the settings a worker gets,
the socket they share, and `mmgw serve --workers`."""

from __future__ import annotations

import os
import socket

import pytest

from gateway.cli import _parser, settings_from_args
from gateway.config import ServedModel, Settings
from gateway.workers import listening_socket, worker_count


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


@pytest.mark.parametrize(("given", "expected"), [("4", 4), ("auto", "auto"), (None, 1)])
def test_the_workers_flag(given: str | None, expected: object) -> None:
    argv = ["serve", *(["--workers", given] if given else [])]
    assert settings_from_args(_parser().parse_args(argv)).server.workers == expected


def test_a_nonsense_worker_count_is_a_configuration_error() -> None:
    with pytest.raises(ValueError, match="workers"):
        settings_from_args(_parser().parse_args(["serve", "--workers", "0"]))
