"""OpenAI chat-completion bodies and stream chunks, built as bytes without pydantic.

The per-token chunk is a constant prefix, the JSON-escaped text and a constant suffix:
one ``json.dumps`` of a string per token instead of a model per token.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Sequence
from typing import Any

from gateway.families.calls import Choice, Outcome, Scored, TokenLogprob
from gateway.protocol.common import UsageCounts
from gateway.streaming.logprobs import chat_logprobs

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
        choices: int = 1,
    ) -> None:
        self.completion_id = completion_id
        self.model = model
        self.include_usage = include_usage
        self.choices = choices  # several: items come as ``Choice``s, each ending on its own
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
        return b"".join(self.role(index) for index in range(self.choices))

    def role(self, index: int = 0) -> bytes:
        delta = {"role": "assistant", "content": ""}
        choice = {"index": index, "delta": delta, "logprobs": None, "finish_reason": None}
        return self._chunk([choice])

    def content(self, item: str | Scored | Choice) -> bytes:
        if isinstance(item, str):  # one choice: the per-token fast path
            return self._content_prefix + json.dumps(item).encode() + self._content_suffix
        index, piece = (0, item) if isinstance(item, Scored) else (item.index, item.item)
        if isinstance(piece, Outcome):
            return self.finish_chunk(piece.finish_reason, index)
        if isinstance(piece, Scored):
            delta, logprobs = {"content": piece.text}, chat_logprobs(piece.tokens)
        else:
            delta, logprobs = {"content": piece}, None
        return self._chunk(
            [{"index": index, "delta": delta, "logprobs": logprobs, "finish_reason": None}]
        )

    def finish(self, outcome: Outcome) -> bytes:
        """The end: the finish chunk (several choices sent theirs already), then usage."""
        frames = self.finish_chunk(outcome.finish_reason) if self.choices == 1 else b""
        return frames + self.usage(outcome.usage) if self.include_usage else frames

    def finish_chunk(self, reason: str, index: int = 0) -> bytes:
        choice = {"index": index, "delta": {}, "logprobs": None, "finish_reason": reason}
        return self._chunk([choice])

    def usage(self, usage: UsageCounts) -> bytes:
        return self._chunk([], usage=usage.to_dict())


def response_object(
    object_type: str,
    completion_id: str,
    model: str,
    choices: list[dict[str, Any]],
    usage: UsageCounts,
) -> dict[str, Any]:
    """A non-streamed completion object (``chat.completion``, ``text_completion``)."""
    return {
        "id": completion_id,
        "object": object_type,
        "created": int(time.time()),
        "model": model,
        "choices": choices,
        "usage": usage.to_dict(),
    }


def completion_body(
    completion_id: str,
    model: str,
    texts: Sequence[str],
    finish_reasons: Sequence[str],
    usage: UsageCounts,
    logprobs: Sequence[Sequence[TokenLogprob]] | None = None,
) -> dict[str, Any]:
    """The non-streamed ``chat.completion`` object, one choice per text (``logprobs``: each
    choice's tokens, when they were asked for)."""
    choices = [
        {
            "index": index,
            "message": {"role": "assistant", "content": text, "refusal": None},
            "logprobs": chat_logprobs(logprobs[index]) if logprobs is not None else None,
            "finish_reason": reason,
        }
        for index, (text, reason) in enumerate(zip(texts, finish_reasons, strict=True))
    ]
    return response_object("chat.completion", completion_id, model, choices, usage)
