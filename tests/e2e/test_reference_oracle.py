"""The gateway's greedy answer equals running the same reference model in-process.

The in-process side loads the same generated weights (same cache folder) with the
reference kit and is given what the gateway should have sent: the family's rendering of
the conversation and the family's preprocessing of the same image bytes. A mismatch in
prompt rendering, pixel maths, tensor layout or the relay shows up as different text.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pytest
from openai import AsyncOpenAI

from gateway.families.base import Conversation, Turn
from gateway.families.registry import get_family
from gateway.media.image import ImageLimits, decode_image
from server_repo.reference_kit import GenerationRequest, load_engine
from tests.e2e.conftest import MediaServer

pytestmark = pytest.mark.e2e

# LLaVA's engine takes several images; NVIDIA's OneVision preprocessing one (docs/families.md).
CASES = [
    ("reference-llava", "llava", "reference_llava", ["red.png", "blue.jpg"]),
    ("reference-llava-onevision", "llava_onevision", "reference_llava_onevision", ["blue.jpg"]),
]


def expected_inputs(family_name: str, question: str, images: list[bytes]) -> tuple[str, np.ndarray]:
    family = get_family(family_name)
    text = family.render(Conversation(None, (Turn("user", question, len(images)),)))
    arrays = [family.prepare_image(decode_image(data, ImageLimits())) for data in images]
    return text, family.stack_images(arrays)[0]


@pytest.mark.parametrize(("model_id", "family_name", "triton_model", "names"), CASES)
async def test_greedy_answer_equals_in_process_model(
    gateway_url: str,
    media_server: MediaServer,
    reference_cache: Path,
    model_id: str,
    family_name: str,
    triton_model: str,
    names: list[str],
) -> None:
    question = "Describe the pictures in detail."
    client = AsyncOpenAI(base_url=f"{gateway_url}/v1", api_key="unused", max_retries=0, timeout=120)
    response = await client.chat.completions.create(
        model=model_id,
        messages=[
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": question},
                    *(
                        {"type": "image_url", "image_url": {"url": media_server.url(n)}}
                        for n in names
                    ),
                ],
            }
        ],
        max_tokens=10,
        temperature=0,
    )

    text, images = expected_inputs(family_name, question, [media_server.files[n][0] for n in names])
    engine = await asyncio.to_thread(
        load_engine, triton_model, cache_dir=reference_cache, device="cpu"
    )
    request = GenerationRequest(
        text_input=text, images=images, max_tokens=10, temperature=0.0, top_k=1
    )
    completion = await asyncio.to_thread(engine.complete, request)

    assert len(completion.token_ids) > 1, "the oracle must produce a non-trivial answer"
    assert response.choices[0].message.content == completion.text
    assert response.usage.completion_tokens == len(completion.token_ids)
    assert response.usage.prompt_tokens == completion.stats.input_tokens
