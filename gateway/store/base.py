"""What every response store is: the ``ResponseStore`` protocol the pipeline and routes call,
the row it keeps (``StoredResponse``) and the limits it enforces (``Retention``).

Two engines implement it with the same semantics, checked by one test suite run on both
(``tests/gateway/store/``): ``SqliteStore`` (one file, the default) and ``PostgresStore``
(one database shared by every gateway process and pod). The store knows JSON objects by id and
scope (an API key's digest) and nothing of HTTP or of the Responses wire format; its failures
are the gateway's ``StoreError`` family, so a route never sees a driver's exception.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any, Protocol

from gateway.errors import StoreFull, StoreQuotaExceeded

MAX_CHAIN = 1_000  # responses one conversation may go back through


@dataclass(frozen=True)
class Retention:
    """How many responses the store keeps, for how long, and how many bytes.

    ``max_responses`` and ``max_age_s`` are enforced by deleting the oldest rows on every write;
    the two byte caps are enforced by refusing the write (``StoreFull`` past ``max_total_bytes``,
    ``StoreQuotaExceeded`` past ``max_bytes_per_scope``): deleting another tenant's responses to
    make room would let one API key flush everyone else's conversations."""

    max_responses: int
    max_age_s: float
    max_total_bytes: int = 4 * 1024**3
    max_bytes_per_scope: int = 1024**3

    def check_room(self, total: int, in_scope: int, adding: int) -> None:
        """Refuse ``adding`` bytes when the store holds ``total`` and the scope ``in_scope``."""
        if in_scope + adding > self.max_bytes_per_scope:
            raise StoreQuotaExceeded(
                f"this API key's stored responses hold {in_scope} bytes; storing {adding} more "
                f"would pass its quota of {self.max_bytes_per_scope} (delete stored responses, "
                "or send store: false)",
                param="store",
            )
        if total + adding > self.max_total_bytes:
            raise StoreFull(  # what others store is not told
                f"the response store is full: storing {adding} more bytes would pass its cap "
                f"of {self.max_total_bytes} (send store: false, or retry once older responses "
                "expire)"
            )


@dataclass(frozen=True)
class StoredResponse:
    """One stored response: the object as returned, and its request's own input items."""

    id: str
    scope: str
    created_at: float
    previous_id: str | None
    response: dict[str, Any]
    input_items: list[dict[str, Any]]

    def encoded(self) -> tuple[str, str]:
        """The JSON columns; their size is what the byte caps count."""
        return (
            json.dumps(self.response, separators=(",", ":")),
            json.dumps(self.input_items, separators=(",", ":")),
        )


@dataclass(frozen=True)
class StoredConversation:
    """One conversation (the Conversations API): its metadata; its items are rows of their
    own, in the order they were added."""

    id: str
    scope: str
    created_at: float
    metadata: dict[str, str]


UNFINISHED = ("queued", "in_progress")  # a background response still running


def cancellable(stored: StoredResponse) -> bool:
    """A background response that has not finished yet."""
    response = stored.response
    return bool(response.get("background")) and response.get("status") in UNFINISHED


def cancelled(stored: StoredResponse) -> StoredResponse:
    """The response marked cancelled (what its run, on whichever gateway, stops at)."""
    return replace(stored, response={**stored.response, "status": "cancelled"})


def decoded(row: tuple[Any, ...]) -> StoredResponse:
    """A row of (id, scope, created_at, previous_id, response JSON, input items JSON)."""
    return StoredResponse(row[0], row[1], row[2], row[3], json.loads(row[4]), json.loads(row[5]))


class ResponseStore(Protocol):
    """Stored responses, scoped by API key: what ``previous_response_id``, ``GET``, ``DELETE``
    and ``input_items`` read. Every method answers within the store's deadline or raises
    ``StoreUnavailable``; none blocks the event loop."""

    retention: Retention

    async def put(self, stored: StoredResponse, keep_cancelled: bool = False) -> bool:
        """Write one response (replacing one of the same id), refusing it past the byte caps
        and deleting what retention no longer keeps, in one transaction. ``keep_cancelled``:
        leave a row marked cancelled as it is (a background run's write); False then."""

    async def cancel(self, response_id: str, scope: str) -> StoredResponse | None:
        """Mark an unfinished background response cancelled; the row as it now is (unchanged
        when it is not one), None when there is none in ``scope``."""

    async def check_room(self, scope: str, adding: int) -> None:
        """Raise what ``put`` would for ``adding`` more bytes in ``scope`` now: asked before
        generation, so a request that could not be stored does no work."""

    async def get(self, response_id: str, scope: str) -> StoredResponse | None:
        """The response, if it exists in ``scope`` and has not expired."""

    async def chain(self, response_id: str, scope: str) -> list[StoredResponse]:
        """The conversation ending at ``response_id``, oldest first, as far back as it is
        still stored: empty when the response itself is gone; the first one has a
        ``previous_id`` when a response it continued is gone (or it goes back further than
        ``MAX_CHAIN``)."""

    async def delete(self, response_id: str, scope: str) -> bool:
        """True when the response existed in ``scope`` and is now gone. Works on a full disk."""

    async def add_events(self, response_id: str, events: list[tuple[int, str]]) -> None:
        """Append a streamed background response's events (sequence number, SSE frame)."""

    async def events_after(
        self, response_id: str, scope: str, after: int
    ) -> list[tuple[int, str]] | None:
        """Its events numbered above ``after``, in order; None when the response is not there
        for ``scope``."""

    async def create_conversation(
        self, conversation: StoredConversation, items: list[dict[str, Any]]
    ) -> None:
        """A new conversation with its first items (counted against the byte caps)."""

    async def get_conversation(self, conversation_id: str, scope: str) -> StoredConversation | None:
        """The conversation, if it exists in ``scope``."""

    async def set_metadata(
        self, conversation_id: str, scope: str, metadata: dict[str, str]
    ) -> StoredConversation | None:
        """The conversation with its metadata replaced; None when it does not exist."""

    async def delete_conversation(self, conversation_id: str, scope: str) -> bool:
        """True when the conversation existed in ``scope`` and is now gone, items and all."""

    async def add_items(
        self, conversation_id: str, scope: str, items: list[dict[str, Any]]
    ) -> bool:
        """Append ``items`` (each with its ``id``) in order, refused past the byte caps; False
        when the conversation does not exist. Concurrent appends never interleave."""

    async def conversation_items(
        self, conversation_id: str, scope: str
    ) -> list[dict[str, Any]] | None:
        """Every item, oldest first; None when the conversation does not exist."""

    async def delete_item(self, conversation_id: str, scope: str, item_id: str) -> bool | None:
        """True when the item was deleted, False when the conversation has no such item, None
        when the conversation does not exist."""

    async def close(self) -> None:
        """Release connections and threads; the store is not used after."""
