"""Route tests: the real app in front of an in-process fake Triton (tests/fakes/triton.py).

One fake serves the session; each test gets it reset. Gateways are built once per settings
variant (``gateways.py``), on first use. Media is decoded on threads of the test process
(``InProcessDecoder``): no route test starts a decode worker process (``no_decode_workers``
holds them to it); the worker processes are tested in tests/gateway/media and e2e.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from gateway.media.offload import Offloader
from tests.fakes.app import FakeGateway, http_client
from tests.fakes.triton import FakeTriton
from tests.gateway.routes.gateways import Gateways


@pytest.fixture(autouse=True)
def no_decode_workers(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Starting the media worker pool in a route test fails it: each worker is a fresh
    interpreter (about half a second of CPU here), and the routes need none. A test marked
    ``decode_workers`` (what only a worker process can show: a PDF renderer killed on its
    time budget) may start it. Patched per test, so tests elsewhere in the same session (the
    pipeline's, the media's) start their pools as they should."""
    if request.node.get_closest_marker("decode_workers") is not None:
        return

    async def refused(self: Offloader) -> None:
        raise AssertionError("a route test started decode worker processes; decode in-process")

    monkeypatch.setattr(Offloader, "start", refused)


@pytest.fixture(scope="session")
def session_fake() -> FakeTriton:
    return FakeTriton()


@pytest.fixture(scope="session")
async def gateways(session_fake: FakeTriton) -> AsyncIterator[Gateways]:
    built = Gateways(session_fake)
    yield built
    await built.aclose()


@pytest.fixture
def fake(session_fake: FakeTriton) -> FakeTriton:
    """The fake Triton, reset: default script, up and ready, no requests recorded."""
    session_fake.reset()
    return session_fake


@pytest.fixture
async def gateway(gateways: Gateways, fake: FakeTriton) -> FakeGateway:
    return await gateways.get("default")


@pytest.fixture
async def http(gateway: FakeGateway) -> AsyncIterator[httpx.AsyncClient]:
    async with http_client(gateway.app) as client:
        yield client
