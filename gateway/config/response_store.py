"""``[responses]``: where stored responses (``/v1/responses`` with ``store``) live, and how long.

Either one SQLite file (the default, under the user's data directory: ``$XDG_DATA_HOME/mmgw``,
else ``~/.local/share/mmgw``, resolved when the store is first used, so a gateway that never
stores a response never creates it), or a PostgreSQL database named by ``store_url``, which
every gateway process and pod of a deployment shares. Retention is enforced on every write:
responses older than ``max_age_days`` and all but the newest ``max_responses`` are deleted; the
byte caps refuse a write instead (``max_total_bytes`` for the store, ``max_bytes_per_key`` for
one API key).
"""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import Field, field_validator

from gateway.config.limits import Strict

DEFAULT_MAX_RESPONSES = 10_000
DEFAULT_MAX_AGE_DAYS = 30.0  # OpenAI keeps stored responses 30 days
DEFAULT_MAX_STORED_BYTES = 32 * 1024 * 1024  # one response: its input (images) and output
DEFAULT_MAX_TOTAL_BYTES = 4 * 1024**3
DEFAULT_MAX_BYTES_PER_KEY = 1024**3
POSTGRES_SCHEMES = ("postgresql://", "postgres://")


def default_store_path() -> Path:
    """``$XDG_DATA_HOME/mmgw/responses.sqlite3``, else ``~/.local/share/mmgw/...``."""
    data_home = os.environ.get("XDG_DATA_HOME") or str(Path("~/.local/share").expanduser())
    return Path(data_home) / "mmgw" / "responses.sqlite3"


class ResponsesSettings(Strict):
    """``[responses]``: the store behind ``store``, ``previous_response_id`` and
    ``GET``/``DELETE /v1/responses/{id}``."""

    store_path: Path | None = Field(
        None, description="The SQLite file; default $XDG_DATA_HOME/mmgw/responses.sqlite3."
    )
    store_url: str | None = Field(
        None,
        description="postgresql://user:password@host:port/database: keep stored responses in "
        "PostgreSQL, shared by every gateway that names it (store_path is then unused).",
    )
    timeout_s: float = Field(
        5.0, gt=0, description="Deadline of one store operation; past it the request is 503."
    )
    max_connections: int = Field(10, ge=1, description="PostgreSQL connections per process.")
    max_background: int = Field(
        16, ge=1, description="Background responses one process runs at once; more are 429."
    )
    max_responses: int = Field(
        DEFAULT_MAX_RESPONSES, ge=1, description="Newest responses kept; older ones are deleted."
    )
    max_age_days: float = Field(
        DEFAULT_MAX_AGE_DAYS, gt=0, description="Responses older than this are deleted."
    )
    max_stored_bytes: int = Field(
        DEFAULT_MAX_STORED_BYTES,
        ge=1024,
        description="Largest stored response (its input items, images as sent, and output); a "
        "request with store=true over it is refused before generation.",
    )

    max_total_bytes: int = Field(
        DEFAULT_MAX_TOTAL_BYTES,
        ge=1024,
        description="Bytes the whole store may hold; a response that would pass it is refused "
        "(507 store_full).",
    )
    max_bytes_per_key: int = Field(
        DEFAULT_MAX_BYTES_PER_KEY,
        ge=1024,
        description="Bytes one API key's stored responses may hold; past it that key's "
        "store=true requests are refused (429 store_quota_exceeded).",
    )

    @field_validator("store_url")
    @classmethod
    def _postgres_only(cls, url: str | None) -> str | None:
        if url is not None and not url.startswith(POSTGRES_SCHEMES):
            raise ValueError("store_url must be a postgresql:// URL (SQLite is store_path)")
        return url

    @property
    def path(self) -> Path:
        return (self.store_path or default_store_path()).expanduser()
