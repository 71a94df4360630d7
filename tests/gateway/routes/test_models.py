"""GET /v1/models and /v1/models/{id}: the served ids, as OpenAI lists them, without Triton."""

from __future__ import annotations

import httpx
import pytest

from gateway.families.registry import get_family
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
        assert set(card) == {
            "id", "object", "created", "owned_by", "family", "server_side", "contract",
        }  # fmt: skip
        assert card["object"] == "model" and card["owned_by"] == "multimodal-gateway"
        assert isinstance(card["created"], int) and card["created"] > 0


async def test_each_card_says_which_triton_server_side_the_family_relies_on(
    http: httpx.AsyncClient, gateway: FakeGateway
) -> None:
    """Issue 24 item 8: NVIDIA's Triton preprocessing serves llava and blip2-opt since
    tensorrtllm_backend v0.13.0 (its supported list there); for other families (nougat, ...)
    none exists, and the card says what the deployment must provide."""
    cards = {c["id"]: c for c in (await http.get("/v1/models")).json()["data"]}
    families = {served.id: served.family for served in gateway.runtime.settings.models}
    for model_id, card in cards.items():
        assert card["family"] == families[model_id]
    llava = cards["fake-llava"]["server_side"]
    assert "NVIDIA's Triton multimodal preprocessing" in llava and "v0.13.0" in llava
    assert "all_models/whisper" in cards["fake-whisper"]["server_side"]
    for family in ("nougat", "cogvlm", "neva", "fuyu", "kosmos2", "phi3_vision", "blip2_t5"):
        side = get_family(family).server_side()
        assert side.startswith("no NVIDIA Triton server side; the deployment provides")


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
