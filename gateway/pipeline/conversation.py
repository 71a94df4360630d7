"""OpenAI messages -> a neutral Conversation plus the media URLs it references, in order.

This is where the wire's many shapes (string content, part arrays, system vs developer)
collapse into the one shape families render. Parts a family cannot use are refused here
with a 400 that names the part.
"""

from __future__ import annotations

from dataclasses import dataclass

from gateway.errors import InvalidRequest
from gateway.families.base import Conversation, Turn
from gateway.protocol.chat import ChatMessage, ImageURLPart, TextPart


@dataclass(frozen=True)
class ParsedChat:
    conversation: Conversation
    image_urls: tuple[str, ...]


def _message_parts(message: ChatMessage, index: int) -> tuple[str, list[str]]:
    """The text of one message and the image URLs it carries."""
    content = message.content
    if content is None:
        return "", []
    if isinstance(content, str):
        return content, []
    texts: list[str] = []
    urls: list[str] = []
    for part_index, part in enumerate(content):
        where = f"messages[{index}].content[{part_index}]"
        if isinstance(part, TextPart):
            texts.append(part.text)
        elif isinstance(part, ImageURLPart):
            if message.role != "user":
                raise InvalidRequest(
                    f"images are only allowed in user messages ({where})", param=where
                )
            urls.append(part.image_url.url)
        else:
            raise InvalidRequest(
                f"content part type '{part.type}' is not supported by this model yet ({where})",
                param=where,
                code="unsupported_content_part",
            )
    return "\n".join(texts), urls


def parse_messages(messages: list[ChatMessage]) -> ParsedChat:
    """Fold system/developer messages into one system text; keep the turns in order."""
    system_parts: list[str] = []
    turns: list[Turn] = []
    urls: list[str] = []
    for index, message in enumerate(messages):
        text, message_urls = _message_parts(message, index)
        if message.role in ("system", "developer"):
            if turns:
                raise InvalidRequest(
                    "system messages must come before the conversation's turns",
                    param=f"messages[{index}]",
                )
            system_parts.append(text)
            continue
        if not text and not message_urls:
            raise InvalidRequest(f"messages[{index}] has no content", param=f"messages[{index}]")
        turns.append(Turn(role=message.role, text=text, images=len(message_urls)))  # type: ignore[arg-type]
        urls.extend(message_urls)
    if not turns:
        raise InvalidRequest("the conversation needs at least one user message", param="messages")
    system = "\n".join(p for p in system_parts if p) or None
    return ParsedChat(Conversation(system=system, turns=tuple(turns)), tuple(urls))
