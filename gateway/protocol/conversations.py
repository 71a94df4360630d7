"""OpenAI's Conversations API request bodies (pydantic): ``POST /v1/conversations``, its
update, and ``POST /v1/conversations/{id}/items``. No I/O, no logic."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from gateway.protocol.responses import checked_metadata

MAX_ITEMS_AT_ONCE = 20  # OpenAI: "You may add up to 20 items at a time."


class ConversationCreate(BaseModel):
    """``POST /v1/conversations``: the first items (input items, as ``input`` takes them)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    items: list[dict[str, Any]] | None = Field(None, max_length=MAX_ITEMS_AT_ONCE)
    metadata: dict[str, str] | None = None

    _metadata = field_validator("metadata")(checked_metadata)


class ConversationUpdate(BaseModel):
    """``POST /v1/conversations/{id}``: the metadata replaced."""

    model_config = ConfigDict(extra="forbid", strict=True)

    metadata: dict[str, str]

    _metadata = field_validator("metadata")(checked_metadata)


class ItemsCreate(BaseModel):
    """``POST /v1/conversations/{id}/items``."""

    model_config = ConfigDict(extra="forbid", strict=True)

    items: list[dict[str, Any]] = Field(min_length=1, max_length=MAX_ITEMS_AT_ONCE)
