"""Responses ``input`` items -> the items as stored (and listed) -> chat messages.

A request's input is normalised once into OpenAI's item shapes, each with an id
(``msg_...``, ``fc_...``, ``fco_...``): that is what ``input_items`` lists and what a
continuation replays. Replayed conversations (earlier inputs and outputs) and the new input
become chat messages the same way, so ``/v1/responses`` reaches the model through the chat
pipeline: the same families, media plane, prompt rendering and KV-cache ids. Each chat message
remembers where it came from (``input[2]``), so the chat pipeline's refusals can name the
Responses field.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from gateway.errors import InvalidRequest
from gateway.location import Location
from gateway.protocol.chat import ChatMessage
from gateway.protocol.invalid import invalid_request
from gateway.protocol.responses import (
    ITEM_TYPES,
    FunctionCallItem,
    FunctionCallOutputItem,
    InputAudio,
    InputFile,
    InputImage,
    InputItem,
    InputText,
    MessageItem,
    OutputText,
    ReasoningItem,
    Refusal,
)

# OpenAI's other item types: known, not served here (hosted tools, references).
KNOWN_ITEM_TYPES = frozenset(
    {
        "item_reference", "file_search_call", "web_search_call", "computer_call",
        "computer_call_output", "code_interpreter_call", "image_generation_call",
        "local_shell_call", "local_shell_call_output", "shell_call", "shell_call_output",
        "apply_patch_call", "apply_patch_call_output", "mcp_list_tools", "mcp_approval_request",
        "mcp_approval_response", "mcp_call", "custom_tool_call", "custom_tool_call_output",
        "tool_search_call", "tool_search_output", "compaction", "program", "program_output",
    }
)  # fmt: skip
# Chat messages carry tool calls once tool calling lands in chat (protocol/chat.py): until
# then a tool loop's items are refused by name rather than dropped.
CHAT_TAKES_TOOL_CALLS = "tool_calls" in ChatMessage.model_fields
_MEDIA_PART = {"image": "image_url", "video": "video_url", "audio": "audio_url"}


def new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex}"


def _checked(raw: object, where: Location) -> InputItem:
    """One raw input item as its type, or a 400 naming it."""
    if not isinstance(raw, dict):
        raise InvalidRequest((where, ": an input item must be an object"), param=where)
    kind = raw.get("type", "message")
    model = ITEM_TYPES.get(kind) if isinstance(kind, str) else None
    if model is None:
        if isinstance(kind, str) and kind in KNOWN_ITEM_TYPES:  # a list type is no set key
            raise InvalidRequest(
                (f"input items of type '{kind}' are not supported by this gateway (", where, ")"),
                param=(*where, "type"), code="unsupported_parameter",
            )  # fmt: skip
        raise InvalidRequest(
            ((*where, "type"), f": unknown input item type {kind!r}; expected 'message', "
             "'function_call' or 'function_call_output'"),
            param=(*where, "type"), code="invalid_value",
        )  # fmt: skip
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        raise invalid_request(exc, where, tags=_PART_TYPES) from None


_PART_TYPES = frozenset(
    {"input_text", "input_image", "input_audio", "input_file", "output_text", "refusal"}
)


def _part(part: Any, role: str, where: Location) -> dict[str, Any]:
    """One content part in its stored shape (an assistant's text as ``output_text``)."""
    if isinstance(part, (InputText, OutputText)):
        if role == "assistant":
            return {"type": "output_text", "text": part.text, "annotations": []}
        return {"type": "input_text", "text": part.text}
    if isinstance(part, Refusal):
        return {"type": "refusal", "refusal": part.refusal}
    if role != "user":
        raise InvalidRequest(
            (f"{part.type} parts are only allowed in user messages (", where, ")"), param=where
        )
    if isinstance(part, InputImage):
        if part.file_id is not None or part.image_url is None:
            raise InvalidRequest(
                (where, ": send the image as image_url (an http(s) or data: URL); this "
                 "gateway has no Files API for file_id"),
                param=(*where, "file_id"), code="unsupported_parameter",
            )  # fmt: skip
        return {"type": "input_image", "image_url": part.image_url, "detail": part.detail or "auto"}
    if isinstance(part, InputAudio):
        return {"type": "input_audio", "input_audio": part.input_audio.model_dump()}
    return _file(part, where)


def _file(part: InputFile, where: Location) -> dict[str, Any]:
    """An ``input_file`` the gateway can take: a PDF (``file_data``, a data: URL or bare
    base64; or ``file_url``, fetched as every media URL is), or an image, video or audio clip
    as a data: URL. No Files API, so ``file_id`` is refused."""
    if part.file_id is not None:
        raise InvalidRequest(
            (where, ": this gateway has no Files API, so file_id cannot be read; send the file "
             "as file_data (a data: URL) or file_url"),
            param=(*where, "file_id"), code="unsupported_parameter",
        )  # fmt: skip
    if (part.file_data is None) == (part.file_url is None):
        raise InvalidRequest(
            (where, ": input_file needs exactly one of file_data and file_url"), param=where
        )
    stored: dict[str, Any] = {"type": "input_file", "filename": part.filename}
    if part.file_url is not None:
        stored["file_url"] = part.file_url
    else:
        stored["file_data"] = part.file_data
    return stored


def _content(item: MessageItem, where: Location) -> list[dict[str, Any]]:
    if isinstance(item.content, str):
        text = InputText(type="input_text", text=item.content)
        return [_part(text, item.role, where)]
    return [_part(p, item.role, (*where, "content", i)) for i, p in enumerate(item.content)]


def _output_text(output: str | list[Any]) -> str:
    if isinstance(output, str):
        return output
    return "\n".join(p.text for p in output if isinstance(p, (InputText, OutputText)))


def normalise(raw: str | list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A request's ``input`` as stored items, each with an id of its own."""
    if isinstance(raw, str):
        return [_message("user", [{"type": "input_text", "text": raw}])]
    stored: list[dict[str, Any]] = []
    for index, value in enumerate(raw):
        where = ("input", index)
        item = _checked(value, where)
        if isinstance(item, MessageItem):
            stored.append(_message(item.role, _content(item, where)))
        elif isinstance(item, FunctionCallItem):
            stored.append(
                {"id": new_id("fc"), "type": "function_call", "status": "completed",
                 "call_id": item.call_id, "name": item.name, "arguments": item.arguments}
            )  # fmt: skip
        elif isinstance(item, ReasoningItem):
            stored.append(_reasoning(item))
        else:
            assert isinstance(item, FunctionCallOutputItem)
            stored.append(
                {"id": new_id("fco"), "type": "function_call_output", "status": "completed",
                 "call_id": item.call_id, "output": _output_text(item.output)}
            )  # fmt: skip
    if not stored:
        raise InvalidRequest("input has no items", param="input")
    return stored


def _reasoning(item: ReasoningItem) -> dict[str, Any]:
    """A replayed reasoning item as stored (its text kept; no encrypted content is issued
    here, so none is kept)."""
    content = [part.model_dump() for part in item.content or ()]
    summary = [part.model_dump() for part in item.summary]
    return {"id": item.id or new_id("rs"), "type": "reasoning", "status": "completed",
            "summary": summary, "content": content}  # fmt: skip


def _message(role: str, content: list[dict[str, Any]]) -> dict[str, Any]:
    return {"id": new_id("msg"), "type": "message", "role": role, "status": "completed",
            "content": content}  # fmt: skip


@dataclass
class ChatMessages:
    """Chat messages, and for each the Responses field it came from."""

    messages: list[dict[str, Any]] = field(default_factory=list)
    origins: list[Location] = field(default_factory=list)

    def add(self, message: dict[str, Any], origin: Location) -> None:
        self.messages.append(message)
        self.origins.append(origin)


def _chat_part(part: dict[str, Any]) -> dict[str, Any]:
    kind = part["type"]
    if kind in ("input_text", "output_text"):
        return {"type": "text", "text": part["text"]}
    if kind == "refusal":
        return {"type": "text", "text": part["refusal"]}
    if kind == "input_image":
        image = {"url": part["image_url"], "detail": part.get("detail")}
        return {"type": "image_url", "image_url": image}
    if kind == "input_audio":
        return {"type": "input_audio", "input_audio": part["input_audio"]}
    data = part.get("file_data")
    media = data[5:].split(";", 1)[0].split("/", 1)[0] if data and data.startswith("data:") else ""
    if data is not None and media in _MEDIA_PART:  # an image, a video or audio as a file
        return {"type": _MEDIA_PART[media], _MEDIA_PART[media]: {"url": data}}
    source = {"file_data": data} if data is not None else {"file_url": part["file_url"]}
    return {"type": "file", "file": {**source, "filename": part.get("filename")}}


def to_chat(items: Sequence[dict[str, Any]], out: ChatMessages, origin: Location | None) -> None:
    """Stored items (a request's input, or an earlier response's output) as chat messages;
    ``origin`` None: each is named by its place in this request's ``input``."""
    for index, item in enumerate(items):
        where = origin or ("input", index)
        kind = item["type"]
        if kind == "reasoning":
            # Earlier turns' reasoning is not fed back (as vLLM and OpenAI do, and as the
            # reasoning models' own chat templates drop it): the turn's answer stands alone.
            continue
        if kind == "message":
            parts = [_chat_part(p) for p in item["content"]]
            if item["role"] == "assistant":
                text = "".join(p["text"] for p in parts if p["type"] == "text")
                out.add({"role": "assistant", "content": text}, where)
            else:
                out.add({"role": item["role"], "content": parts}, where)
            continue
        if not CHAT_TAKES_TOOL_CALLS:
            raise InvalidRequest(
                (f"{kind} items need tool calling, which this gateway does not support yet (",
                 where, ")"),
                param=where, code="unsupported_parameter",
            )  # fmt: skip
        if kind == "function_call":
            call = {"id": item["call_id"], "type": "function",
                    "function": {"name": item["name"], "arguments": item["arguments"]}}  # fmt: skip
            previous = out.messages[-1] if out.messages else None
            if previous is not None and previous.get("tool_calls"):
                previous["tool_calls"].append(call)  # parallel calls: one assistant turn
            else:
                out.add({"role": "assistant", "content": None, "tool_calls": [call]}, where)
        elif kind == "function_call_output":
            out.add(
                {"role": "tool", "tool_call_id": item["call_id"], "content": item["output"]}, where
            )
        else:  # an output item of a kind this gateway never produces
            raise InvalidRequest((f"cannot replay a '{kind}' item (", where, ")"), param=where)
