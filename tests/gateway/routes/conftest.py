"""Route tests: the real app in front of an in-process fake Triton (tests/fakes/triton.py).

One fake serves the session; each test gets it reset. Gateways are built once per settings
variant (``gateways.py``), on first use: building one starts a media decoding worker.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from tests.fakes.app import FakeGateway, http_client
from tests.fakes.triton import FakeTriton
from tests.gateway.routes.gateways import Gateways


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
