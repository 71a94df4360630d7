"""Conversations (the Conversations API's rows) on both engines: scoped by API key, items kept
in the order they were added, appends from several stores at once never interleave, and the
items count against the byte caps."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from gateway.errors import StoreQuotaExceeded
from gateway.store import ResponseStore, Retention, StoredConversation
from tests.gateway.store.engines import DAY, Opener


def conversation(conversation_id: str, scope: str = "key-a") -> StoredConversation:
    return StoredConversation(conversation_id, scope, time.time(), {"topic": "birds"})


def item(item_id: str, text: str = "hello") -> dict[str, Any]:
    return {"id": item_id, "type": "message", "role": "user",
            "content": [{"type": "input_text", "text": text}]}  # fmt: skip


async def test_a_conversation_keeps_its_items_in_order(store: ResponseStore) -> None:
    await store.create_conversation(conversation("conv_1"), [item("msg_1"), item("msg_2")])
    assert await store.add_items("conv_1", "key-a", [item("msg_3")])
    items = await store.conversation_items("conv_1", "key-a")
    assert [i["id"] for i in items or []] == ["msg_1", "msg_2", "msg_3"]
    found = await store.get_conversation("conv_1", "key-a")
    assert found is not None and found.metadata == {"topic": "birds"}
    updated = await store.set_metadata("conv_1", "key-a", {"topic": "fish"})
    assert updated is not None and updated.metadata == {"topic": "fish"}
    assert await store.delete_item("conv_1", "key-a", "msg_2") is True
    assert await store.delete_item("conv_1", "key-a", "msg_2") is False
    items = await store.conversation_items("conv_1", "key-a")
    assert [i["id"] for i in items or []] == ["msg_1", "msg_3"]
    assert await store.add_items("conv_1", "key-a", [item("msg_4")])
    items = await store.conversation_items("conv_1", "key-a")
    assert [i["id"] for i in items or []] == ["msg_1", "msg_3", "msg_4"]
    assert await store.delete_conversation("conv_1", "key-a")
    assert await store.get_conversation("conv_1", "key-a") is None
    assert await store.conversation_items("conv_1", "key-a") is None


async def test_a_conversation_does_not_exist_for_another_key(store: ResponseStore) -> None:
    await store.create_conversation(conversation("conv_1"), [item("msg_1")])
    assert await store.get_conversation("conv_1", "key-b") is None
    assert await store.conversation_items("conv_1", "key-b") is None
    assert not await store.add_items("conv_1", "key-b", [item("msg_x")])
    assert await store.set_metadata("conv_1", "key-b", {}) is None
    assert await store.delete_item("conv_1", "key-b", "msg_1") is None
    assert not await store.delete_conversation("conv_1", "key-b")
    items = await store.conversation_items("conv_1", "key-a")
    assert [i["id"] for i in items or []] == ["msg_1"]


async def test_appends_from_several_stores_never_interleave(opener: Opener) -> None:
    stores = [opener(Retention(100, DAY)) for _ in range(3)]
    await stores[0].create_conversation(conversation("conv_1"), [])

    async def turn(index: int) -> None:
        pair = [item(f"msg_{index}_in"), item(f"msg_{index}_out")]
        assert await stores[index % 3].add_items("conv_1", "key-a", pair)

    await asyncio.gather(*(turn(i) for i in range(12)))
    ids = [i["id"] for i in await stores[1].conversation_items("conv_1", "key-a") or []]
    assert len(ids) == 24
    for first, second in zip(ids[::2], ids[1::2], strict=True):  # each turn's pair together
        assert first.endswith("_in") and second == first.replace("_in", "_out")


async def test_conversation_items_count_against_the_quota(opener: Opener) -> None:
    store = opener(Retention(100, DAY, max_bytes_per_scope=2000))
    await store.create_conversation(conversation("conv_1"), [item("msg_1", "x" * 900)])
    with pytest.raises(StoreQuotaExceeded):
        await store.add_items("conv_1", "key-a", [item("msg_2", "x" * 1200)])
    with pytest.raises(StoreQuotaExceeded):
        await store.check_room("key-a", 1200)
    items = await store.conversation_items("conv_1", "key-a")
    assert [i["id"] for i in items or []] == ["msg_1"]  # nothing half-added
    await store.create_conversation(conversation("conv_2", "key-b"), [item("m", "x" * 1200)])
