"""``[responses]``: where stored responses (``/v1/responses`` with ``store``) live, and how long.

One SQLite file; the default is under the user's data directory (``$XDG_DATA_HOME/mmgw``, else
``~/.local/share/mmgw``), resolved when the store is first used, so a gateway that never stores a
response never creates it. Retention is enforced on every write: responses older than
``max_age_days`` and all but the newest ``max_responses`` are deleted.
"""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import Field

from gateway.config.limits import Strict

DEFAULT_MAX_RESPONSES = 10_000
DEFAULT_MAX_AGE_DAYS = 30.0  # OpenAI keeps stored responses 30 days
DEFAULT_MAX_STORED_BYTES = 32 * 1024 * 1024  # one response: its input (images) and output


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

    @property
    def path(self) -> Path:
        return (self.store_path or default_store_path()).expanduser()
