"""Slow and hostile clients against the real HTTP stack (issue 13, items 1 and 2).

One gateway process over the fake Triton (``tests.chaos.launcher``: uvicorn with the protocol
and options ``mmgw serve`` uses) on a loopback port, with short deadlines so each attack ends in
seconds. Every case asserts what each hostile client saw (status, error code, the server
closing) and when, that honest requests made meanwhile kept getting 200 quickly, and, for the
header bombs, that the server's memory stayed put. Counts and times are bounded: at most 24
sockets per attack, each giving up after ``GIVE_UP_S``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest

from tests.chaos.clients import (
    Honest,
    Launched,
    Outcome,
    RssPeak,
    chat_head,
    flood,
    honest_traffic,
    launch,
    many_headers,
    stream_header,
    trickle,
)

SLOTS = 8  # server.max_in_flight
HEAD_S, BODY_S, IDLE_S = 2.0, 5.0, 2.0  # header_timeout_s, body_timeout_s, body_idle_timeout_s
SERVER = {
    "max_in_flight": SLOTS,
    "header_timeout_s": HEAD_S,
    "body_timeout_s": BODY_S,
    "body_idle_timeout_s": IDLE_S,
}
GIVE_UP_S = 15.0
SLACK_S = 1.5  # a deadline's refusal arrives within this after it (a loaded 2-core machine)
RSS_GROWTH_MB = 40  # header bombs: the old server grew by 100-360 MB


@pytest.fixture(scope="module")
async def gateway() -> AsyncIterator[Launched]:
    async with launch(SERVER) as launched:
        yield launched


def assert_refused(outcome: Outcome, status: int, code: str, within: tuple[float, float]) -> None:
    assert (outcome.status, outcome.code) == (status, code), outcome
    assert outcome.headers.get("connection") == "close", outcome
    assert outcome.closed, outcome  # the server ended the connection after its answer
    low, high = within
    # The server's clock starts at its accept, just before the client's, in whole milliseconds.
    assert low - 0.05 <= outcome.seconds <= high, outcome


def assert_served(honest: Honest) -> None:
    assert honest.statuses and set(honest.statuses) == {200}, honest.statuses
    assert honest.slowest_s < 1.0, honest.slowest_s


async def test_slow_loris_headers_get_408_while_real_requests_go_on(gateway: Launched) -> None:
    """20 sockets sending a header byte every 0.25 s: each is cut at the header deadline."""
    head = b"POST /v1/chat/completions HTTP/1.1\r\nHost: chaos\r\n"
    drip = b"X-Slow: " + b"a" * 200
    async with honest_traffic(gateway.port) as honest:
        outcomes = await asyncio.gather(
            *(trickle(gateway.port, head, drip, 0.25, GIVE_UP_S) for _ in range(20))
        )
    for outcome in outcomes:
        assert_refused(outcome, 408, "request_timeout", (HEAD_S, HEAD_S + SLACK_S))
        assert outcome.sent < len(head) + len(drip)  # cut off mid-header
    assert_served(honest)


async def test_stuck_bodies_beyond_the_cap_hold_no_slot(gateway: Launched) -> None:
    """SLOTS + 16 sockets send their headers and one body byte, then nothing: real requests
    still get 200 (before: 429 until the stuck ones left), the stuck ones 408 at the idle
    deadline."""
    async with honest_traffic(gateway.port) as honest:
        outcomes = await asyncio.gather(
            *(trickle(gateway.port, chat_head(100) + b"{", give_up_s=GIVE_UP_S)
              for _ in range(SLOTS + 16))
        )  # fmt: skip
    for outcome in outcomes:
        assert_refused(outcome, 408, "request_timeout", (IDLE_S, IDLE_S + SLACK_S))
    assert_served(honest)


async def test_a_body_trickled_a_byte_at_a_time_gets_408_at_the_body_deadline(
    gateway: Launched,
) -> None:
    """A byte every half second never trips the idle deadline; the total one ends it."""
    async with honest_traffic(gateway.port) as honest:
        outcome = await trickle(gateway.port, chat_head(1000), b"{" * 1000, 0.5, GIVE_UP_S)
    assert_refused(outcome, 408, "request_timeout", (BODY_S, BODY_S + SLACK_S))
    assert_served(honest)


async def test_ten_thousand_headers_are_a_431_at_once(gateway: Launched) -> None:
    async with RssPeak(gateway) as rss:
        outcome = await flood(gateway.port, many_headers(10_000), give_up_s=GIVE_UP_S)
    assert_refused(outcome, 431, "request_header_fields_too_large", (0.0, 1.0))
    assert rss.peak - rss.before < RSS_GROWTH_MB


async def test_huge_headers_are_a_431_before_they_are_read_and_memory_stays_put(
    gateway: Launched,
) -> None:
    """Four clients each streaming one 64 MiB header (before: 200 after 4-11 s, 128 -> 401 MB,
    other clients stalled for seconds): 431 within a second, after a few MiB at most."""
    async with RssPeak(gateway) as rss, honest_traffic(gateway.port) as honest:
        outcomes = await asyncio.gather(
            *(stream_header(gateway.port, 64 << 20, give_up_s=GIVE_UP_S) for _ in range(4))
        )
    for outcome in outcomes:
        assert_refused(outcome, 431, "request_header_fields_too_large", (0.0, 1.0))
        assert outcome.sent < 8 << 20, outcome.sent
    assert rss.peak - rss.before < RSS_GROWTH_MB, (rss.before, rss.peak)
    assert_served(honest)


async def test_afterwards_the_service_is_normal_and_the_refusals_are_counted(
    gateway: Launched,
) -> None:
    """The refusals count under the endpoint the request line named (item 10 for the app's
    own 408s and 429s is in tests/gateway/routes/test_slow_bodies.py)."""
    await asyncio.gather(
        flood(gateway.port, many_headers(1000)),
        trickle(gateway.port, chat_head(100) + b"{", give_up_s=GIVE_UP_S),
    )
    assert await gateway.chat() == 200
    async with httpx.AsyncClient(base_url=gateway.url, timeout=10, trust_env=False) as http:
        assert (await http.get("/health")).status_code == 200
        metrics = (await http.get("/metrics")).text
    chat = 'endpoint="/v1/chat/completions",model="",status="408"'
    models = 'endpoint="/v1/models",model="",status="431"'
    assert f'mmgw_requests_total{{code="request_timeout",{chat}}}' in metrics
    assert f'mmgw_requests_total{{code="request_header_fields_too_large",{models}}}' in metrics
    assert 'status="429"' not in metrics
