"""The one Server-Sent Events writer: every streamed endpoint goes out through ``stream_events``.

An endpoint supplies its ``EventFormat`` (OpenAI's chat chunks, transcript events); the framing,
the batching of frames that are ready together, and the error event are the same for all. The
generator's ``finally`` closes the upstream iterator: when the HTTP client goes away the
response cancels this generator, and closing the relay cancels the Triton calls. An error after
the first byte cannot change the status code any more, so it is sent as an ``error`` event (as
OpenAI does) followed by the format's terminator (``[DONE]`` for chat); a format with events of
its own for a failure (``ReportsFailure``: the Responses API's ``response.failed``) sends those.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator
from typing import Protocol, TypeVar, runtime_checkable

from typing_extensions import assert_never

from gateway.errors import GatewayError, UpstreamFailed, shutdown_of
from gateway.families.calls import Outcome
from gateway.families.events import (
    ChoiceDone,
    Done,
    ReasoningDelta,
    Relay,
    RelayEvent,
    TextDelta,
    ToolCallPiece,
)
from gateway.streaming.chunks import sse_frame

log = logging.getLogger(__name__)

Item = TypeVar("Item")
# What a writer formats one at a time; the ``Done`` that ends a stream goes to ``finish``.
Piece = TextDelta | ReasoningDelta | ToolCallPiece | ChoiceDone


class EventFormat(Protocol):
    """How one endpoint's stream looks: an opening, a frame per event, a closing."""

    @property
    def start(self) -> bytes: ...  # sent with the first piece (chat: the role chunk)

    @property
    def done(self) -> bytes: ...  # the terminator after the last frame (chat: [DONE])

    def content(self, event: Piece) -> bytes: ...

    def finish(self, outcome: Outcome) -> bytes: ...


@runtime_checkable
class ReportsFailure(Protocol):
    """An ``EventFormat`` whose stream reports a failure in its own events."""

    def failure(self, error: GatewayError) -> bytes: ...


def _failure(form: EventFormat, error: GatewayError) -> bytes:
    if isinstance(form, ReportsFailure):
        return form.failure(error)
    return sse_frame(error.to_body())


async def first_item(events: AsyncGenerator[Item, None]) -> Item:
    """Pull the first event before answering, so early failures keep their status code."""
    try:
        return await anext(events)
    except BaseException:
        await events.aclose()
        raise


async def stream_events(
    first: RelayEvent, events: Relay, form: EventFormat
) -> AsyncGenerator[bytes, None]:
    """The relay's events as SSE frames. Frames that are ready together go out as one body
    (the opening with the first piece; the closing and the terminator): one socket write, and
    one wake-up of the client, each instead of two or three. A failure after the first byte
    (the graceful stop's ``ShuttingDown`` included) is written in the endpoint's own way."""
    pending = form.start
    try:
        event: RelayEvent | None = first
        while event is not None:
            match event:
                case TextDelta() | ReasoningDelta() | ToolCallPiece() | ChoiceDone():
                    yield pending + form.content(event)
                    pending = b""
                case Done(outcome):
                    pending += form.finish(outcome)
                    break
                case _:
                    assert_never(event)
            event = await anext(events, None)
        yield pending + form.done
    except GatewayError as exc:
        yield pending + _failure(form, exc) + form.done
    except asyncio.CancelledError as cancel:
        shutdown = shutdown_of(cancel)
        if shutdown is None:
            raise
        yield pending + _failure(form, shutdown) + form.done
    except Exception as exc:  # the response has started: report, never hang
        log.exception("stream failed")
        failure = UpstreamFailed(f"the stream failed: {type(exc).__name__}")
        yield pending + _failure(form, failure) + form.done
    finally:
        await events.aclose()
