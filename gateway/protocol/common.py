"""Wire types shared by every endpoint: usage (``UsageCounts`` builds its JSON without pydantic,
once per request), the model list."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel


@dataclass(frozen=True)
class UsageCounts:
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int | None = None
    # Of the completion tokens, those inside the reasoning span (a reasoning parser is on).
    reasoning_tokens: int | None = None

    def to_dict(self) -> dict[str, Any]:
        usage: dict[str, Any] = {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.prompt_tokens + self.completion_tokens,
        }
        if self.cached_tokens is not None:
            usage["prompt_tokens_details"] = {"cached_tokens": self.cached_tokens}
        if self.reasoning_tokens is not None:
            usage["completion_tokens_details"] = {"reasoning_tokens": self.reasoning_tokens}
        return usage


class PromptTokensDetails(BaseModel):
    cached_tokens: int = 0


class Usage(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    prompt_tokens_details: PromptTokensDetails | None = None


class ModelCard(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str
    # Extensions (OpenAI's SDK keeps unknown fields): the model family, and which Triton server
    # side it relies on (NVIDIA's, from which release, or what the deployment must provide).
    family: str | None = None
    server_side: str | None = None
    # The Triton contract it is served on: "engine" (TensorRT-LLM's ensemble/BLS/engine
    # inputs) or "llmapi" (NVIDIA's PyTorch-backend llmapi model); None until it is read.
    contract: str | None = None


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelCard]
