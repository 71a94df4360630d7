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
