"""OpenAI messages -> a neutral Conversation plus the media parts it references, in order.

This is where the wire's many shapes (string content, part arrays, system vs developer)
collapse into the one shape families render. Media parts become ``MediaPart`` records that
say where they came from (``messages[i].content[j]``), so a later refusal can name the part.
Whether the model takes a kind of media is the media pipeline's question, not this module's.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from gateway.errors import InvalidRequest, echoed
from gateway.families.base import Conversation, Turn
from gateway.families.tool_formats.base import ToolCall
from gateway.location import Location
from gateway.protocol.chat import (
    AudioURLPart,
    ChatMessage,
    ImageURLPart,
    InputAudioPart,
    TextPart,
    VideoURLPart,
)
from gateway.protocol.structured import FunctionCall

MediaKind = Literal["image", "video", "audio"]


@dataclass(frozen=True)
class MediaPart:
    """One media part: a URL (http, https, data:, file:) or, for ``input_audio``, base64 data."""

    kind: MediaKind
    where: Location  # ("messages", 2, "content", 1)
    url: str | None = None
    data: str | None = None  # input_audio.data (base64)
    format: str | None = None  # input_audio.format ("wav", "mp3")
    detail: str | None = None  # image_url.detail: "low", "high", "auto", "original"


@dataclass(frozen=True)
class ParsedChat:
    conversation: Conversation
    media: tuple[MediaPart, ...] = ()

    @property
    def image_urls(self) -> tuple[str, ...]:
        return tuple(p.url for p in self.media if p.kind == "image" and p.url is not None)


def _media_part(part: object, where: Location) -> MediaPart | None:
    if isinstance(part, ImageURLPart):
        return MediaPart("image", where, url=part.image_url.url, detail=part.image_url.detail)
    if isinstance(part, VideoURLPart):
        return MediaPart("video", where, url=part.video_url.url)
    if isinstance(part, AudioURLPart):
        return MediaPart("audio", where, url=part.audio_url.url)
    if isinstance(part, InputAudioPart):
        audio = part.input_audio
        return MediaPart("audio", where, data=audio.data, format=audio.format)
    return None


def _message_parts(
    message: ChatMessage, index: int, origins: Mapping[Location, Location]
) -> tuple[str, list[MediaPart]]:
    """The text of one message and the media parts it carries (``origins``: a part that
    stands for part of another, a PDF's page, is named by what the client sent)."""
    content = message.content
    if content is None:
        return "", []
    if isinstance(content, str):
        return content, []
    texts: list[str] = []
    media: list[MediaPart] = []
    for part_index, part in enumerate(content):
        where: Location = ("messages", index, "content", part_index)
        where = origins.get(where, where)
        if isinstance(part, TextPart):
            texts.append(part.text)
            continue
        item = _media_part(part, where)
        if item is None:
            raise InvalidRequest(
                (f"content part type '{part.type}' is not supported (", where, ")"),
                param=where,
                code="unsupported_content_part",
            )
        if message.role != "user":
            raise InvalidRequest(
                (f"{item.kind} parts are only allowed in user messages (", where, ")"), param=where
            )
        media.append(item)
    return "\n".join(texts), media


def _turn(message: ChatMessage, index: int, text: str, media: list[MediaPart]) -> Turn:
    counts = {kind: sum(1 for m in media if m.kind == kind) for kind in ("image", "video", "audio")}
    role = "tool" if message.role in ("tool", "function") else message.role
    return Turn(
        role=role,  # type: ignore[arg-type]
        text=text,
        images=counts["image"],
        videos=counts["video"],
        audios=counts["audio"],
        tool_calls=_tool_calls(message, index),
        tool_call_id=message.tool_call_id or (message.name if message.role == "function" else None),
    )


def _tool_calls(message: ChatMessage, index: int) -> tuple[ToolCall, ...]:
    """An assistant's calls (``tool_calls``, or the legacy ``function_call``), each with
    arguments that are JSON text of an object, as templates render them decoded."""
    if message.role != "assistant":
        if message.tool_calls or message.function_call:
            raise InvalidRequest(
                ("only assistant messages carry tool calls (", ("messages", index), ")"),
                param=("messages", index, "tool_calls"),
            )
        return ()
    calls: list[tuple[str, FunctionCall, Location]] = [
        (c.id, c.function, ("tool_calls", j)) for j, c in enumerate(message.tool_calls or ())
    ]
    if message.function_call is not None:
        calls.append((f"call_{index}", message.function_call, ("function_call",)))
    parsed = []
    for call_id, function, where in calls:
        try:
            json.loads(function.arguments)
        except ValueError:
            at = ("messages", index, *where, "function", "arguments")
            raise InvalidRequest((at, " is not JSON"), param=at) from None
        parsed.append(ToolCall(call_id, function.name, function.arguments))
    return tuple(parsed)


def _check_answer(tool_call_id: str | None, calls: set[str], index: int) -> None:
    """A tool message answers a call an earlier assistant message made, as OpenAI requires
    (a result for no call would be rendered as the answer to nothing)."""
    message, where = ("messages", index), ("messages", index, "tool_call_id")
    if not tool_call_id:
        raise InvalidRequest((message, " has role 'tool' and no 'tool_call_id'"), param=where)
    if tool_call_id not in calls:
        raise InvalidRequest(
            (
                message,
                f" with role 'tool' answers tool_call_id {echoed(tool_call_id)}, "
                "which no earlier assistant message's 'tool_calls' has",
            ),
            param=where,
        )


def parse_messages(
    messages: list[ChatMessage], origins: Mapping[Location, Location] | None = None
) -> ParsedChat:
    """Fold system/developer messages into one system text; keep the turns in order.

    As OpenAI does, a system message may come after the first turn (its text joins the
    system text: the families' templates hold one system prompt), and a conversation may be
    system messages only (their text is then the user's turn: the templates need one).
    """
    system_parts: list[str] = []
    turns: list[Turn] = []
    media: list[MediaPart] = []
    calls: set[str] = set()  # the ids of the calls made so far: a tool message answers one
    for index, message in enumerate(messages):
        text, message_media = _message_parts(message, index, origins or {})
        if message.role in ("system", "developer"):
            system_parts.append(text)
            continue
        turn = _turn(message, index, text, message_media)
        if not text and not message_media and not turn.tool_calls and turn.role != "tool":
            at = ("messages", index)
            raise InvalidRequest((at, " has no content"), param=at)
        if message.role == "tool":
            _check_answer(message.tool_call_id, calls, index)
        calls.update(call.id for call in turn.tool_calls)
        turns.append(turn)
        media.extend(message_media)
    system = "\n".join(p for p in system_parts if p) or None
    if not turns:
        if system is None:
            raise InvalidRequest("the conversation has no text", param="messages")
        return ParsedChat(Conversation(system=None, turns=(Turn("user", system),)))
    return ParsedChat(Conversation(system=system, turns=tuple(turns)), tuple(media))
