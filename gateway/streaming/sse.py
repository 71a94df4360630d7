"""Relay deltas as Server-Sent Events in OpenAI's chunk format, ending with ``[DONE]``.

The generator's ``finally`` closes the upstream iterator: when the HTTP client goes away
Starlette cancels this generator, and closing the relay cancels the Triton stream.
An error after the first byte cannot change the status code any more, so it is sent as
an ``error`` event (as OpenAI does) followed by ``[DONE]``.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

from gateway.errors import GatewayError, UpstreamFailed
from gateway.pipeline.chat import Outcome
from gateway.streaming.chunks import DONE_FRAME, ChunkWriter, error_frame

log = logging.getLogger(__name__)


async def first_item(events: AsyncIterator[str | Outcome]) -> str | Outcome:
    """Pull the first event before answering, so early failures keep their status code."""
    try:
        return await anext(events)
    except BaseException:
        await events.aclose()
        raise


async def sse_events(
    first: str | Outcome,
    events: AsyncIterator[str | Outcome],
    writer: ChunkWriter,
    include_usage: bool,
) -> AsyncIterator[bytes]:
    """The chunks as SSE frames. Frames that are ready together go out as one body (the
    role with the first token; finish, usage and ``[DONE]``): one socket write, and one
    wake-up of the client, each instead of two or three."""
    pending = writer.role()
    try:
        item: str | Outcome | None = first
        while item is not None:
            if isinstance(item, Outcome):
                pending += writer.finish(item.finish_reason)
                if include_usage:
                    pending += writer.usage(item.usage)
                break
            if item:
                yield pending + writer.content(item)
                pending = b""
            item = await anext(events, None)
        yield pending + DONE_FRAME
    except GatewayError as exc:
        yield pending + error_frame(exc.to_body()) + DONE_FRAME
    except Exception as exc:  # the response has started: report, never hang
        log.exception("stream failed")
        failure = UpstreamFailed(f"the stream failed: {type(exc).__name__}")
        yield pending + error_frame(failure.to_body()) + DONE_FRAME
    finally:
        await events.aclose()
