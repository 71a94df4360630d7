"""A reasoning-format answer end to end: the official OpenAI SDK, the gateway and the embedded
Triton, its answer split into ``reasoning_content`` and ``content``.

The reference models have random weights, so nothing they write on their own looks like
reasoning. The shape is forced honestly, the way a Triton deployment forces any shape: the
request's ``guided_regex`` (vLLM's extension) becomes Triton's ``guided_decoding_guide``, and
the reference model's guided decoding (llguidance over its own tokenizer) masks every step, so
the model itself writes ``<think>``, some words, ``</think>`` and an answer, token by token.
Triton's guide covers the whole output (docs/reasoning.md), which is why the regex holds the
tags; the gateway's ``qwen3`` reasoning parser (served model ``reference-llava-reasoning``:
``reference_llava`` with ``reasoning_parser = "qwen3"``) then splits what arrives, streamed and
not. What the words are is the model's own choice; the test asserts the split, not them.
"""

from __future__ import annotations

import re

import pytest
import tritonclient.grpc.aio as grpcclient
from openai import AsyncOpenAI
from tokenizers import Tokenizer

from gateway.triton.embedded import EmbeddedTriton
from tests.e2e.test_structured_openai import GUIDE_INPUTS

pytestmark = pytest.mark.e2e

MODEL = "reference-llava-reasoning"
WORDS = "[a-z]{1,10}"
SHAPE = f"<think>{WORDS}</think>{WORDS}"
ASK = {
    "model": MODEL,
    "messages": [{"role": "user", "content": "Think, then answer."}],
    "max_tokens": 64,
    "extra_body": {"guided_regex": SHAPE},
}


@pytest.fixture(scope="module")
async def guided(embedded_triton: EmbeddedTriton) -> None:
    """Skip unless reference_llava declares the guide inputs (as test_structured_openai)."""
    client = grpcclient.InferenceServerClient(embedded_triton.grpc_url)
    try:
        config = (await client.get_model_config("reference_llava", as_json=True))["config"]
    finally:
        await client.close()
    if not {entry["name"] for entry in config.get("input", [])} >= GUIDE_INPUTS:
        pytest.skip("reference_llava does not declare the guided decoding inputs")


@pytest.fixture
def client(gateway_url: str) -> AsyncOpenAI:
    return AsyncOpenAI(base_url=f"{gateway_url}/v1", api_key="unused", max_retries=0, timeout=300)


async def test_a_guided_reasoning_answer_is_split(
    client: AsyncOpenAI, guided: None, embedded_triton: EmbeddedTriton
) -> None:
    completion = await client.chat.completions.create(**ASK)  # type: ignore[call-overload]
    message = completion.choices[0].message
    reasoning = getattr(message, "reasoning_content", None)
    assert reasoning is not None and re.fullmatch(WORDS, reasoning), message
    assert message.content is not None and re.fullmatch(WORDS, message.content), message
    usage = completion.usage
    assert usage is not None and usage.completion_tokens_details is not None
    # Counted with the model's own tokenizer over "<think>...</think>" (the tags included).
    published = embedded_triton.env["MMGW_REFERENCE_TOKENIZERS"]
    tokenizer = Tokenizer.from_file(f"{published}/reference_llava/tokenizer.json")
    span = tokenizer.encode(f"<think>{reasoning}</think>", add_special_tokens=False)
    assert usage.completion_tokens_details.reasoning_tokens == len(span.ids)
    assert 0 < len(span.ids) < usage.completion_tokens

    stream = await client.chat.completions.create(**ASK, stream=True)  # type: ignore[call-overload]
    thought, said = [], []
    async for chunk in stream:
        for choice in chunk.choices:
            thought.append(getattr(choice.delta, "reasoning_content", None) or "")
            said.append(choice.delta.content or "")
    assert re.fullmatch(WORDS, "".join(thought)) and re.fullmatch(WORDS, "".join(said))
    assert not any("<" in piece or ">" in piece for piece in thought + said)
