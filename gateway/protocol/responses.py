"""OpenAI Responses API wire types (request side). No I/O and no logic beyond validation.

The request body is typed strictly where the gateway acts on a field; ``input`` items are kept
as raw objects here and validated one by one against the item types below
(``pipeline/responses_input.py``), so an item type the gateway does not serve is refused by its
name and place (``input[2]``) rather than as a failed union. Unknown top-level fields are kept
(``model_extra``) and ignored, as OpenAI-compatible servers do (Codex sends ``client_metadata``);
known ones the gateway cannot honour are refused by the pipeline.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from gateway.protocol.chat import ReasoningEffort
from gateway.protocol.generation import INT32_MAX, MAX_MODEL_ID_LENGTH

MAX_METADATA_KEYS = 16  # OpenAI's limits on metadata
MAX_METADATA_KEY = 64
MAX_METADATA_VALUE = 512


def checked_metadata(metadata: dict[str, str] | None) -> dict[str, str] | None:
    """OpenAI's bounds: 16 keys, keys of at most 64 characters, values of at most 512."""
    if metadata is None:
        return None
    if len(metadata) > MAX_METADATA_KEYS:
        raise ValueError(f"at most {MAX_METADATA_KEYS} metadata keys are allowed")
    if any(len(key) > MAX_METADATA_KEY for key in metadata):
        raise ValueError(f"metadata keys may have at most {MAX_METADATA_KEY} characters")
    if any(len(value) > MAX_METADATA_VALUE for value in metadata.values()):
        raise ValueError(f"metadata values may have at most {MAX_METADATA_VALUE} characters")
    return metadata


class _Item(BaseModel):
    """Input items and parts: strict types; fields the gateway does not read are ignored
    (``status``, a replayed item's ``annotations``), as they change nothing."""

    model_config = ConfigDict(extra="ignore", strict=True)


class InputText(_Item):
    type: Literal["input_text"]
    text: str


class InputImage(_Item):
    type: Literal["input_image"]
    image_url: str | None = Field(None, min_length=1)
    file_id: str | None = None
    detail: Literal["auto", "low", "high", "original"] | None = None


class AudioData(_Item):
    data: str
    format: str


class InputAudio(_Item):
    type: Literal["input_audio"]
    input_audio: AudioData


class InputFile(_Item):
    type: Literal["input_file"]
    file_data: str | None = None
    file_id: str | None = None
    file_url: str | None = None
    filename: str | None = None


class OutputText(_Item):
    """An earlier answer's text, replayed as input (an assistant message's part)."""

    type: Literal["output_text"]
    text: str


class Refusal(_Item):
    type: Literal["refusal"]
    refusal: str


ContentPart = Annotated[
    InputText | InputImage | InputAudio | InputFile | OutputText | Refusal,
    Field(discriminator="type"),
]


class MessageItem(_Item):
    """``{"role": ..., "content": ...}``, with or without ``"type": "message"``."""

    type: Literal["message"] = "message"
    id: str | None = None
    role: Literal["user", "assistant", "system", "developer"]
    content: str | list[ContentPart]


class FunctionCallItem(_Item):
    """A function call the model made earlier, replayed as input."""

    type: Literal["function_call"]
    id: str | None = None
    call_id: str = Field(min_length=1)
    name: str = Field(min_length=1)
    arguments: str


class FunctionCallOutputItem(_Item):
    """The caller's result of a function call."""

    type: Literal["function_call_output"]
    id: str | None = None
    call_id: str = Field(min_length=1)
    output: str | list[ContentPart]


class ReasoningText(_Item):
    type: Literal["reasoning_text", "summary_text"]
    text: str


class ReasoningItem(_Item):
    """A reasoning model's earlier reasoning, replayed as input (as OpenAI asks clients that
    manage their own context to do); kept with the input, not fed back into the prompt."""

    type: Literal["reasoning"]
    id: str | None = None
    summary: list[ReasoningText] = Field(default_factory=list)
    content: list[ReasoningText] | None = None
    encrypted_content: str | None = None


InputItem = MessageItem | FunctionCallItem | FunctionCallOutputItem | ReasoningItem
ITEM_TYPES: dict[str, type[InputItem]] = {
    "message": MessageItem,
    "function_call": FunctionCallItem,
    "function_call_output": FunctionCallOutputItem,
    "reasoning": ReasoningItem,
}


class FunctionTool(_Item):
    type: Literal["function"]
    name: str = Field(min_length=1, max_length=64)
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class TextFormat(BaseModel):
    """``text.format``: ``text``, ``json_object`` or ``json_schema`` (its fields kept as sent,
    for chat's ``response_format``)."""

    model_config = ConfigDict(extra="allow", strict=True)

    type: Literal["text", "json_object", "json_schema"]


class TextConfig(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)

    format: TextFormat | None = None
    verbosity: Literal["low", "medium", "high"] | None = None


class Reasoning(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)

    effort: ReasoningEffort | None = None
    summary: str | None = None


class PromptCacheOptions(BaseModel):
    """``prompt_cache_options`` (openai ``PromptCacheOptions``)."""

    model_config = ConfigDict(extra="allow", strict=True)

    prewarm: bool | None = None
    mode: Literal["implicit", "explicit"] | None = None
    ttl: str | None = None


class ResponsesRequest(BaseModel):
    """The request body of ``POST /v1/responses``."""

    model_config = ConfigDict(extra="allow", strict=True)

    model: str = Field(min_length=1, max_length=MAX_MODEL_ID_LENGTH)
    input: str | list[dict[str, Any]] | None = None
    instructions: str | None = None
    previous_response_id: str | None = Field(None, min_length=1, max_length=256)
    max_output_tokens: int | None = Field(None, ge=1, le=INT32_MAX)
    temperature: float | None = Field(None, ge=0.0, le=2.0)
    top_p: float | None = Field(None, gt=0.0, le=1.0)
    seed: int | None = Field(None, ge=0, le=2**64 - 1)  # not OpenAI's here; as in chat
    stream: bool = False
    store: bool = True
    metadata: dict[str, str] | None = None
    user: str | None = Field(None, max_length=MAX_MODEL_ID_LENGTH)
    text: TextConfig | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    include: list[str] | None = None
    # Known fields that change the answer; refused by the pipeline unless at their default.
    background: bool | None = None
    conversation: str | dict[str, Any] | None = None
    truncation: Literal["auto", "disabled"] | None = None
    reasoning: Reasoning | None = None
    prompt: dict[str, Any] | None = None
    max_tool_calls: int | None = None
    top_logprobs: int | None = Field(None, ge=0, le=20)
    # OpenAI's prompt-cache controls: ``prewarm`` (fill the cache, generate nothing) and
    # ``generate: false`` are refused; ``mode``, ``ttl`` change nothing here (KV reuse is the
    # engine's own, keyed on the prompt's prefix).
    prompt_cache_options: PromptCacheOptions | None = None
    generate: bool | None = None

    @field_validator("stream", "store", mode="before")
    @classmethod
    def _null_is_default(cls, value: object, info: Any) -> object:
        """OpenAI's schema makes these nullable: ``null`` means the default."""
        if value is None:
            return cls.model_fields[info.field_name].default
        return value

    @field_validator("metadata")
    @classmethod
    def _metadata_bounds(cls, metadata: dict[str, str] | None) -> dict[str, str] | None:
        return checked_metadata(metadata)
