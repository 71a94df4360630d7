"""Session-wide fixtures: one real co-launched tritonserver over server_repo/reference."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from gateway.triton.embedded import EmbeddedTriton
from tests.postgres import PostgresServer, server_binaries

REPO_ROOT = Path(__file__).resolve().parent.parent
REFERENCE_REPOSITORY = REPO_ROOT / "server_repo" / "reference"


def reference_triton(reference_cache: Path, **options: Any) -> EmbeddedTriton:
    """The wheel's tritonserver over the reference repository, on CPU, its weights and
    tokenizers in ``reference_cache`` (``options``: ``models``, ``ready_timeout_s``...)."""
    return EmbeddedTriton(
        REFERENCE_REPOSITORY,
        env={
            "MMGW_REFERENCE_CACHE": str(reference_cache),
            "MMGW_REFERENCE_DEVICE": "cpu",
            "MMGW_REFERENCE_TOKENIZERS": str(reference_cache / "tokenizers"),
        },
        **options,
    )


@pytest.fixture(scope="session")
def reference_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where tiny reference weights are generated; shared by Triton and in-process checks."""
    configured = os.environ.get("MMGW_REFERENCE_CACHE")
    return Path(configured) if configured else tmp_path_factory.mktemp("reference-cache")


@pytest.fixture(scope="session")
async def embedded_triton(reference_cache: Path) -> AsyncIterator[EmbeddedTriton]:
    """The real tritonserver from the nvidia-pytriton wheel serving the reference models."""
    server = reference_triton(reference_cache)
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """A private PostgreSQL cluster on a loopback port for the whole session."""
    binaries = server_binaries()
    if binaries is None:
        pytest.skip("PostgreSQL's server binaries (initdb, pg_ctl) are not installed")
    server = PostgresServer(binaries)
    try:
        server.init()
        server.start()
        yield server
    finally:
        server.remove()


@pytest.fixture
async def postgres_url(postgres_server: PostgresServer) -> str:
    """A fresh database on the session's server, for one test."""
    return await postgres_server.new_database()
