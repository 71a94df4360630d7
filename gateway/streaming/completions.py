"""OpenAI legacy completion bodies and stream chunks (``text_completion``), as bytes.

One choice's piece is a constant prefix, the JSON-escaped text and a constant suffix, as chat
chunks are; several choices' events carry their own index. ``echo`` puts each
prompt in front of its choice's text (first in the stream, before any generated piece).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

from typing_extensions import assert_never

from gateway.families.calls import Outcome, TokenLogprob
from gateway.families.events import ChoiceDone, ReasoningDelta, TextDelta, ToolCallPiece
from gateway.observability.ids import hex_id
from gateway.protocol.common import UsageCounts
from gateway.streaming.chunks import DONE_FRAME, response_object, sse_frame
from gateway.streaming.logprobs import CompletionLogprobs


def new_completion_id() -> str:
    return f"cmpl-{hex_id()}"


class CompletionWriter:
    """Formats the SSE frames of one streamed completion (an ``sse.EventFormat``)."""

    done = DONE_FRAME

    def __init__(
        self,
        completion_id: str,
        model: str,
        include_usage: bool = False,
        echoed: Sequence[str] = (),
    ) -> None:
        self.head = {
            "id": completion_id,
            "object": "text_completion",
            "created": int(time.time()),
            "model": model,
        }
        self.include_usage = include_usage
        self.echoed = list(echoed)  # per choice, the prompt to put first (echo), else empty
        self.choices = max(1, len(self.echoed))
        # Per choice, where its next token starts in its text (after the echoed prompt).
        self._logprobs = [CompletionLogprobs(len(text)) for text in self.echoed or [""]]
        head = json.dumps(self.head, separators=(",", ":"))[:-1]
        self._prefix = ("data: " + head + ',"choices":[{"index":0,"text":').encode()
        usage = b',"usage":null' if include_usage else b""
        self._suffix = b',"logprobs":null,"finish_reason":null}]' + usage + b"}\n\n"

    def _chunk(self, index: int, text: str, finish: str | None, logprobs: Any = None) -> bytes:
        choice = {"index": index, "text": text, "logprobs": logprobs, "finish_reason": finish}
        chunk: dict[str, Any] = {**self.head, "choices": [choice]}
        if self.include_usage:
            chunk["usage"] = None
        return sse_frame(chunk)

    @property
    def start(self) -> bytes:
        return b"".join(self._chunk(i, text, None) for i, text in enumerate(self.echoed) if text)

    def content(self, event: TextDelta | ReasoningDelta | ToolCallPiece | ChoiceDone) -> bytes:
        if type(event) is TextDelta and not event.choice and event.tokens is None:
            # Choice 0's plain text: the per-token fast path (as ``ChunkWriter.content``).
            return self._prefix + json.dumps(event.text).encode() + self._suffix
        match event:
            case TextDelta(text, index, tokens):
                logprobs = None if tokens is None else self._logprobs[index](tokens)
                return self._chunk(index, text, None, logprobs)
            case ChoiceDone(outcome, index):
                return self._chunk(index, "", outcome.finish_reason)
            case ToolCallPiece() | ReasoningDelta():  # no tools, no reasoning parser here
                raise TypeError(f"a text completion cannot carry {type(event).__name__}")
            case _:
                assert_never(event)

    def finish(self, outcome: Outcome) -> bytes:
        frames = self._chunk(0, "", outcome.finish_reason) if self.choices == 1 else b""
        if self.include_usage:
            frames += sse_frame({**self.head, "choices": [], "usage": outcome.usage.to_dict()})
        return frames


def completion_body(
    completion_id: str,
    model: str,
    texts: Sequence[str],
    finish_reasons: Sequence[str],
    usage: UsageCounts,
    logprobs: Sequence[Sequence[TokenLogprob]] | None = None,
    offsets: Sequence[int] = (),
) -> dict[str, Any]:
    """The non-streamed ``text_completion`` object, one choice per text (``logprobs``: each
    choice's tokens, when asked for; ``offsets``: where each choice's generated text starts)."""
    choices: list[dict[str, Any]] = [
        {
            "index": index,
            "text": text,
            "logprobs": (
                CompletionLogprobs(offsets[index] if offsets else 0)(logprobs[index])
                if logprobs is not None
                else None
            ),
            "finish_reason": reason,
        }
        for index, (text, reason) in enumerate(zip(texts, finish_reasons, strict=True))
    ]
    return response_object("text_completion", completion_id, model, choices, usage)
