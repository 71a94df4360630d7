"""The generation fields chat and legacy completions requests share (OpenAI's, and vLLM's
extensions the gateway honours), with their bounds and null handling. No I/O, no logic.

Types are strict, as OpenAI's API is: ``"max_tokens": true`` or ``"stream": "yes"`` is a 400,
not 1 and True (an integer is still a valid float). Strings a response may echo back (the
model id) and strings that cost work per token (stop sequences) are bounded.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

MAX_STOP_SEQUENCES = 16
MAX_STOP_LENGTH = 1024  # characters; the stop matcher holds back up to this much text
MAX_MODEL_ID_LENGTH = 256
MAX_CHOICES = 16  # n: each choice is a Triton request of its own
# The widest values Triton's tensors carry (INT32 and FP32 inputs): a larger one would wrap or
# become infinity on the way (and NumPy 2 refuses to convert it: a 500), so it is a 400 here.
INT32_MAX = 2**31 - 1
FLOAT32_MAX = 3.4028234663852886e38


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)  # vLLM's continuous_usage_stats

    include_usage: bool = False


class GenerationFields(BaseModel):
    """Fields every text-generating request has.

    Unknown fields are kept (not validated) so the pipeline can refuse the vLLM extensions it
    cannot honour by name; anything else unknown is ignored, as OpenAI-compatible servers do.
    """

    model_config = ConfigDict(extra="allow", strict=True)

    model: str = Field(min_length=1, max_length=MAX_MODEL_ID_LENGTH)
    max_tokens: int | None = Field(None, ge=1, le=INT32_MAX)
    temperature: float | None = Field(None, ge=0.0, le=2.0)
    top_p: float | None = Field(None, gt=0.0, le=1.0)
    top_k: int | None = Field(None, ge=0, le=INT32_MAX)
    seed: int | None = Field(None, ge=0, le=2**64 - 1)
    stop: str | list[str] | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    n: int = Field(1, ge=1, le=MAX_CHOICES)
    # vLLM's sampling extension: never stop at the end-of-sequence token (end_id -1).
    ignore_eos: bool = False
    presence_penalty: float | None = Field(None, ge=-2.0, le=2.0)
    frequency_penalty: float | None = Field(None, ge=-2.0, le=2.0)
    repetition_penalty: float | None = Field(None, gt=0.0, le=FLOAT32_MAX)
    min_tokens: int | None = Field(None, ge=0, le=INT32_MAX)
    logit_bias: dict[str, float] | None = None
    user: str | None = Field(None, max_length=MAX_MODEL_ID_LENGTH)

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
    def include_usage(self) -> bool:
        return bool(self.stream_options and self.stream_options.include_usage)
