"""OpenAI's Conversations API request bodies (pydantic): ``POST /v1/conversations``, its
update, and ``POST /v1/conversations/{id}/items``. No I/O, no logic."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from gateway.protocol.responses import MAX_METADATA_KEY, MAX_METADATA_KEYS, MAX_METADATA_VALUE

MAX_ITEMS_AT_ONCE = 20  # OpenAI: "You may add up to 20 items at a time."


def checked_metadata(metadata: dict[str, str] | None) -> dict[str, str] | None:
    """OpenAI's bounds: 16 keys, keys of at most 64 characters, values of at most 512."""
    if metadata is None:
        return None
    if len(metadata) > MAX_METADATA_KEYS:
        raise ValueError(f"at most {MAX_METADATA_KEYS} metadata keys are allowed")
    if any(len(key) > MAX_METADATA_KEY for key in metadata):
        raise ValueError(f"metadata keys may have at most {MAX_METADATA_KEY} characters")
    if any(len(value) > MAX_METADATA_VALUE for value in metadata.values()):
        raise ValueError(f"metadata values may have at most {MAX_METADATA_VALUE} characters")
    return metadata


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
