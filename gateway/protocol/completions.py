"""OpenAI's legacy completions wire type (request side): ``POST /v1/completions``.

A prompt is a string or a list of strings (one choice per prompt, each ``n`` times). Token-id
prompts (a list of ints, or of lists of ints) parse, and the pipeline refuses them: the
TensorRT-LLM ensemble takes text (``text_input``), not token ids.
"""

from __future__ import annotations

from pydantic import Field, field_validator

from gateway.protocol.generation import GenerationFields
from gateway.protocol.structured import ResponseFormat

MAX_PROMPTS = 16
DEFAULT_MAX_TOKENS = 16  # OpenAI's default for completions


class CompletionRequest(GenerationFields):
    prompt: str | list[str] | list[int] | list[list[int]]
    max_tokens: int | None = Field(DEFAULT_MAX_TOKENS, ge=1)
    echo: bool = False
    logprobs: int | None = Field(None, ge=0, le=20)
    suffix: str | None = None
    best_of: int | None = Field(None, ge=1)
    response_format: ResponseFormat | None = None  # vLLM's, as on chat

    @field_validator("echo", mode="before")
    @classmethod
    def _echo_null(cls, value: object) -> object:
        return False if value is None else value

    @field_validator("prompt")
    @classmethod
    def _prompt_count(
        cls, prompt: str | list[str] | list[int] | list[list[int]]
    ) -> str | list[str] | list[int] | list[list[int]]:
        if isinstance(prompt, list):
            if not prompt:
                raise ValueError("the prompt list is empty")
            if len(prompt) > MAX_PROMPTS and not isinstance(prompt[0], int):
                raise ValueError(f"at most {MAX_PROMPTS} prompts per request")
        return prompt

    @property
    def prompts(self) -> list[str] | None:
        """The text prompts, or None when the prompt is token ids."""
        if isinstance(self.prompt, str):
            return [self.prompt]
        if all(isinstance(p, str) for p in self.prompt):
            return [p for p in self.prompt if isinstance(p, str)]
        return None
