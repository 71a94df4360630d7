"""Structured outputs and forced tool calls end to end: the official OpenAI SDK, the gateway
and the embedded Triton's reference models, whose guided decoding masks a tiny random model's
tokens step by step, so whatever it writes must match the schema.

Skipped while the served reference models do not declare ``guided_decoding_guide_type`` and
``guided_decoding_guide`` (read from Triton's own config of each model): the gateway refuses
guided requests to such a model, which ``tests/gateway/routes`` covers.
"""

from __future__ import annotations

import json
from enum import Enum
from typing import Annotated, Literal

import jsonschema
import pytest
import tritonclient.grpc.aio as grpcclient
from openai import AsyncOpenAI
from pydantic import BaseModel, Field

from gateway.triton.embedded import EmbeddedTriton
from tests.e2e.conftest import MediaServer

pytestmark = pytest.mark.e2e

MODELS = {
    "reference-llava": "reference_llava",
    "reference-llava-onevision": "reference_llava_onevision",
}
GUIDE_INPUTS = {"guided_decoding_guide_type", "guided_decoding_guide"}


@pytest.fixture(scope="module")
async def guided_models(embedded_triton: EmbeddedTriton) -> list[str]:
    """The served ids whose Triton model declares the guide inputs; skip when none does."""
    client = grpcclient.InferenceServerClient(embedded_triton.grpc_url)
    try:
        declared = []
        for served, triton_model in MODELS.items():
            config = (await client.get_model_config(triton_model, as_json=True))["config"]
            if {entry["name"] for entry in config.get("input", [])} >= GUIDE_INPUTS:
                declared.append(served)
    finally:
        await client.close()
    if not declared:
        pytest.skip("the reference models do not declare the guided decoding inputs yet")
    return declared


@pytest.fixture
def client(gateway_url: str) -> AsyncOpenAI:
    return AsyncOpenAI(base_url=f"{gateway_url}/v1", api_key="unused", max_retries=0, timeout=300)


def with_image(media_server: MediaServer, text: str) -> list[dict]:
    return [{"role": "user", "content": [
        {"type": "text", "text": text},
        {"type": "image_url", "image_url": {"url": media_server.url("red.png")}},
    ]}]  # fmt: skip


# Every string, number and list is bounded: a random model under a grammar stops only where
# the schema makes it (an unbounded string or integer can run to max_tokens).
Short = Field(max_length=12)
Word = Annotated[str, Field(max_length=8)]
Digit = Annotated[int, Field(ge=0, le=9)]


class Color(str, Enum):
    red = "red"
    green = "green"
    blue = "blue"


class Flat(BaseModel):
    name: str = Short
    count: int = Field(ge=0, le=999)


class Flags(BaseModel):
    visible: bool
    blurry: bool


class Bounded(BaseModel):
    score: int = Field(ge=0, le=10)
    ratio: float = Field(ge=0.0, le=1.0)


class WithEnum(BaseModel):
    color: Color


class WithLiteral(BaseModel):
    mood: Literal["calm", "busy", "empty"]


class Tags(BaseModel):
    tags: list[Word] = Field(max_length=3)


class Numbers(BaseModel):
    values: list[Digit] = Field(min_length=1, max_length=4)


class Optional1(BaseModel):
    title: str = Short
    subtitle: str | None = Field(default=None, max_length=12)


class Point(BaseModel):
    x: int = Field(ge=-99, le=99)
    y: int = Field(ge=-99, le=99)


class Box(BaseModel):
    top_left: Point
    bottom_right: Point


class Nested(BaseModel):
    box: Box
    label: str = Short


class Item(BaseModel):
    name: str = Short
    price: float = Field(ge=0, le=1000)


class Order(BaseModel):
    items: list[Item] = Field(min_length=1, max_length=2)
    paid: bool


class Shape(BaseModel):
    kind: Literal["circle"]
    radius: int = Field(ge=1, le=9)


class Square(BaseModel):
    kind: Literal["square"]
    side: int = Field(ge=1, le=9)


class AnyShape(BaseModel):
    shape: Shape | Square


class Caption(BaseModel):
    caption: str = Field(max_length=20)


class Counted(BaseModel):
    objects: int = Field(ge=0, le=5)
    people: int = Field(ge=0, le=5)


class Colors(BaseModel):
    colors: list[Color] = Field(min_length=1, max_length=3)


class Answer(BaseModel):
    yes: bool
    confidence: float = Field(ge=0, le=1)


class Person(BaseModel):
    name: str = Short
    age: int = Field(ge=0, le=120)
    email: str | None = Field(default=None, max_length=20)


class Team(BaseModel):
    lead: Person
    size: int = Field(ge=1, le=9)


class Deep(BaseModel):
    a: Flat
    b: Flags
    c: WithEnum


class Grid(BaseModel):
    rows: list[Annotated[list[Digit], Field(max_length=3)]] = Field(max_length=2)


SCHEMAS = [Flat, Flags, Bounded, WithEnum, WithLiteral, Tags, Numbers, Optional1, Nested, Order,
           AnyShape, Caption, Counted, Colors, Answer, Person, Team, Deep, Grid, Box]  # fmt: skip


@pytest.mark.parametrize("schema", SCHEMAS, ids=[s.__name__ for s in SCHEMAS])
async def test_parse_returns_a_valid_object_for_each_schema(
    client: AsyncOpenAI, media_server: MediaServer, guided_models: list[str], schema: type
) -> None:
    for model in guided_models:
        common = {"model": model, "messages": with_image(media_server, "Describe it."),
                  "max_tokens": 400, "temperature": 0}  # fmt: skip
        parsed = await client.chat.completions.parse(**common, response_format=schema)
        assert parsed.choices[0].finish_reason == "stop", parsed.choices[0]
        assert isinstance(parsed.choices[0].message.parsed, schema)
        async with client.chat.completions.stream(**common, response_format=schema) as stream:
            async for _ in stream:
                pass
            final = await stream.get_final_completion()
        assert final.choices[0].message.parsed == parsed.choices[0].message.parsed


WEATHER = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 10},
           "unit": {"enum": ["celsius", "fahrenheit"]}}, "required": ["city", "unit"],
           "additionalProperties": False}  # fmt: skip
TIME = {"type": "object", "properties": {"zone": {"type": "string", "maxLength": 10}},
        "required": ["zone"], "additionalProperties": False}  # fmt: skip
COUNT = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 0, "maximum": 9}},
         "required": ["n"], "additionalProperties": False}  # fmt: skip
TOOLS = [{"type": "function", "function": {"name": name, "parameters": parameters}}
         for name, parameters in (("get_weather", WEATHER), ("get_time", TIME),
                                  ("count_things", COUNT))]  # fmt: skip
PARAMETERS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}


async def calls_of(client: AsyncOpenAI, stream: bool, **fields: object) -> list[tuple[str, str]]:
    if not stream:
        completion = await client.chat.completions.create(**fields)
        assert completion.choices[0].finish_reason == "tool_calls"
        return [(c.function.name, c.function.arguments)
                for c in completion.choices[0].message.tool_calls]  # fmt: skip
    calls: dict[int, list[str]] = {}
    async for chunk in await client.chat.completions.create(**fields, stream=True):
        for delta in chunk.choices[0].delta.tool_calls or ():
            if delta.id is not None:
                calls[delta.index] = [delta.function.name, ""]
            calls[delta.index][1] += delta.function.arguments or ""
        assert not (chunk.choices[0].delta.content or "").strip()
    return [(name, arguments) for name, arguments in calls.values()]


@pytest.mark.parametrize(
    "tool_choice",
    ["required", *({"type": "function", "function": {"name": n}} for n in PARAMETERS)],
    ids=["required", *PARAMETERS],
)
async def test_forced_tool_calls_validate_and_stream_the_same(
    client: AsyncOpenAI, media_server: MediaServer, guided_models: list[str], tool_choice
) -> None:
    for model in guided_models:
        fields = {"model": model, "messages": with_image(media_server, "What now?"),
                  "tools": TOOLS, "tool_choice": tool_choice, "max_tokens": 400,
                  "temperature": 0}  # fmt: skip
        whole = await calls_of(client, False, **fields)
        assert whole and await calls_of(client, True, **fields) == whole
        for name, arguments in whole:
            jsonschema.validate(json.loads(arguments), PARAMETERS[name])
        if isinstance(tool_choice, dict):
            assert [name for name, _ in whole] == [tool_choice["function"]["name"]]
