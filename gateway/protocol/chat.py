"""OpenAI chat-completions wire types (request side). No I/O and no logic beyond validation.

The fields chat shares with legacy completions (sampling, lengths, stops, stream) are in
``generation.py``, strict and bounded as OpenAI's API is.

Responses and stream chunks are built as plain dicts in ``streaming/chunks.py``: a pydantic
model per token would cost more than the rest of the relay.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from gateway.protocol.generation import (
    INT32_MAX,
    GenerationFields,
)
from gateway.protocol.structured import (
    MAX_TOOLS,
    FunctionCall,
    FunctionCallChoice,
    FunctionDefinition,
    ResponseFormat,
    ToolCallMessage,
    ToolChoice,
    ToolDefinition,
)

# OpenAI's ``ReasoningEffort`` (openai.types.shared.reasoning_effort, SDK 3.57).
ReasoningEffort = Literal["none", "minimal", "low", "medium", "high", "xhigh", "max"]


class _Part(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)


class TextPart(_Part):
    type: Literal["text"]
    text: str


class ImageURL(_Part):
    url: str = Field(min_length=1)
    detail: Literal["auto", "low", "high", "original"] | None = None


class ImageURLPart(_Part):
    type: Literal["image_url"]
    image_url: ImageURL


class VideoURL(_Part):
    url: str = Field(min_length=1)


class VideoURLPart(_Part):
    type: Literal["video_url"]
    video_url: VideoURL


class InputAudio(_Part):
    data: str
    format: str


class InputAudioPart(_Part):
    type: Literal["input_audio"]
    input_audio: InputAudio


class AudioURL(_Part):
    url: str = Field(min_length=1)


class AudioURLPart(_Part):
    type: Literal["audio_url"]
    audio_url: AudioURL


class FileData(_Part):
    """OpenAI's ``file`` part body: ``file_data`` (a data: URL, or bare base64, of a PDF) or
    ``file_id`` (refused: no Files API here); ``file_url`` is the gateway's extension (the
    Responses API's ``input_file.file_url``, fetched as every media URL is)."""

    file_data: str | None = Field(None, min_length=1)
    file_id: str | None = None
    file_url: str | None = Field(None, min_length=1)
    filename: str | None = None


class FilePart(_Part):
    type: Literal["file"]
    file: FileData


ContentPart = Annotated[
    TextPart | ImageURLPart | VideoURLPart | InputAudioPart | AudioURLPart | FilePart,
    Field(discriminator="type"),
]


class ChatMessage(_Part):
    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[ContentPart] | None = None
    name: str | None = None
    tool_calls: list[ToolCallMessage] | None = None  # an assistant's calls
    tool_call_id: str | None = None  # a tool result: the call it answers
    function_call: FunctionCall | None = None  # an assistant's call, the legacy way


class VideoIOKwargs(BaseModel):
    """How to sample a request's video (vLLM's ``media_io_kwargs.video``)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    num_frames: int | None = Field(None, ge=1)
    fps: float | None = Field(None, gt=0)


class MediaIOKwargs(BaseModel):
    """Per-request media loading options, named as vLLM names them; unknown keys are refused."""

    model_config = ConfigDict(extra="forbid", strict=True)

    video: VideoIOKwargs | None = None


class ChatCompletionRequest(GenerationFields):
    """The request body of ``POST /v1/chat/completions``.

    Known fields the gateway cannot honour are refused by the pipeline with a 400 rather
    than silently dropped.
    """

    messages: list[ChatMessage] = Field(min_length=1)
    max_completion_tokens: int | None = Field(None, ge=1, le=INT32_MAX)
    logprobs: bool | None = None
    top_logprobs: int | None = Field(None, ge=0, le=20)
    tools: list[ToolDefinition] | None = Field(None, max_length=MAX_TOOLS)
    tool_choice: ToolChoice | None = None
    parallel_tool_calls: bool | None = None
    functions: list[FunctionDefinition] | None = Field(None, max_length=MAX_TOOLS)  # legacy
    function_call: FunctionCallChoice | None = None
    modalities: list[str] | None = None
    audio: Any = None  # spoken output settings (audio input is a content part)
    response_format: ResponseFormat | None = None
    media_io_kwargs: MediaIOKwargs | None = None
    # Honoured where the model's rendering has a reasoning switch (pipeline/reasoning.py).
    reasoning_effort: ReasoningEffort | None = None
    # Not OpenAI's: the LoRA adapter (a configured task id) for models served with adapters.
    lora_task_id: int | None = Field(None, ge=1, le=2**64 - 1)

    @property
    def requested_max_tokens(self) -> int | None:
        return self.max_completion_tokens or self.max_tokens
