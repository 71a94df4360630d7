"""What a background response needs of both engines: marking it cancelled from any store on
the same place, and its own run's later writes leaving that mark alone."""

from __future__ import annotations

from dataclasses import replace

from gateway.store import ResponseStore, Retention, StoredResponse
from tests.gateway.store.engines import DAY, Opener, record


def running(
    response_id: str, status: str = "in_progress", background: bool = True
) -> StoredResponse:
    stored = record(response_id, scope="key-a")
    return replace(stored, response={**stored.response, "status": status, "background": background})


async def test_a_running_background_response_is_cancelled_from_another_store(
    opener: Opener,
) -> None:
    runner, other = opener(Retention(10, DAY)), opener(Retention(10, DAY))
    await runner.put(running("resp_1"))
    assert await other.cancel("resp_1", "key-b") is None  # another key's: not there
    marked = await other.cancel("resp_1", "key-a")
    assert marked is not None and marked.response["status"] == "cancelled"
    finished = running("resp_1", "completed")
    assert not await runner.put(finished, keep_cancelled=True)
    found = await runner.get("resp_1", "key-a")
    assert found is not None and found.response["status"] == "cancelled"


async def test_only_unfinished_background_responses_are_marked(store: ResponseStore) -> None:
    await store.put(running("resp_done", "completed"))
    await store.put(running("resp_fg", "in_progress", background=False))
    for response_id, status in (("resp_done", "completed"), ("resp_fg", "in_progress")):
        unchanged = await store.cancel(response_id, "key-a")
        assert unchanged is not None and unchanged.response["status"] == status
    assert await store.put(running("resp_new", "queued"), keep_cancelled=True)
    assert await store.cancel("resp_missing", "key-a") is None


async def test_a_streams_events_are_read_after_a_number_and_go_with_the_response(
    opener: Opener,
) -> None:
    writer, reader = opener(Retention(2, DAY)), opener(Retention(2, DAY))
    await writer.put(running("resp_1"))
    await writer.add_events("resp_1", [(0, "a"), (1, "b")])
    await writer.add_events("resp_1", [(2, "c")])
    assert await reader.events_after("resp_1", "key-a", -1) == [(0, "a"), (1, "b"), (2, "c")]
    assert await reader.events_after("resp_1", "key-a", 1) == [(2, "c")]
    assert await reader.events_after("resp_1", "key-b", -1) is None  # another key's
    assert await reader.delete("resp_1", "key-a")
    assert await reader.events_after("resp_1", "key-a", -1) is None
    await writer.put(running("resp_2"))
    await writer.add_events("resp_2", [(0, "x")])
    for index in range(3):  # retention keeps 2: resp_2 goes, and its events with it
        await writer.put(running(f"resp_new_{index}"))
    await writer.put(running("resp_2"))  # the same id again: no events of the old one
    assert await reader.events_after("resp_2", "key-a", -1) == []
