"""prepare_chat with families: what a family cannot take is a 400 before any fetch, and the
family decides the KV-reuse id and the image sizes that go with the pixels."""

from __future__ import annotations

import base64
import io
from collections.abc import AsyncIterator
from types import SimpleNamespace

import numpy as np
import pytest
from PIL import Image

from gateway.config import GuideSettings, MediaSettings, ServedModel
from gateway.errors import InvalidRequest, TooManyMediaItems
from gateway.families.registry import get_family
from gateway.guides import GuideChecker
from gateway.media.fetch import MediaFetcher
from gateway.media.offload import Offloader, OffloadLimits
from gateway.observability.metrics import GatewayMetrics
from gateway.pipeline.chat import prepare_chat
from gateway.pipeline.relay import Prepared
from gateway.protocol.chat import ChatCompletionRequest
from gateway.served import ServedRuntime
from gateway.services import Media, Preparation
from tests.gateway.families.contracts import ensemble

# Fetching this would fail with a URL error: a refusal that names something else came first.
UNFETCHABLE = "http://127.0.0.1:9/never.png"


def png_url(width: int = 64, height: int = 48) -> str:
    pixels = np.random.default_rng(0).integers(0, 256, (height, width, 3), dtype=np.uint8)
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, "PNG")
    return "data:image/png;base64," + base64.b64encode(out.getvalue()).decode()


def served(family: str, **options: object) -> ServedRuntime:
    config = ServedModel(
        id=family, family=family, triton_model="ensemble", triton_url="x:1", **options
    )  # type: ignore[arg-type]
    contract = ensemble(("image_sizes_input", "TYPE_INT64", [-1, 2]))
    client = SimpleNamespace(url="fake:1")  # never called: these requests end before Triton
    return ServedRuntime(config, get_family(family), client=client, contract=contract)  # type: ignore[arg-type]


MODELS = {
    "blip2_opt": served("blip2_opt"),
    "vila": served("vila", max_images=1),
    "kosmos2": served("kosmos2"),
    "qwen2_vl": served("qwen2_vl"),
    "llava_next": served("llava_next"),
    "deplot": served("deplot"),
}


@pytest.fixture(scope="module")
async def services() -> AsyncIterator[Preparation]:
    """The narrow services prepare_chat takes: media over one worker, guides unstarted."""
    offload = Offloader(OffloadLimits(workers=1), preload=("gateway.pipeline._media_jobs",))
    await offload.start()
    fetcher = MediaFetcher()
    media = Media.of(fetcher, offload, MediaSettings(max_images_per_request=4), GatewayMetrics())
    guides = GuideChecker.of(GuideSettings())
    yield Preparation.of(media, guides)
    await guides.aclose()
    await fetcher.aclose()
    await offload.aclose()


async def prepare(request: ChatCompletionRequest, services: Preparation) -> list[Prepared]:
    return await prepare_chat(request, MODELS[request.model], services)


def chat(model: str, text: str, *urls: str, kind: str = "image_url") -> ChatCompletionRequest:
    parts: list[dict[str, object]] = [{"type": "text", "text": text}]
    parts += [{"type": kind, kind: {"url": url}} for url in urls]
    return ChatCompletionRequest(model=model, messages=[{"role": "user", "content": parts}])


async def test_text_only_to_a_family_that_needs_an_image(services: Preparation) -> None:
    with pytest.raises(InvalidRequest, match="needs an image") as info:
        await prepare(chat("blip2_opt", "hello"), services)
    assert info.value.status_code == 400 and info.value.code == "image_required"


async def test_more_images_than_the_engine_or_the_family_takes(services: Preparation) -> None:
    with pytest.raises(TooManyMediaItems, match="at most 1"):
        await prepare(chat("vila", "compare", *[UNFETCHABLE] * 3), services)
    with pytest.raises(TooManyMediaItems, match="'kosmos2' takes at most 1"):
        await prepare(chat("kosmos2", "compare", UNFETCHABLE, UNFETCHABLE), services)


async def test_video_to_a_family_without_video(services: Preparation) -> None:
    with pytest.raises(InvalidRequest, match="does not accept video") as info:
        await prepare(chat("blip2_opt", "what happens?", UNFETCHABLE, kind="video_url"), services)
    assert info.value.code == "unsupported_content_part"


async def test_qwen2_vl_gets_no_extra_id_and_llava_next_gets_sizes(services: Preparation) -> None:
    (qwen,) = await prepare(chat("qwen2_vl", "what?", png_url()), services)
    assert qwen.plan.calls[0].prompt_table_extra_id is None  # type: ignore[union-attr]
    assert qwen.plan.calls[0].images[1].shape == (1, 1, 504, 504, 3)  # type: ignore[union-attr,index]
    (nxt,) = await prepare(chat("llava_next", "what?", png_url(64, 48)), services)
    assert nxt.plan.calls[0].prompt_table_extra_id is not None  # type: ignore[union-attr]
    name, sizes = nxt.plan.calls[0].image_sizes  # type: ignore[union-attr,misc]
    assert name == "image_sizes_input" and sizes.tolist() == [[[48, 64]]]


async def test_deplot_sends_an_empty_prompt_and_its_ids(services: Preparation) -> None:
    (prepared,) = await prepare(chat("deplot", "table?", png_url()), services)
    generation = prepared.plan.calls[0]  # type: ignore[union-attr]
    assert generation.text_input == "" and generation.end_id == 1 and generation.pad_id == 0
    assert generation.prompt_table_extra_id is None
