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

from gateway.config import (
    MediaSettings,
    ServedModel,
    Settings,
)
from gateway.errors import InvalidRequest, TooManyMediaItems
from gateway.families.registry import get_family
from gateway.media.fetch import MediaFetcher
from gateway.media.identity import ExtraIdRegistry
from gateway.media.offload import Offloader, OffloadLimits
from gateway.pipeline.chat import prepare_chat
from gateway.protocol.chat import ChatCompletionRequest
from gateway.runtime import Runtime, ServedRuntime
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


@pytest.fixture(scope="module")
async def runtime() -> AsyncIterator[Runtime]:
    models = {
        "blip2_opt": served("blip2_opt"),
        "vila": served("vila", max_images=1),
        "kosmos2": served("kosmos2"),
        "qwen2_vl": served("qwen2_vl"),
        "llava_next": served("llava_next"),
        "deplot": served("deplot"),
    }
    offload = Offloader(OffloadLimits(workers=1), preload=("gateway.pipeline._media_jobs",))
    await offload.start()
    fetcher = MediaFetcher()
    settings = Settings(media=MediaSettings(max_images_per_request=4))
    yield Runtime(settings, models, {}, fetcher, ExtraIdRegistry(), offload)
    await fetcher.aclose()
    await offload.aclose()


def chat(model: str, text: str, *urls: str, kind: str = "image_url") -> ChatCompletionRequest:
    parts: list[dict[str, object]] = [{"type": "text", "text": text}]
    parts += [{"type": kind, kind: {"url": url}} for url in urls]
    return ChatCompletionRequest(model=model, messages=[{"role": "user", "content": parts}])


async def test_text_only_to_a_family_that_needs_an_image(runtime: Runtime) -> None:
    with pytest.raises(InvalidRequest, match="needs an image") as info:
        await prepare_chat(chat("blip2_opt", "hello"), runtime)
    assert info.value.status_code == 400 and info.value.code == "image_required"


async def test_more_images_than_the_engine_or_the_family_takes(runtime: Runtime) -> None:
    with pytest.raises(TooManyMediaItems, match="at most 1"):
        await prepare_chat(chat("vila", "compare", *[UNFETCHABLE] * 3), runtime)
    with pytest.raises(TooManyMediaItems, match="'kosmos2' takes at most 1"):
        await prepare_chat(chat("kosmos2", "compare", UNFETCHABLE, UNFETCHABLE), runtime)


async def test_video_to_a_family_without_video(runtime: Runtime) -> None:
    with pytest.raises(InvalidRequest, match="does not accept video") as info:
        await prepare_chat(
            chat("blip2_opt", "what happens?", UNFETCHABLE, kind="video_url"), runtime
        )
    assert info.value.code == "unsupported_content_part"


async def test_qwen2_vl_gets_no_extra_id_and_llava_next_gets_sizes(runtime: Runtime) -> None:
    (qwen,) = await prepare_chat(chat("qwen2_vl", "what?", png_url()), runtime)
    assert qwen.plan.calls[0].prompt_table_extra_id is None  # type: ignore[union-attr]
    assert qwen.plan.calls[0].images[1].shape == (1, 1, 504, 504, 3)  # type: ignore[union-attr,index]
    (nxt,) = await prepare_chat(chat("llava_next", "what?", png_url(64, 48)), runtime)
    assert nxt.plan.calls[0].prompt_table_extra_id is not None  # type: ignore[union-attr]
    name, sizes = nxt.plan.calls[0].image_sizes  # type: ignore[union-attr,misc]
    assert name == "image_sizes_input" and sizes.tolist() == [[[48, 64]]]


async def test_deplot_sends_an_empty_prompt_and_its_ids(runtime: Runtime) -> None:
    (prepared,) = await prepare_chat(chat("deplot", "table?", png_url()), runtime)
    generation = prepared.plan.calls[0]  # type: ignore[union-attr]
    assert generation.text_input == "" and generation.end_id == 1 and generation.pad_id == 0
    assert generation.prompt_table_extra_id is None
