"""OpenAI chat-completion bodies and stream chunks, built as bytes without pydantic.

The per-token chunk is a constant prefix, the JSON-escaped text and a constant suffix:
one ``json.dumps`` of a string per token instead of a model per token.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from gateway.families.calls import Outcome
from gateway.protocol.common import UsageCounts

DONE_FRAME = b"data: [DONE]\n\n"


def new_completion_id() -> str:
    return f"chatcmpl-{uuid.uuid4().hex}"


def sse_frame(payload: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(payload, separators=(",", ":")).encode() + b"\n\n"


class ChunkWriter:
    """Formats the SSE frames of one streamed completion (an ``sse.EventFormat``): the role
    chunk first, a chunk per piece, the finish chunk, the usage chunk when asked, ``[DONE]``."""

    done = DONE_FRAME

    def __init__(
        self,
        completion_id: str,
        model: str,
        created: int | None = None,
        include_usage: bool = False,
    ) -> None:
        self.completion_id = completion_id
        self.model = model
        self.include_usage = include_usage
        self.created = created or int(time.time())
        head = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": model,
        }
        head_json = json.dumps(head, separators=(",", ":"))[:-1]
        self._content_prefix = (
            "data: " + head_json + ',"choices":[{"index":0,"delta":{"content":'
        ).encode()
        # With include_usage, every chunk but the last carries "usage": null (OpenAI's rule).
        usage = b',"usage":null' if include_usage else b""
        self._content_suffix = b'},"logprobs":null,"finish_reason":null}]' + usage + b"}\n\n"

    def _chunk(self, choices: list[dict[str, Any]], **extra: Any) -> bytes:
        chunk = {
            "id": self.completion_id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": choices,
        }
        if self.include_usage:
            chunk["usage"] = None
        return sse_frame({**chunk, **extra})

    @property
    def start(self) -> bytes:
        return self.role()

    def role(self) -> bytes:
        delta = {"role": "assistant", "content": ""}
        return self._chunk([{"index": 0, "delta": delta, "logprobs": None, "finish_reason": None}])

    def content(self, text: str) -> bytes:
        return self._content_prefix + json.dumps(text).encode() + self._content_suffix

    def finish(self, outcome: Outcome) -> bytes:
        frames = self.finish_chunk(outcome.finish_reason)
        return frames + self.usage(outcome.usage) if self.include_usage else frames

    def finish_chunk(self, reason: str) -> bytes:
        return self._chunk([{"index": 0, "delta": {}, "logprobs": None, "finish_reason": reason}])

    def usage(self, usage: UsageCounts) -> bytes:
        return self._chunk([], usage=usage.to_dict())


def completion_body(
    completion_id: str, model: str, text: str, finish_reason: str, usage: UsageCounts
) -> dict[str, Any]:
    """The non-streamed ``chat.completion`` object."""
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text, "refusal": None},
                "logprobs": None,
                "finish_reason": finish_reason,
            }
        ],
        "usage": usage.to_dict(),
    }
