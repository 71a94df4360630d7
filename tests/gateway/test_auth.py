"""API keys through the real app stack (no Triton needed: auth answers first)."""

import httpx
import pytest

from gateway.auth import ApiKeyMiddleware


async def ok_app(scope, receive, send) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"ok"})


@pytest.fixture
def client() -> httpx.AsyncClient:
    app = ApiKeyMiddleware(ok_app, keys=["sk-right"])
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw")


@pytest.mark.parametrize("header", [None, "Bearer sk-wrong", "Basic sk-right", "Bearer "])
async def test_missing_or_wrong_key_is_401_error_object(
    client: httpx.AsyncClient, header: str | None
) -> None:
    headers = {"Authorization": header} if header else {}
    response = await client.post("/v1/chat/completions", headers=headers)
    assert response.status_code == 401
    assert response.json()["error"]["type"] == "authentication_error"


async def test_right_key_passes_and_health_needs_none(client: httpx.AsyncClient) -> None:
    ok = await client.post("/v1/chat/completions", headers={"Authorization": "Bearer sk-right"})
    assert ok.status_code == 200
    assert (await client.get("/health")).status_code == 200
