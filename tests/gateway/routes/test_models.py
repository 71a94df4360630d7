"""GET /v1/models and /v1/models/{id}: the served ids, as OpenAI lists them, without Triton."""

from __future__ import annotations

import httpx
import pytest

from tests.fakes.app import FakeGateway, assert_openai_error
from tests.fakes.triton import FakeTriton


async def test_the_list_holds_every_served_id_in_order(
    http: httpx.AsyncClient, gateway: FakeGateway
) -> None:
    response = await http.get("/v1/models")
    assert response.status_code == 200
    body = response.json()
    assert set(body) == {"object", "data"} and body["object"] == "list"
    assert [card["id"] for card in body["data"]] == [
        served.id for served in gateway.runtime.settings.models
    ]
    for card in body["data"]:
        assert set(card) == {"id", "object", "created", "owned_by"}
        assert card["object"] == "model" and card["owned_by"] == "multimodal-gateway"
        assert isinstance(card["created"], int) and card["created"] > 0


@pytest.mark.parametrize("model_id", ["fake-llava", "org/fake-llava", "fake-whisper"])
async def test_one_model_card(http: httpx.AsyncClient, model_id: str) -> None:
    listed = {c["id"]: c for c in (await http.get("/v1/models")).json()["data"]}
    response = await http.get(f"/v1/models/{model_id}")
    assert response.status_code == 200
    assert response.json() == listed[model_id]


@pytest.mark.parametrize("model_id", ["nope", "org", "fake-llava/extra", "FAKE-LLAVA"])
async def test_an_unknown_id_is_model_not_found(http: httpx.AsyncClient, model_id: str) -> None:
    error = assert_openai_error(await http.get(f"/v1/models/{model_id}"), 404, "model_not_found")
    assert error["param"] == "model" and model_id in error["message"]


async def test_the_list_needs_no_triton(http: httpx.AsyncClient, fake: FakeTriton) -> None:
    fake.down = True
    assert (await http.get("/v1/models")).status_code == 200
    assert (await http.get("/v1/models/fake-llava")).status_code == 200
