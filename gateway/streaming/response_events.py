"""The Responses API's answer: the ``response`` object as it grows, and its event stream.

``ResponseBuilder`` holds the response: fed every item the relay yields (text pieces, tool-call
deltas, then the ``Outcome``), it keeps the output items (a reasoning model's ``reasoning`` item
with one ``reasoning_text`` part, a ``message`` with one ``output_text`` part,
``function_call``s) and builds the object OpenAI's schema describes, for
the JSON answer, the store and the stream's lifecycle events alike. ``ResponseEvents`` is the
stream's ``EventFormat`` (``sse.stream_events``): ``response.created``, ``.in_progress``, then
for each output item ``output_item.added`` (and ``content_part.added``), its deltas
(``response.reasoning_text.delta`` for reasoning, as openai's ``ResponseReasoningTextDeltaEvent``
names it), its ``.done`` events, and ``response.completed`` (``.incomplete`` when cut by
``max_output_tokens``; ``.failed`` with the error). Every event carries a ``sequence_number``.
The builder is fed an item before the writer formats it, so the writer reads item ids and
finished texts from it.

The per-token frame is a constant prefix per output item, the JSON-escaped piece and the
sequence number: no model and no dict per token.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from typing import Any

from typing_extensions import assert_never

from gateway.errors import GatewayError
from gateway.families.calls import Outcome, TokenLogprob
from gateway.families.events import ChoiceDone, ReasoningDelta, TextDelta, ToolCallPiece
from gateway.families.tool_formats.base import ToolCallDelta
from gateway.streaming.logprobs import chat_logprobs


def new_response_id() -> str:
    return f"resp_{uuid.uuid4().hex}"


class ResponseBuilder:
    """One response object: ``echo`` holds the request's fields it repeats (model,
    instructions, tools, ...); output items are added as the relay's items come."""

    def __init__(self, response_id: str, created_at: int, echo: dict[str, Any]) -> None:
        self.id = response_id
        self.created_at = created_at
        self.echo = echo
        self.items: list[dict[str, Any]] = []
        self.final: dict[str, Any] | None = None
        self._pieces: list[str] = []  # the open message's text, joined when it closes
        self._tokens: list[TokenLogprob] = []  # its tokens, when log probabilities are asked
        self._message: int | None = None  # index of the open message item
        self._thoughts: list[str] = []  # the open reasoning item's text
        self._reasoning: int | None = None  # index of the open reasoning item
        self._calls: dict[int, int] = {}  # tool call index -> output index

    @property
    def current(self) -> int:
        """The index of the output item the last piece went to."""
        return len(self.items) - 1

    def add(self, event: TextDelta | ReasoningDelta | ToolCallPiece | ChoiceDone) -> None:
        match event:
            case TextDelta(text, _, tokens):
                self._text(text, tokens)
            case ReasoningDelta(text):  # its tokens' log probabilities are not listed
                if text:
                    self._thought(text)
            case ToolCallPiece(delta):
                self._tool_call(delta)
            case ChoiceDone():  # one choice: it ends with the request's Done
                pass
            case _:
                assert_never(event)

    def _thought(self, text: str) -> None:
        if self._reasoning is None:
            self._close_message("completed")
            self._reasoning = len(self.items)
            self.items.append(
                {"id": f"rs_{uuid.uuid4().hex}", "type": "reasoning", "status": "in_progress",
                 "summary": [], "content": []}
            )  # fmt: skip
        self._thoughts.append(text)

    def _close_reasoning(self, status: str) -> None:
        if self._reasoning is None:
            return
        item = self.items[self._reasoning]
        item["status"] = status
        item["content"] = [reasoning_part("".join(self._thoughts))]
        self._reasoning = None
        self._thoughts = []

    def _text(self, text: str, tokens: tuple[TokenLogprob, ...] | None) -> None:
        if self._message is None:
            self._close_reasoning("completed")
            self._close_message("completed")
            self._message = len(self.items)
            self.items.append(
                {"id": f"msg_{uuid.uuid4().hex}", "type": "message", "status": "in_progress",
                 "role": "assistant", "content": []}
            )  # fmt: skip
        self._pieces.append(text)
        if tokens is not None:
            self._tokens.extend(tokens)

    def _tool_call(self, delta: ToolCallDelta) -> None:
        index = self._calls.get(delta.index)
        if index is None:
            self._close_reasoning("completed")
            self._close_message("completed")
            index = self._calls[delta.index] = len(self.items)
            self.items.append(
                {"id": f"fc_{uuid.uuid4().hex}", "type": "function_call", "status": "in_progress",
                 "call_id": delta.id or f"call_{uuid.uuid4().hex}", "name": delta.name or "",
                 "arguments": ""}
            )  # fmt: skip
        self.items[index]["arguments"] += delta.arguments

    def _close_message(self, status: str) -> None:
        if self._message is None:
            return
        message = self.items[self._message]
        message["status"] = status
        message["content"] = [text_part("".join(self._pieces), self._tokens)]
        self._message = None
        self._pieces = []
        self._tokens = []

    def finish(self, outcome: Outcome) -> dict[str, Any]:
        """The final response: every item closed, the status, the usage."""
        cut = outcome.finish_reason == "length"
        status = "incomplete" if cut else "completed"
        self._close_reasoning(status)
        self._close_message(status)
        for item in self.items:
            if item["type"] == "function_call":
                item["status"] = status
        usage = outcome.usage
        self.final = self.snapshot(status)
        self.final["usage"] = {
            "input_tokens": usage.prompt_tokens,
            # Triton reports reused KV blocks, not blocks written: cache_write_tokens is 0.
            "input_tokens_details": {"cached_tokens": usage.cached_tokens or 0,
                                     "cache_write_tokens": 0,
                                     **(usage.media.fields() if usage.media else {})},
            "output_tokens": usage.completion_tokens,
            "output_tokens_details": {"reasoning_tokens": usage.reasoning_tokens or 0},
            "total_tokens": usage.prompt_tokens + usage.completion_tokens,
        }  # fmt: skip
        if cut:
            self.final["incomplete_details"] = {"reason": "max_output_tokens"}
        return self.final

    def snapshot(self, status: str, output: bool = True) -> dict[str, Any]:
        """The response object now (lifecycle events carry it)."""
        return {
            "id": self.id,
            "object": "response",
            "created_at": self.created_at,
            "status": status,
            "background": False,
            "error": None,
            "incomplete_details": None,
            **self.echo,
            "output": [dict(item) for item in self.items] if output else [],
            "usage": None,
        }

    def failed(self, error: GatewayError) -> dict[str, Any]:
        """The response when generation failed after the stream began."""
        self._close_reasoning("incomplete")
        self._close_message("incomplete")
        response = self.snapshot("failed")
        code = "rate_limit_exceeded" if error.status_code == 429 else "server_error"
        response["error"] = {"code": code, "message": f"{error.message} ({error.code})"}
        return response

    def text_of(self, index: int) -> str:
        """The text of message or reasoning item ``index`` so far."""
        item = self.items[index]
        if index == self._message:
            return "".join(self._pieces)
        if index == self._reasoning:
            return "".join(self._thoughts)
        return "".join(part["text"] for part in item["content"])

    def logprobs_of(self, index: int) -> list[dict[str, Any]]:
        """The message's token log probabilities (empty unless asked for)."""
        if index == self._message:
            return token_logprobs(self._tokens)
        return [entry for part in self.items[index]["content"] for entry in part["logprobs"]]


def token_logprobs(tokens: Sequence[TokenLogprob]) -> list[dict[str, Any]]:
    """Each token as the Responses API lists it (chat's ``logprobs.content`` entries)."""
    return chat_logprobs(tokens)["content"] if tokens else []


def reasoning_part(text: str) -> dict[str, Any]:
    """A reasoning item's content part (openai ``response_reasoning_item.Content``)."""
    return {"type": "reasoning_text", "text": text}


def text_part(text: str, tokens: Sequence[TokenLogprob] = ()) -> dict[str, Any]:
    return {
        "type": "output_text", "text": text, "annotations": [],
        "logprobs": token_logprobs(tokens),
    }  # fmt: skip


def event_frame(payload: dict[str, Any]) -> bytes:
    """One event: ``event:`` names its type, as OpenAI's stream does."""
    data = json.dumps(payload, separators=(",", ":"))
    return f"event: {payload['type']}\ndata: {data}\n\n".encode()


class ResponseEvents:
    """The ``sse.EventFormat`` of a streamed response, reading the items from ``builder``."""

    done = b""  # the Responses stream has no terminator: response.completed is the end

    def __init__(self, builder: ResponseBuilder) -> None:
        self.builder = builder
        self.sequence = 0
        self._open: int | None = None  # the output item whose events are being sent
        self._delta_prefix = b""

    def _event(self, kind: str, **fields: Any) -> bytes:
        frame = event_frame({"type": kind, "sequence_number": self.sequence, **fields})
        self.sequence += 1
        return frame

    @property
    def start(self) -> bytes:
        snapshot = self.builder.snapshot("in_progress", output=False)
        return self._event("response.created", response=snapshot) + self._event(
            "response.in_progress", response=snapshot
        )

    def content(self, event: TextDelta | ReasoningDelta | ToolCallPiece | ChoiceDone) -> bytes:
        if isinstance(event, ChoiceDone):  # one choice: it ends with the request's Done
            return b""
        if type(event) is ReasoningDelta and not event.text:  # tokens only: no event
            return b""
        frames = b""
        current = self.builder.current
        if current != self._open:
            frames = self._close() + self._announce(current)
        match event:
            case TextDelta(text=text, tokens=None):  # the per-token fast path
                sequence = str(self.sequence).encode()
                self.sequence += 1
                piece = json.dumps(text).encode()
                return (
                    frames + self._delta_prefix + piece + b',"sequence_number":' + sequence
                    + b"}\n\n"
                )  # fmt: skip
            case TextDelta(text, _, tokens):
                return frames + self._event(
                    "response.output_text.delta", item_id=self.builder.items[current]["id"],
                    output_index=current, content_index=0, logprobs=token_logprobs(tokens or ()),
                    delta=text,
                )  # fmt: skip
            case ReasoningDelta(text):
                return frames + self._event(
                    "response.reasoning_text.delta", item_id=self.builder.items[current]["id"],
                    output_index=current, content_index=0, delta=text,
                )  # fmt: skip
            case ToolCallPiece(delta):
                return frames + self._event(
                    "response.function_call_arguments.delta",
                    item_id=self.builder.items[current]["id"], output_index=current,
                    delta=delta.arguments,
                )  # fmt: skip
            case _:
                assert_never(event)

    def _announce(self, index: int) -> bytes:
        """``output_item.added`` (and a message's ``content_part.added``) for item ``index``."""
        self._open = index
        item = dict(self.builder.items[index])
        if item["type"] == "reasoning":
            return self._event(
                "response.output_item.added", output_index=index, item=item
            ) + self._event(
                "response.content_part.added", item_id=item["id"], output_index=index,
                content_index=0, part=reasoning_part(""),
            )  # fmt: skip
        if item["type"] != "message":  # its arguments come as deltas, the first one included
            item["arguments"] = ""
            return self._event("response.output_item.added", output_index=index, item=item)
        frames = self._event("response.output_item.added", output_index=index, item=item)
        frames += self._event(
            "response.content_part.added", item_id=item["id"], output_index=index,
            content_index=0, part=text_part(""),
        )  # fmt: skip
        head = {"type": "response.output_text.delta", "item_id": item["id"],
                "output_index": index, "content_index": 0, "logprobs": []}  # fmt: skip
        self._delta_prefix = (
            b"event: response.output_text.delta\ndata: "
            + json.dumps(head, separators=(",", ":"))[:-1].encode()
            + b',"delta":'
        )
        return frames

    def _close(self) -> bytes:
        """The ``.done`` events of the open item (its text or arguments are complete)."""
        index = self._open
        if index is None:
            return b""
        self._open = None
        item = self.builder.items[index]
        if item["type"] == "function_call":
            return self._event(
                "response.function_call_arguments.done", item_id=item["id"],
                output_index=index, arguments=item["arguments"],
            ) + self._event("response.output_item.done", output_index=index, item=item)  # fmt: skip
        text = self.builder.text_of(index)
        where = {"item_id": item["id"], "output_index": index, "content_index": 0}
        if item["type"] == "reasoning":
            return (
                self._event("response.reasoning_text.done", **where, text=text)
                + self._event("response.content_part.done", **where, part=reasoning_part(text))
                + self._event("response.output_item.done", output_index=index, item=item)
            )
        return (
            self._event(
                "response.output_text.done",
                **where,
                text=text,
                logprobs=self.builder.logprobs_of(index),
            )
            + self._event("response.content_part.done", **where, part=text_part(text))
            + self._event("response.output_item.done", output_index=index, item=item)
        )

    def finish(self, outcome: Outcome) -> bytes:
        """The last item's ``.done`` events, then ``response.completed`` or ``.incomplete``."""
        final = self.builder.final or self.builder.finish(outcome)
        closing = self._close()
        kind = "response.incomplete" if final["status"] == "incomplete" else "response.completed"
        return closing + self._event(kind, response=final)

    def failure(self, error: GatewayError) -> bytes:
        return self._event("response.failed", response=self.builder.failed(error))
