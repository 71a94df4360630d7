"""Wire types shared by every endpoint: usage (``UsageCounts`` builds its JSON without pydantic,
once per request), the model list."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel


@dataclass(frozen=True)
class MediaTokens:
    """Prompt tokens that are media features, by modality, as the family sent them; None:
    no media of that kind (SGLang's ``prompt_tokens_details`` fields, present only then:
    sglang python/sglang/srt/entrypoints/openai/protocol.py @004c82e0, PromptTokensDetails)."""

    image_tokens: int | None = None
    video_tokens: int | None = None
    audio_tokens: int | None = None

    def fields(self) -> dict[str, int]:
        counts = {
            "image_tokens": self.image_tokens,
            "video_tokens": self.video_tokens,
            "audio_tokens": self.audio_tokens,
        }
        return {name: count for name, count in counts.items() if count is not None}

    def __add__(self, other: MediaTokens) -> MediaTokens:
        def add(a: int | None, b: int | None) -> int | None:
            return None if a is None and b is None else (a or 0) + (b or 0)

        return MediaTokens(
            add(self.image_tokens, other.image_tokens),
            add(self.video_tokens, other.video_tokens),
            add(self.audio_tokens, other.audio_tokens),
        )


@dataclass(frozen=True)
class UsageCounts:
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int | None = None
    # Of the completion tokens, those inside the reasoning span (a reasoning parser is on).
    reasoning_tokens: int | None = None
    media: MediaTokens | None = None

    def prompt_details(self) -> dict[str, int] | None:
        """``prompt_tokens_details`` (Responses: ``input_tokens_details``): cached tokens and
        each modality's tokens, or None when there is nothing to detail."""
        media = self.media.fields() if self.media is not None else {}
        if self.cached_tokens is None and not media:
            return None
        return {"cached_tokens": self.cached_tokens or 0, **media}

    def to_dict(self) -> dict[str, Any]:
        usage: dict[str, Any] = {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.prompt_tokens + self.completion_tokens,
        }
        details = self.prompt_details()
        if details is not None:
            usage["prompt_tokens_details"] = details
        if self.reasoning_tokens is not None:
            usage["completion_tokens_details"] = {"reasoning_tokens": self.reasoning_tokens}
        return usage


class PromptTokensDetails(BaseModel):
    cached_tokens: int = 0
    image_tokens: int | None = None
    video_tokens: int | None = None
    audio_tokens: int | None = None


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
