"""A served model over several fake Triton replicas, through the app: placement, failover,
the load bound, refused configs, and what /metrics and the access log say per replica."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest

from gateway.app import create_app
from gateway.config import EmbeddedSettings, ServedModel, Settings
from gateway.media.decoder import InProcessDecoder
from gateway.observability.logging import JsonFormatter
from gateway.runtime import Runtime, build_runtime
from gateway.triton.replicas import ReplicaSet, choice
from tests.fakes.app import chat, data_url, http_client, image_part, png, sse_payloads
from tests.fakes.triton import FakeTriton
from tests.fakes.triton_configs import default_configs
from tests.gateway.observability.test_metrics import samples

URLS = ["10.0.0.1:8001", "10.0.0.2:8001", "10.0.0.3:8001"]


def image_chat(seed: int, question: str = "What is it?", **fields: Any) -> dict[str, Any]:
    content = [image_part(data_url(png(seed))), {"type": "text", "text": question}]
    return chat(content, **fields)


@asynccontextmanager
async def replicas(
    fakes: list[FakeTriton], **model: Any
) -> AsyncIterator[tuple[httpx.AsyncClient, Runtime]]:
    """The app serving fake-llava from ``fakes`` as one replica set."""
    settings = Settings(
        models=[
            ServedModel(
                id="fake-llava",
                family="llava",
                triton_model="ensemble",
                triton_url=[f.url for f in fakes],
                **model,
            )
        ],
        embedded=EmbeddedSettings(enabled=False),
        decode={"workers": 1},
    )
    by_url = {f.url: f for f in fakes}
    runtime = await build_runtime(  # media on threads: no decode worker process
        settings,
        connect=by_url.__getitem__,  # type: ignore[arg-type]
        decoder=InProcessDecoder(),
    )
    app = create_app(settings, runtime)
    app.state.runtime = runtime
    try:
        async with http_client(app) as http:
            yield http, runtime
    finally:
        await runtime.aclose()


def served_by(fakes: list[FakeTriton]) -> dict[int, set[str]]:
    """Content id -> the replicas that received a request carrying it."""
    seen: dict[int, set[str]] = {}
    for fake in fakes:
        for request in fake.requests:
            seen.setdefault(int(request.scalar("prompt_table_extra_id")), set()).add(fake.url)
    return seen


def new_fakes(count: int = 3) -> list[FakeTriton]:
    return [FakeTriton(url=url) for url in URLS[:count]]


async def test_affinity_sends_every_repeat_of_an_image_to_one_replica() -> None:
    fakes = new_fakes()
    async with replicas(fakes) as (http, _):
        for round_ in range(3):
            for seed in range(8):
                response = await http.post(
                    "/v1/chat/completions", json=image_chat(seed, str(round_))
                )
                assert response.status_code == 200, response.text
    placed = served_by(fakes)
    assert len(placed) == 8 and all(len(urls) == 1 for urls in placed.values())
    assert len({url for urls in placed.values() for url in urls}) >= 2  # and images spread
    for extra_id, urls in placed.items():  # exactly where rendezvous hashing puts them
        assert urls == {choice.rendezvous(extra_id, sorted(URLS))[0]}


async def test_round_robin_spreads_an_image_over_every_replica() -> None:
    fakes = new_fakes()
    async with replicas(fakes, routing="round_robin") as (http, _):
        for round_ in range(3):
            response = await http.post("/v1/chat/completions", json=image_chat(1, str(round_)))
            assert response.status_code == 200
    [urls] = served_by(fakes).values()
    assert urls == set(URLS)


async def test_text_only_prompts_sharing_a_first_block_share_a_replica() -> None:
    fakes = new_fakes()
    system = "You are a careful assistant who answers in one short sentence. " * 5
    async with replicas(fakes) as (http, _):
        for question in ("Why?", "How?", "When?", "Where?"):
            body = {
                "model": "fake-llava",
                "messages": [
                    {"role": "system", "content": system},
                    {"role": "user", "content": question},
                ],
            }
            assert (await http.post("/v1/chat/completions", json=body)).status_code == 200
    assert sorted(len(f.requests) for f in fakes) == [0, 0, 4]


async def test_a_replica_that_cannot_be_reached_is_retried_on_the_next_and_ejected(
    caplog: pytest.LogCaptureFixture,
) -> None:
    fakes = new_fakes()
    async with replicas(fakes) as (http, runtime):
        assert (await http.post("/v1/chat/completions", json=image_chat(5))).status_code == 200
        [first] = [f for f in fakes if f.requests]
        first.down = True
        caplog.set_level(logging.INFO)
        response = await http.post("/v1/chat/completions", json=image_chat(5, "again"))
        assert response.status_code == 200, response.text
        [second] = [f for f in fakes if f is not first and f.requests]
        assert len(second.requests) == 1
        metrics = samples(runtime.metrics)
        assert metrics[("mmgw_replica_retries_total", (("replica", first.url),))] == 1
        assert metrics[("mmgw_replica_healthy", (("replica", first.url),))] == 0
        assert metrics[("mmgw_replica_healthy", (("replica", second.url),))] == 1
        # While ejected it gets nothing: the next request goes straight to the second choice.
        assert (await http.post("/v1/chat/completions", json=image_chat(5, "3"))).status_code == 200
        assert len(second.requests) == 2
        assert metrics[("mmgw_replica_requests_total", (("replica", first.url),))] == 2
    access = [
        json.loads(JsonFormatter().format(r)) for r in caplog.records if r.name == "gateway.access"
    ]
    assert [line["replica"] for line in access] == [second.url, second.url]
    assert any("retrying on " + second.url in r.getMessage() for r in caplog.records)


async def test_a_replica_back_from_a_failed_probe_rejoins_and_gets_its_keys_back() -> None:
    fakes = new_fakes()
    async with replicas(fakes) as (http, runtime):
        assert (await http.post("/v1/chat/completions", json=image_chat(9))).status_code == 200
        [home] = [f for f in fakes if f.requests]
        home.down = True
        assert await runtime.ready()  # the others serve
        assert (await http.post("/v1/chat/completions", json=image_chat(9, "2"))).status_code == 200
        assert len(home.requests) == 1
        home.down = False
        await runtime.readiness.probe(1.0)  # what the readiness watch runs every interval
        assert (await http.post("/v1/chat/completions", json=image_chat(9, "3"))).status_code == 200
        assert len(home.requests) == 2


async def test_a_hung_replica_fails_its_own_probe_without_taking_the_set_down() -> None:
    fakes = new_fakes()
    async with replicas(fakes) as (http, runtime):
        assert (await http.post("/v1/chat/completions", json=image_chat(6))).status_code == 200
        [home] = [f for f in fakes if f.requests]
        home.hung = True
        interval = runtime.settings.upstream.ready_check_interval_s
        await runtime.readiness.probe(interval)  # bounded by the interval, as the watch runs it
        assert runtime.readiness.ready == {(runtime.replica_sets[0].url, "ensemble"): True}
        response = await http.post("/v1/chat/completions", json=image_chat(6, "again"))
        assert response.status_code == 200 and len(home.requests) == 1


async def test_every_replica_down_is_a_clean_503() -> None:
    fakes = new_fakes(2)
    async with replicas(fakes) as (http, _):
        for fake in fakes:
            fake.down = True
        response = await http.post("/v1/chat/completions", json=image_chat(2))
        assert response.status_code == 503
        assert response.json()["error"]["code"] == "upstream_unavailable"


@pytest.mark.parametrize("stream", [False, True])
async def test_nothing_already_streamed_is_retried(stream: bool) -> None:
    fakes = new_fakes()
    for fake in fakes:
        fake.script.unavailable_after = 2  # every server dies after two tokens
    async with replicas(fakes) as (http, _):
        response = await http.post("/v1/chat/completions", json=image_chat(3, stream=stream))
    if stream:  # the client has the first tokens: the stream ends with the error
        assert sum(len(f.requests) for f in fakes) == 1
        payloads = sse_payloads(response.text)
        assert payloads[-2]["error"]["code"] == "upstream_unavailable"
    else:  # generated once more elsewhere, which died too: a clean 503, not a third try
        assert sum(len(f.requests) for f in fakes) == 2
        assert response.status_code == 503


async def test_a_non_streamed_answer_cut_by_a_dying_replica_is_generated_elsewhere() -> None:
    fakes = new_fakes()
    async with replicas(fakes) as (http, _):
        assert (await http.post("/v1/chat/completions", json=image_chat(4))).status_code == 200
        [home] = [f for f in fakes if f.requests]
        home.script.unavailable_after = 2  # the image's replica dies two tokens into the next
        response = await http.post("/v1/chat/completions", json=image_chat(4, "again"))
    assert response.status_code == 200, response.text
    assert response.json()["choices"][0]["message"]["content"] == "".join(home.script.tokens)
    assert len(home.requests) == 2
    assert sum(len(f.requests) for f in fakes if f is not home) == 1


async def test_a_hot_image_stays_within_the_spill_bound() -> None:
    """30 concurrent requests for one image over 3 replicas: its replica takes at most the
    bound (1.5 x the mean load, at least 8), the rest spill to the image's next choices."""
    fakes = new_fakes()
    for fake in fakes:
        fake.script.delay_s = 0.2  # 1.4 s a request: the 30 overlap
    async with replicas(fakes) as (http, _):
        bodies = [image_chat(4, f"question {i}") for i in range(30)]
        responses = await asyncio.gather(
            *(http.post("/v1/chat/completions", json=b) for b in bodies)
        )
    assert all(r.status_code == 200 for r in responses)
    bound = choice.spill_bound(29, 3, 1.5, 8)  # the defaults: ratio 1.5, floor 8
    peaks = sorted(f.peak for f in fakes)
    print(f"hot image: peak in flight per replica {peaks}, bound {bound}")
    assert peaks[-1] <= bound
    [extra_id] = served_by(fakes)
    home = choice.rendezvous(extra_id, sorted(URLS))[0]
    counts = {f.url: len(f.requests) for f in fakes}
    assert counts[home] == max(counts.values())  # affinity where the bound allows


async def test_without_the_bound_the_hot_image_drowns_one_replica() -> None:
    fakes = new_fakes()
    for fake in fakes:
        fake.script.delay_s = 0.2  # 1.4 s a request: the 30 overlap
    async with replicas(fakes, spill_floor=1000) as (http, _):
        bodies = [image_chat(4, f"question {i}") for i in range(30)]
        await asyncio.gather(*(http.post("/v1/chat/completions", json=b) for b in bodies))
    assert sorted(len(f.requests) for f in fakes) == [0, 0, 30]
    assert max(f.peak for f in fakes) > choice.spill_bound(29, 3, 1.5, 8)


async def test_a_replica_whose_config_disagrees_is_refused_and_never_routed_to(
    caplog: pytest.LogCaptureFixture,
) -> None:
    older = [json.loads(json.dumps(c)) for c in default_configs()]
    ensemble = next(c for c in older if c["name"] == "ensemble")
    ensemble["input"] = [i for i in ensemble["input"] if i["name"] != "prompt_table_extra_id"]
    fakes = [FakeTriton(url=URLS[0]), FakeTriton(url=URLS[1]), FakeTriton(older, URLS[2])]
    caplog.set_level(logging.ERROR, logger="gateway.triton.replicas.replica_set")
    async with replicas(fakes) as (http, runtime):
        for seed in range(12):
            assert (
                await http.post("/v1/chat/completions", json=image_chat(seed))
            ).status_code == 200
        metrics = samples(runtime.metrics)
    assert not fakes[2].requests and fakes[0].requests and fakes[1].requests
    assert metrics[("mmgw_replica_healthy", (("replica", URLS[2]),))] == 0
    [refusal] = [r.getMessage() for r in caplog.records]
    assert URLS[2] in refusal and "inputs differ: prompt_table_extra_id" in refusal


async def test_a_replica_back_with_another_config_is_judged_again_and_refused() -> None:
    fakes = new_fakes(2)
    async with replicas(fakes) as (http, runtime):
        assert (await http.post("/v1/chat/completions", json=image_chat(1))).status_code == 200
        fakes[1].down = True
        await runtime.readiness.probe(1.0)
        ensemble = json.loads(json.dumps(fakes[1].configs["ensemble"]))
        ensemble["max_batch_size"] = 1  # restarted with another engine
        fakes[1].configs["ensemble"] = ensemble
        fakes[1].down = False
        await runtime.readiness.probe(1.0)
        before = [len(f.requests) for f in fakes]
        for seed in range(8):
            assert (
                await http.post("/v1/chat/completions", json=image_chat(seed))
            ).status_code == 200
    assert [len(f.requests) for f in fakes] == [before[0] + 8, before[1]]


async def test_cached_tokens_are_counted_per_replica() -> None:
    fakes = new_fakes(2)
    for fake in fakes:
        fake.script.kv_cache_reused_blocks = 3  # the fake's config says 16 tokens per block
    async with replicas(fakes) as (http, runtime):
        for seed in range(4):
            assert (
                await http.post("/v1/chat/completions", json=image_chat(seed))
            ).status_code == 200
        metrics = samples(runtime.metrics)
        [replica_set] = runtime.replica_sets
        assert isinstance(replica_set, ReplicaSet)
    for fake in fakes:
        key = ("mmgw_replica_cached_tokens_total", (("model", "fake-llava"), ("replica", fake.url)))
        assert metrics.get(key, 0) == 48 * len(fake.requests)


@pytest.mark.parametrize("stream", [False, True])
async def test_a_call_waiting_on_a_replica_that_hangs_is_sent_to_another(stream: bool) -> None:
    """Issue 22 item 7: a call waiting for its first token on a replica that then fails its
    probe (hung) is ended at once and, nothing having been sent, goes to the next replica."""
    fakes = new_fakes()
    async with replicas(fakes) as (http, runtime):
        assert (await http.post("/v1/chat/completions", json=image_chat(6))).status_code == 200
        [home] = [f for f in fakes if f.requests]
        home.script.hang_after = 0  # it takes the call and never answers
        call = asyncio.create_task(
            http.post("/v1/chat/completions", json=image_chat(6, "again", stream=stream))
        )
        while len(home.requests) < 2:
            await asyncio.sleep(0.01)
        home.hung = True
        started = asyncio.get_running_loop().time()
        await runtime.readiness.probe(1.0)  # the replica's own probe (0.8 s) fails
        response = await asyncio.wait_for(call, 5)
        assert asyncio.get_running_loop().time() - started < 3
        assert response.status_code == 200, response.text
        assert sum(len(f.requests) for f in fakes if f is not home) == 1


async def test_a_stream_on_a_replica_that_hangs_ends_with_an_error_event() -> None:
    fakes = new_fakes()
    async with replicas(fakes) as (http, runtime):
        assert (await http.post("/v1/chat/completions", json=image_chat(7))).status_code == 200
        [home] = [f for f in fakes if f.requests]
        home.script.hang_after = 2  # two tokens reach the client, then silence
        call = asyncio.create_task(
            http.post("/v1/chat/completions", json=image_chat(7, "again", stream=True))
        )
        while len(home.requests) < 2:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.1)
        home.hung = True
        await runtime.readiness.probe(1.0)
        response = await asyncio.wait_for(call, 5)
        payloads = sse_payloads(response.text)
        assert payloads[-2]["error"]["code"] == "upstream_unavailable" and payloads[-1] == "[DONE]"
        assert sum(len(f.requests) for f in fakes if f is not home) == 0  # not generated twice
