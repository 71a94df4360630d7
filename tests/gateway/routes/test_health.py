"""/health is ready only when Triton is and has every served model loaded; /health/live only
says the process runs."""

from __future__ import annotations

import httpx

from tests.fakes.triton import FakeTriton


async def test_ready_when_triton_and_its_models_are(
    http: httpx.AsyncClient, fake: FakeTriton
) -> None:
    response = await http.get("/health")
    assert response.status_code == 200 and response.json() == {"status": "ready"}


async def test_unavailable_when_triton_is_down(http: httpx.AsyncClient, fake: FakeTriton) -> None:
    fake.down = True
    response = await http.get("/health")
    assert response.status_code == 503
    assert response.json() == {"status": "unavailable", "detail": "Triton is not ready"}


async def test_unavailable_when_one_served_model_is_not_ready(
    http: httpx.AsyncClient, fake: FakeTriton
) -> None:
    fake.unready.add("whisper")
    assert (await http.get("/health")).status_code == 503
    fake.unready.clear()
    assert (await http.get("/health")).status_code == 200


async def test_live_whatever_triton_does(http: httpx.AsyncClient, fake: FakeTriton) -> None:
    fake.down = True
    response = await http.get("/health/live")
    assert response.status_code == 200 and response.json() == {"status": "live"}


async def test_health_sends_no_inference(http: httpx.AsyncClient, fake: FakeTriton) -> None:
    await http.get("/health")
    await http.get("/health/live")
    assert fake.requests == []
