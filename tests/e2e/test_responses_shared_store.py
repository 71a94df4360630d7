"""Two gateway processes (``mmgw serve``, each with a home folder of its own) in front of the
session's real Triton, sharing one real PostgreSQL store: what a Kubernetes deployment of
several gateway pods is. Through the OpenAI SDK unchanged: a conversation started on one
continues on the other (its image's KV cache reused), by ``previous_response_id`` and through
the Conversations API, ``GET``, ``input_items`` and ``DELETE``
work across them, two API keys never see each other's responses; stopping PostgreSQL gives
503s (and ``store: false`` is still served), starting it again heals both gateways; a
background response started on one is polled and cancelled on the other."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import openai
import pytest
from openai import AsyncOpenAI

from gateway.triton.embedded import EmbeddedTriton, free_loopback_port
from tests.e2e.test_responses_openai import image_question
from tests.e2e.test_serve_command import wait_healthy
from tests.postgres import PostgresServer

pytestmark = pytest.mark.e2e
KEYS = ("sk-first-tenant", "sk-second-tenant")


def config(triton: EmbeddedTriton, port: int, store_url: str) -> str:
    tokenizer = Path(triton.env["MMGW_REFERENCE_TOKENIZERS"]) / "reference_llava"
    return f"""api_keys = {list(KEYS)!r}

[server]
host = "127.0.0.1"
port = {port}

[embedded]
enabled = false

[decode]
workers = 1

[responses]
store_url = "{store_url}"
timeout_s = 3

[[models]]
id = "reference-llava"
family = "llava"
triton_model = "reference_llava"
triton_url = "{triton.grpc_url}"
end_id = "server"
tokenizer = "{tokenizer}"
"""


async def start(folder: Path, triton: EmbeddedTriton, store_url: str) -> tuple[str, object]:
    """``mmgw serve`` with ``folder`` as its home (nothing shared on disk with the other)."""
    folder.mkdir()
    port = free_loopback_port()
    (folder / "gateway.toml").write_text(config(triton, port, store_url))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MMGW_", "XDG_"))}
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "gateway.cli", "serve", "--config", str(folder / "gateway.toml"),
        "--log-level", "warning", env={**env, "HOME": str(folder)}, start_new_session=True,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    await wait_healthy(url, process, timeout_s=120)
    return url, process


@pytest.fixture
async def two_gateways(
    embedded_triton: EmbeddedTriton, postgres_server: PostgresServer, tmp_path: Path
) -> AsyncIterator[tuple[str, str]]:
    store_url = await postgres_server.new_database()
    started = await asyncio.gather(
        start(tmp_path / "home-a", embedded_triton, store_url),
        start(tmp_path / "home-b", embedded_triton, store_url),
    )
    try:
        yield started[0][0], started[1][0]
    finally:
        for _, process in started:
            assert isinstance(process, asyncio.subprocess.Process)
            if process.returncode is None:
                process.send_signal(signal.SIGTERM)
                try:
                    await asyncio.wait_for(process.wait(), 30)
                except asyncio.TimeoutError:
                    process.kill()
                    await process.wait()
    for home in ("home-a", "home-b"):  # nothing was stored on either pod's own disk
        assert not list((tmp_path / home).rglob("*.sqlite3"))


def sdk(url: str, key: str = KEYS[0]) -> AsyncOpenAI:
    return AsyncOpenAI(base_url=f"{url}/v1", api_key=key, max_retries=0, timeout=120)


async def test_a_conversation_moves_between_gateways_and_tenants_stay_apart(
    two_gateways: tuple[str, str],
) -> None:
    a, b = two_gateways
    first = await sdk(a).responses.create(
        model="reference-llava", input=image_question(), max_output_tokens=4, temperature=0
    )
    second = await sdk(b).responses.create(
        model="reference-llava", input="And its colours?", previous_response_id=first.id,
        max_output_tokens=4, temperature=0,
    )  # fmt: skip
    assert second.usage is not None and first.usage is not None
    assert second.usage.input_tokens > first.usage.input_tokens + first.usage.output_tokens
    assert second.usage.input_tokens_details.cached_tokens >= 576, "the image's prefix is reused"
    assert (await sdk(b).responses.retrieve(first.id)).output_text == first.output_text
    listed = [item async for item in sdk(a).responses.input_items.list(second.id, order="asc")]
    assert [item.type for item in listed] == ["message", "message", "message"]
    assert listed[1].id == first.output[0].id  # the first answer, as gateway A returned it
    stranger_a, stranger_b = sdk(a, KEYS[1]), sdk(b, KEYS[1])
    with pytest.raises(openai.NotFoundError):
        await stranger_b.responses.retrieve(first.id)
    with pytest.raises(openai.NotFoundError):
        await stranger_a.responses.delete(second.id)
    with pytest.raises(openai.BadRequestError):
        await stranger_a.responses.create(
            model="reference-llava", input="Hi", previous_response_id=second.id,
            max_output_tokens=2,
        )  # fmt: skip
    theirs = await stranger_b.responses.create(
        model="reference-llava", input="Mine", max_output_tokens=2
    )
    with pytest.raises(openai.NotFoundError):
        await sdk(a).responses.retrieve(theirs.id)
    # The Conversations API across the two gateways: made on A, continued on B.
    chat = await sdk(a).conversations.create(metadata={"user": "one"})
    opened = await sdk(a).responses.create(
        model="reference-llava", input=image_question(), conversation=chat.id,
        max_output_tokens=4, temperature=0,
    )  # fmt: skip
    assert opened.conversation is not None and opened.conversation.id == chat.id
    moved = await sdk(b).responses.create(
        model="reference-llava", input="Which colour?", conversation=chat.id,
        max_output_tokens=4, temperature=0,
    )  # fmt: skip
    assert moved.usage is not None and moved.usage.input_tokens_details.cached_tokens >= 576
    items = [item async for item in sdk(a).conversations.items.list(chat.id, order="asc")]
    assert [item.id for item in items][-1] == moved.output[0].id and len(items) == 4
    with pytest.raises(openai.NotFoundError):
        await stranger_b.conversations.retrieve(chat.id)
    with pytest.raises(openai.NotFoundError):
        await stranger_a.responses.create(
            model="reference-llava", input="Hi", conversation=chat.id, max_output_tokens=2
        )
    await sdk(b).conversations.delete(chat.id)
    with pytest.raises(openai.NotFoundError):
        await sdk(a).conversations.items.list(chat.id)
    await sdk(b).responses.delete(first.id)
    with pytest.raises(openai.NotFoundError):
        await sdk(a).responses.retrieve(first.id)
    with pytest.raises(openai.BadRequestError):  # what it continued is gone, on every gateway
        await sdk(a).responses.create(
            model="reference-llava", input="More?", previous_response_id=second.id,
            max_output_tokens=2,
        )  # fmt: skip


async def test_a_stopped_database_is_503_and_its_return_heals_both_gateways(
    two_gateways: tuple[str, str], postgres_server: PostgresServer
) -> None:
    a, b = two_gateways
    # First a background response: started on A, polled and cancelled on B.
    running = await sdk(a).responses.create(
        model="reference-llava", input="Tell me everything.", background=True,
        max_output_tokens=3000, extra_body={"ignore_eos": True},
    )  # fmt: skip
    assert running.status == "queued"
    for _ in range(200):
        if (await sdk(b).responses.retrieve(running.id)).status == "in_progress":
            break
        await asyncio.sleep(0.05)
    assert (await sdk(b).responses.cancel(running.id)).status == "cancelled"
    await asyncio.sleep(1.5)  # A's run sees the mark within 0.5 s and stops
    assert (await sdk(a).responses.retrieve(running.id)).status == "cancelled"
    made = await sdk(a).responses.create(
        model="reference-llava", input="Remember me.", max_output_tokens=3, temperature=0
    )
    await asyncio.to_thread(postgres_server.stop)
    try:
        for url in (a, b):
            with pytest.raises(openai.InternalServerError) as refused:
                await sdk(url).responses.retrieve(made.id)
            assert refused.value.status_code == 503
            assert refused.value.response.headers["retry-after"] == "1"
            with pytest.raises(openai.InternalServerError):
                await sdk(url).responses.create(
                    model="reference-llava", input="Store me.", max_output_tokens=2
                )
            served = await sdk(url).responses.create(
                model="reference-llava", input="Not stored.", max_output_tokens=2, store=False
            )
            assert served.status in ("completed", "incomplete")
    finally:
        await asyncio.to_thread(postgres_server.start)
    for url in (a, b):  # no gateway restart
        assert (await sdk(url).responses.retrieve(made.id)).id == made.id
    follow = await sdk(b).responses.create(
        model="reference-llava", input="Still there?", previous_response_id=made.id,
        max_output_tokens=2,
    )  # fmt: skip
    assert follow.previous_response_id == made.id
