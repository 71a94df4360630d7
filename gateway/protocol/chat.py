"""OpenAI chat-completions wire types (request side). No I/O and no logic beyond validation.

Types are strict, as OpenAI's API is: ``"max_tokens": true`` or ``"stream": "yes"`` is a 400,
not 1 and True (an integer is still a valid float). Strings a response may echo back (the
model id) and strings that cost work per token (stop sequences) are bounded.

Responses and stream chunks are built as plain dicts in ``streaming/chunks.py``: a pydantic
model per token would cost more than the rest of the relay.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

MAX_STOP_SEQUENCES = 16
MAX_STOP_LENGTH = 1024  # characters; the stop matcher holds back up to this much text
MAX_MODEL_ID_LENGTH = 256
# The widest values Triton's tensors carry (INT32 and FP32 inputs): a larger one would wrap or
# become infinity on the way (and NumPy 2 refuses to convert it: a 500), so it is a 400 here.
INT32_MAX = 2**31 - 1
FLOAT32_MAX = 3.4028234663852886e38


class _Part(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)


class TextPart(_Part):
    type: Literal["text"]
    text: str


class ImageURL(_Part):
    url: str = Field(min_length=1)
    detail: Literal["auto", "low", "high"] | None = None


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


ContentPart = Annotated[
    TextPart | ImageURLPart | VideoURLPart | InputAudioPart | AudioURLPart,
    Field(discriminator="type"),
]


class ChatMessage(_Part):
    role: Literal["system", "developer", "user", "assistant"]
    content: str | list[ContentPart] | None = None
    name: str | None = None


class VideoIOKwargs(BaseModel):
    """How to sample a request's video (vLLM's ``media_io_kwargs.video``)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    num_frames: int | None = Field(None, ge=1)
    fps: float | None = Field(None, gt=0)


class MediaIOKwargs(BaseModel):
    """Per-request media loading options, named as vLLM names them; unknown keys are refused."""

    model_config = ConfigDict(extra="forbid", strict=True)

    video: VideoIOKwargs | None = None


class StreamOptions(_Part):
    model_config = ConfigDict(extra="allow", strict=True)  # vLLM's continuous_usage_stats

    include_usage: bool = False


class ResponseFormat(_Part):
    type: str = "text"


class ChatCompletionRequest(BaseModel):
    """The request body of ``POST /v1/chat/completions``.

    Unknown fields are ignored, as OpenAI-compatible servers do; known fields the gateway
    cannot honour are refused by the pipeline with a 400 rather than silently dropped.
    """

    # Unknown fields are kept (not validated) so the pipeline can refuse the vLLM extensions it
    # cannot honour by name; anything else unknown is ignored, as OpenAI-compatible servers do.
    model_config = ConfigDict(extra="allow", strict=True)

    model: str = Field(min_length=1, max_length=MAX_MODEL_ID_LENGTH)
    messages: list[ChatMessage] = Field(min_length=1)
    max_tokens: int | None = Field(None, ge=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    temperature: float | None = Field(None, ge=0.0, le=2.0)
    top_p: float | None = Field(None, gt=0.0, le=1.0)
    top_k: int | None = Field(None, ge=0, le=INT32_MAX)
    seed: int | None = Field(None, ge=0, le=2**64 - 1)
    stop: str | list[str] | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    n: int = Field(1, ge=1)
    # vLLM's sampling extension: never stop at the end-of-sequence token (end_id -1).
    ignore_eos: bool = False
    presence_penalty: float | None = Field(None, ge=-2.0, le=2.0)
    frequency_penalty: float | None = Field(None, ge=-2.0, le=2.0)
    repetition_penalty: float | None = Field(None, gt=0.0, le=FLOAT32_MAX)
    min_tokens: int | None = Field(None, ge=0, le=INT32_MAX)
    logprobs: bool | None = None
    top_logprobs: int | None = None
    tools: list[Any] | None = None
    tool_choice: Any = None
    functions: list[Any] | None = None  # tools' deprecated predecessor
    function_call: Any = None
    logit_bias: dict[str, float] | None = None
    modalities: list[str] | None = None
    audio: Any = None  # spoken output settings (audio input is a content part)
    response_format: ResponseFormat | None = None
    user: str | None = None
    media_io_kwargs: MediaIOKwargs | None = None
    # Not OpenAI's: the LoRA adapter (a configured task id) for models served with adapters.
    lora_task_id: int | None = Field(None, ge=1, le=2**64 - 1)

    @field_validator("stream", "n", "ignore_eos", mode="before")
    @classmethod
    def _null_is_absent(cls, value: object, info: Any) -> object:
        """OpenAI's schema makes these nullable: ``null`` means the default."""
        if value is None:
            return cls.model_fields[info.field_name].default
        return value

    @field_validator("stop")
    @classmethod
    def _stop_list(cls, stop: str | list[str] | None) -> list[str] | None:
        if stop is None:
            return None
        stops = [stop] if isinstance(stop, str) else stop
        if len(stops) > MAX_STOP_SEQUENCES:
            raise ValueError(f"at most {MAX_STOP_SEQUENCES} stop sequences are allowed")
        if any(not s for s in stops):
            raise ValueError("stop sequences must not be empty")
        if any(len(s) > MAX_STOP_LENGTH for s in stops):
            raise ValueError(f"a stop sequence may have at most {MAX_STOP_LENGTH} characters")
        return stops

    @property
    def stop_list(self) -> list[str]:
        return list(self.stop or [])

    @property
    def requested_max_tokens(self) -> int | None:
        return self.max_completion_tokens or self.max_tokens

    @property
    def include_usage(self) -> bool:
        return bool(self.stream_options and self.stream_options.include_usage)
