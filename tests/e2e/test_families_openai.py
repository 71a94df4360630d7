"""Every family with a tiny reference model, end to end: the OpenAI SDK, the gateway, Triton.

For each family a chat with one image goes through the real gateway, streamed and not, and
the greedy answer must equal the same tiny model run in-process on what the gateway should
have sent: the family's rendering of the conversation and its pixel preprocessing of the same
image bytes (plus the image size for LLaVA-NeXT). A wrong template, tensor name, layout,
dtype or relay shows up as different text or a different prompt length.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

import pytest
from openai import AsyncOpenAI

from gateway.families.base import Conversation, Turn
from gateway.families.registry import get_family
from gateway.media.image import ImageLimits, decode_image
from server_repo.reference_kit import Completion, GenerationRequest, ReferenceEngine, load_engine
from tests.e2e.conftest import (
    LORA_SEED,
    LORA_TASK_ID,
    REFERENCE_FAMILIES,
    REFERENCE_OPTIONS,
    MediaServer,
)
from tests.gateway.media.frame_lists import frame_images, frame_list_url
from tests.server_repo.family_samples import lora_adapter

pytestmark = pytest.mark.e2e

QUESTIONS = {
    "mllama": "What is in this picture?",
    "kosmos2": "<grounding>An image of",
    "cogvlm": "What do you see?",  # the tiny model ends "Describe the picture." at once
}
MAX_TOKENS = 8
# Where NVIDIA's runner starts an encoder-decoder's decoder, when that is not where a Triton
# deployment of NVIDIA's preprocessing starts it (the pad id): Nougat starts at <s>
# (NVIDIA/TensorRT-LLM tensorrt_llm/runtime/multimodal_model_runner.py
# @033f406702a726877a9df9eb4931f0661cf0a39a, setup_inputs: decoder.bos_token_id). The
# reference model starts at the pad id as NVIDIA's preprocessing does, so the gateway must send
# this decoder prompt for the answers to agree.
RUNNER_DECODER_PROMPT = {"nougat": "<s>"}


def expected_request(family_name: str, question: str, image: bytes) -> GenerationRequest:
    """What the gateway should send for one user turn with one image, as a kit request."""
    max_images = REFERENCE_OPTIONS.get(family_name, {}).get("max_images")
    family = get_family(family_name).engine_images(max_images)
    text = family.render(Conversation(None, (Turn("user", question, 1),)))
    decoded = decode_image(image, ImageLimits())
    images = family.stack_images([family.prepare_image(decoded)])[0]
    sizes = family.image_sizes([(decoded.height, decoded.width)])
    return GenerationRequest(
        text_input=text,
        images=images,
        image_sizes=None if sizes is None else sizes[0],
        max_tokens=MAX_TOKENS,
        temperature=0.0,
        top_k=1,
        decoder_text=RUNNER_DECODER_PROMPT.get(family_name, ""),
    )


@pytest.fixture(scope="module")
def engines(reference_cache: Path) -> dict[str, ReferenceEngine]:
    return {}


async def in_process(
    engines: dict[str, ReferenceEngine], cache: Path, family: str, request: GenerationRequest
) -> Completion:
    if family not in engines:
        engines[family] = await asyncio.to_thread(
            load_engine, family, cache_dir=cache, device="cpu"
        )
    return await asyncio.to_thread(engines[family].complete, request)


@pytest.mark.parametrize("family", REFERENCE_FAMILIES)
async def test_family_answers_like_the_in_process_model(
    gateway_url: str,
    media_server: MediaServer,
    reference_cache: Path,
    engines: dict[str, ReferenceEngine],
    family: str,
) -> None:
    question = QUESTIONS.get(family, "Describe the picture.")
    messages = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": question},
                {"type": "image_url", "image_url": {"url": media_server.url("blue.jpg")}},
            ],
        }
    ]
    model = f"reference-{family.replace('_', '-')}"
    client = AsyncOpenAI(base_url=f"{gateway_url}/v1", api_key="unused", max_retries=0, timeout=120)
    options = {"model": model, "messages": messages, "max_tokens": MAX_TOKENS, "temperature": 0}
    response = await client.chat.completions.create(**options)
    stream = await client.chat.completions.create(
        **options, stream=True, stream_options={"include_usage": True}
    )
    deltas, usage = [], None
    async for chunk in stream:
        if chunk.choices:
            deltas.append(chunk.choices[0].delta.content or "")
        elif chunk.usage:
            usage = chunk.usage

    request = expected_request(family, question, media_server.files["blue.jpg"][0])
    completion = await in_process(engines, reference_cache, family, request)
    assert len(completion.token_ids) > 1, "the oracle must produce a non-trivial answer"
    assert response.choices[0].message.content == "".join(deltas) == completion.text
    for counted in (response.usage, usage):
        assert counted.completion_tokens == len(completion.token_ids)
        assert counted.prompt_tokens == completion.stats.input_tokens


async def test_vila_places_each_image_at_its_marker(
    gateway_url: str,
    media_server: MediaServer,
    reference_cache: Path,
    engines: dict[str, ReferenceEngine],
) -> None:
    """reference_vila's preprocessing splits at <image> as NVIDIA's does with max_num_images 4
    (tensorrtllm_backend all_models/inflight_batcher_llm/preprocessing/1/model.py
    @c2e65b88d85255be30cf50440a91662abeb497dd); the gateway's text must carry one marker per
    image, in order (the guide's "<image>\\n<image>\\n Please elaborate..."), or the model
    refuses the request."""
    names = ["red.png", "blue.jpg"]
    question = " Please elaborate what you see in the images?"
    images = [{"type": "image_url", "image_url": {"url": media_server.url(n)}} for n in names]
    client = AsyncOpenAI(base_url=f"{gateway_url}/v1", api_key="unused", max_retries=0, timeout=120)
    response = await client.chat.completions.create(
        model="reference-vila",
        messages=[{"role": "user", "content": [{"type": "text", "text": question}, *images]}],
        max_tokens=MAX_TOKENS,
        temperature=0,
    )
    family = get_family("vila")
    decoded = [decode_image(media_server.files[n][0], ImageLimits()) for n in names]
    pixels = family.stack_images([family.prepare_image(image) for image in decoded])[0]
    request = GenerationRequest(
        text_input="<image>\n<image>\n" + question,
        images=pixels,
        max_tokens=MAX_TOKENS,
        temperature=0.0,
        top_k=1,
    )
    completion = await in_process(engines, reference_cache, "vila", request)
    assert len(completion.token_ids) > 1
    assert response.choices[0].message.content == completion.text
    assert response.usage.prompt_tokens == completion.stats.input_tokens


@pytest.mark.parametrize("frames", [2, 4])
async def test_video_neva_reads_every_frame_at_its_video_marker(
    gateway_url: str,
    reference_cache: Path,
    engines: dict[str, ReferenceEngine],
    frames: int,
) -> None:
    """Video-NeVA's frames go as image_input [1, frames, 3, 224, 224] with the SteerLM template
    (NVIDIA's runner, tensorrt_llm/runtime/multimodal_model_runner.py
    @033f406702a726877a9df9eb4931f0661cf0a39a) and its one <video>: the prompt holds 256
    features a frame, and the answer is the in-process model's on the same template."""
    url = frame_list_url(frame_images(frames))
    content = [{"type": "video_url", "video_url": {"url": url}}, {"type": "text", "text": "What?"}]
    client = AsyncOpenAI(base_url=f"{gateway_url}/v1", api_key="unused", max_retries=0, timeout=120)
    options = {
        "model": "reference-video-neva",
        "messages": [{"role": "user", "content": content}],
        "max_tokens": MAX_TOKENS,
        "temperature": 0,
        "extra_body": {"media_io_kwargs": {"video": {"num_frames": frames}}},
    }
    response = await client.chat.completions.create(**options)
    stream = await client.chat.completions.create(**options, stream=True)
    deltas = [c.choices[0].delta.content or "" async for c in stream if c.choices]
    assert response.choices[0].message.content == "".join(deltas)
    family = get_family("video_neva")
    text = family.render(Conversation(None, (Turn("user", "What?", videos=1),)))
    if "video_neva" not in engines:
        engines["video_neva"] = await asyncio.to_thread(
            load_engine, "video_neva", cache_dir=reference_cache, device="cpu"
        )
    tokenizer = engines["video_neva"].tokenizer
    text_tokens = sum(
        len(tokenizer(piece, add_special_tokens=False)["input_ids"])
        for piece in text.split("<video>")
    )
    assert response.usage.prompt_tokens == text_tokens + frames * 256


async def test_internlm_xcomposer2_answers_with_its_lora_adapter(
    gateway_url: str,
    media_server: MediaServer,
    reference_cache: Path,
    engines: dict[str, ReferenceEngine],
) -> None:
    """The guide's deployment (seeds/004) takes InternLM-XComposer2's Partial-LoRA through
    lora_task_id, with lora_weights and lora_config the first time; the gateway sends them for
    the served model's adapter, and the answer is the in-process model's with that adapter (not
    the base model's). A second request carries the id alone and answers the same."""
    question = "Describe the picture."
    content = [
        {"type": "text", "text": question},
        {"type": "image_url", "image_url": {"url": media_server.url("blue.jpg")}},
    ]
    client = AsyncOpenAI(base_url=f"{gateway_url}/v1", api_key="unused", max_retries=0, timeout=120)
    options = {
        "model": "reference-internlm-xcomposer2-lora",
        "messages": [{"role": "user", "content": content}],
        "max_tokens": MAX_TOKENS,
        "temperature": 0,
    }
    first = await client.chat.completions.create(**options)
    second = await client.chat.completions.create(**options)
    request = expected_request("internlm_xcomposer2", question, media_server.files["blue.jpg"][0])
    weights, config = lora_adapter(LORA_SEED)
    adapted = replace(
        request, lora_task_id=900 + LORA_TASK_ID, lora_weights=weights, lora_config=config
    )
    with_lora = await in_process(engines, reference_cache, "internlm_xcomposer2", adapted)
    base = await in_process(engines, reference_cache, "internlm_xcomposer2", request)
    assert first.choices[0].message.content == with_lora.text != base.text
    assert second.choices[0].message.content == with_lora.text
