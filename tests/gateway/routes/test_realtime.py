"""/v1/realtime against the fake Whisper, through the official SDK's realtime client and raw
WebSockets, on a real uvicorn with the gateway's own HTTP protocol (WebSockets cannot go
through an ASGI transport). The fake's transcript is fixed; what is checked is the protocol:
events, their order and fields, refusals, bounds and cancellation."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import httpx
import numpy as np
import pytest
import uvicorn
import websockets
from openai import AsyncOpenAI
from websockets.asyncio.client import ClientConnection, connect

from gateway.config import ServerSettings
from gateway.drain import draining_server
from gateway.media.vad import POOL
from gateway.triton.embedded import free_loopback_port
from tests.audio_samples import pcm24k, speech_like, spoken
from tests.fakes.app import FakeGateway, start_gateway
from tests.fakes.triton import FakeTriton
from tests.live_gateway import serving_app

KEY = "sk-realtime-tests"
SPOKEN = " The quick brown fox."
CHUNK = 4800  # 100 ms of 24 kHz PCM16

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
async def realtime_gateway(session_fake: FakeTriton) -> AsyncIterator[tuple[FakeGateway, str]]:
    gateway = await start_gateway(
        session_fake,
        api_keys=(KEY,),
        realtime={"max_buffer_s": 5, "max_sessions_per_key": 3, "idle_timeout_s": 1.5},
    )
    async with serving_app(gateway.app, ServerSettings()) as url:
        yield gateway, url
    await gateway.aclose()


@pytest.fixture
def url(realtime_gateway: tuple[FakeGateway, str], fake: FakeTriton) -> str:
    fake.script.transcript = SPOKEN
    return realtime_gateway[1]


def sdk(url: str, key: str = KEY) -> AsyncOpenAI:
    return AsyncOpenAI(base_url=f"{url}/v1", api_key=key, max_retries=0)


def ws_url(url: str, query: str = "intent=transcription") -> str:
    return url.replace("http://", "ws://") + "/v1/realtime?" + query


def raw(url: str, query: str = "model=fake-whisper") -> Any:
    return connect(ws_url(url, query), additional_headers={"Authorization": f"Bearer {KEY}"})


async def next_event(ws: ClientConnection, timeout: float = 10) -> dict[str, Any]:
    return json.loads(await asyncio.wait_for(ws.recv(), timeout))


async def until(ws: ClientConnection, kind: str) -> list[dict[str, Any]]:
    """Every event up to and including the first of type ``kind``."""
    seen = []
    while True:
        seen.append(await next_event(ws))
        if seen[-1]["type"] == kind:
            return seen


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


MANUAL = {"type": "transcription", "audio": {"input": {"turn_detection": None}}}


async def test_sdk_manual_commit_gets_committed_deltas_and_a_completed_transcript(
    url: str, fake: FakeTriton
) -> None:
    audio = pcm24k(speech_like(1.2, seed=4))
    async with sdk(url).realtime.connect(model="fake-whisper") as conn:
        created = await conn.recv()
        assert created.type == "session.created"
        assert created.session.type == "transcription"
        await conn.session.update(session=MANUAL)  # type: ignore[arg-type]
        updated = await conn.recv()
        assert updated.type == "session.updated"
        assert updated.session.audio.input.turn_detection is None  # type: ignore[union-attr]
        for start in range(0, len(audio), CHUNK * 2):
            await conn.input_audio_buffer.append(audio=b64(audio[start : start + CHUNK * 2]))
        await conn.input_audio_buffer.commit()
        committed = await conn.recv()
        assert committed.type == "input_audio_buffer.committed"
        deltas: list[str] = []
        while (event := await conn.recv()).type.endswith(".delta"):
            assert event.item_id == committed.item_id  # type: ignore[union-attr]
            deltas.append(event.delta or "")  # type: ignore[union-attr]
        assert event.type == "conversation.item.input_audio_transcription.completed"
        assert event.item_id == committed.item_id
        assert len(deltas) > 1 and event.transcript == "".join(deltas) == SPOKEN.strip()
        assert event.usage.type == "duration"
        assert event.usage.seconds == pytest.approx(1.2, abs=0.01)  # type: ignore[union-attr]
    windows = [r for r in fake.requests if r.request_id.endswith("-w0")]
    assert len(windows) == 1 and committed.item_id in windows[0].request_id


async def test_server_vad_finds_the_turn_without_a_commit(url: str) -> None:
    silence = np.zeros(16_000, np.float32)
    audio = pcm24k(np.concatenate([silence, spoken(), silence, silence]))
    async with raw(url) as ws:
        created = await next_event(ws)
        vad = created["session"]["audio"]["input"]["turn_detection"]
        assert vad == {"type": "server_vad", "threshold": 0.5, "prefix_padding_ms": 300,
                       "silence_duration_ms": 500}  # fmt: skip
        for start in range(0, len(audio), CHUNK * 2):
            chunk = audio[start : start + CHUNK * 2]
            await ws.send(json.dumps({"type": "input_audio_buffer.append", "audio": b64(chunk)}))
        seen = await until(ws, "conversation.item.input_audio_transcription.completed")
    kinds = [e["type"] for e in seen]
    assert kinds[:3] == [
        "input_audio_buffer.speech_started",
        "input_audio_buffer.speech_stopped",
        "input_audio_buffer.committed",
    ]
    started, stopped, committed, completed = seen[0], seen[1], seen[2], seen[-1]
    assert started["item_id"] == stopped["item_id"] == committed["item_id"] == completed["item_id"]
    assert 500 <= started["audio_start_ms"] <= 1000  # speech at 1 s, 300 ms of padding before
    assert 4000 <= stopped["audio_end_ms"] <= 4800  # speech ends at 4.06 s, then 500 ms quiet
    spoken_s = (stopped["audio_end_ms"] - started["audio_start_ms"]) / 1000
    assert completed["usage"]["seconds"] == pytest.approx(spoken_s, abs=0.05)
    assert completed["transcript"] == SPOKEN.strip()


async def test_malformed_events_get_error_events_and_the_socket_stays_usable(url: str) -> None:
    too_much = b64(bytes(24_000 * 2 * 6))  # 6 s of PCM; the buffer holds 5
    bad = [
        ("{not json", "invalid_json", None),
        (json.dumps({"type": "no.such.event", "event_id": "e1"}), "invalid_event_type", "e1"),
        (json.dumps({"type": "response.create", "event_id": "e2"}), "unsupported_event", "e2"),
        (json.dumps({"type": "input_audio_buffer.append", "audio": "%%%"}), "invalid_base64",
         None),
        (json.dumps({"type": "input_audio_buffer.append", "audio": too_much, "event_id": "e3"}),
         "input_audio_buffer_full", "e3"),
        (json.dumps({"type": "input_audio_buffer.commit", "event_id": "e4"}),
         "input_audio_buffer_commit_empty", "e4"),
        (json.dumps({"type": "input_audio_buffer.append"}), "invalid_value", None),
    ]  # fmt: skip
    async with raw(url) as ws:
        await next_event(ws)
        await ws.send(json.dumps({"type": "session.update", "session": MANUAL}))
        await until(ws, "session.updated")
        for message, code, event_id in bad:
            await ws.send(message)
            error = await next_event(ws)
            assert error["type"] == "error", message
            assert error["error"]["code"] == code
            assert error["error"]["type"] == "invalid_request_error"
            assert error["error"]["event_id"] == event_id
            assert error["error"]["message"]
        audio = pcm24k(speech_like(0.5, seed=1))
        await ws.send(json.dumps({"type": "input_audio_buffer.append", "audio": b64(audio)}))
        await ws.send(json.dumps({"type": "input_audio_buffer.commit"}))
        seen = await until(ws, "conversation.item.input_audio_transcription.completed")
        assert seen[0]["type"] == "input_audio_buffer.committed"


@pytest.mark.parametrize(
    ("update", "param"),
    [
        ({"audio": {"input": {"noise_reduction": {"type": "near_field"}}}},
         "session.audio.input.noise_reduction"),
        ({"audio": {"input": {"turn_detection": {"type": "semantic_vad"}}}},
         "session.audio.input.turn_detection.type"),
        ({"audio": {"input": {"transcription": {"model": "fake-whisper", "language": "xx"}}}},
         "session.audio.input.transcription.language"),
        ({"include": ["item.input_audio_transcription.logprobs"]}, "session.include"),
        ({"audio": {"input": {"format": {"type": "audio/pcm", "rate": 16000}}}}, None),
    ],
)  # fmt: skip
async def test_session_updates_it_cannot_honour_are_refused_by_name(
    url: str, update: dict[str, Any], param: str | None
) -> None:
    async with raw(url) as ws:
        created = await next_event(ws)
        session = {"type": "transcription", **update}
        await ws.send(json.dumps({"type": "session.update", "session": session}))
        error = await next_event(ws)
        assert error["type"] == "error"
        if param is not None:
            assert error["error"]["param"] == param
        await ws.send(json.dumps({"type": "session.update", "session": {"type": "transcription"}}))
        updated = await next_event(ws)  # the refused update changed nothing
        assert updated["session"]["audio"] == created["session"]["audio"]


async def test_g711_audio_is_taken(url: str) -> None:
    audio_input = {"format": {"type": "audio/pcmu"}, "turn_detection": None}
    update = {"type": "transcription", "audio": {"input": audio_input}}
    async with raw(url) as ws:
        await next_event(ws)
        await ws.send(json.dumps({"type": "session.update", "session": update}))
        updated = await next_event(ws)
        assert updated["session"]["audio"]["input"]["format"] == {"type": "audio/pcmu"}
        await ws.send(json.dumps({"type": "input_audio_buffer.append", "audio": b64(bytes(8000))}))
        await ws.send(json.dumps({"type": "input_audio_buffer.commit"}))
        seen = await until(ws, "conversation.item.input_audio_transcription.completed")
        assert seen[-1]["usage"]["seconds"] == pytest.approx(1.0, abs=0.01)


async def test_clear_empties_the_buffer(url: str) -> None:
    async with raw(url) as ws:
        await next_event(ws)
        await ws.send(json.dumps({"type": "session.update", "session": MANUAL}))
        await next_event(ws)
        await ws.send(json.dumps({"type": "input_audio_buffer.append", "audio": b64(bytes(9600))}))
        await ws.send(json.dumps({"type": "input_audio_buffer.clear"}))
        assert (await next_event(ws))["type"] == "input_audio_buffer.cleared"
        await ws.send(json.dumps({"type": "input_audio_buffer.commit"}))
        assert (await next_event(ws))["error"]["code"] == "input_audio_buffer_commit_empty"


async def test_an_unknown_model_or_a_bad_key_is_refused_at_connect(url: str) -> None:
    with pytest.raises(websockets.InvalidStatus) as unknown:
        async with sdk(url).realtime.connect(model="gpt-realtime"):
            pass
    assert unknown.value.response.status_code == 404
    assert json.loads(unknown.value.response.body)["error"]["code"] == "model_not_found"
    with pytest.raises(websockets.InvalidStatus) as not_speech:
        async with raw(url, "model=fake-llava"):
            pass
    assert not_speech.value.response.status_code == 400
    with pytest.raises(websockets.InvalidStatus) as bad_key:
        async with sdk(url, key="sk-wrong").realtime.connect(model="fake-whisper"):
            pass
    assert bad_key.value.response.status_code == 401


async def test_the_browser_subprotocol_carries_the_key(url: str) -> None:
    protocols = ["realtime", f"openai-insecure-api-key.{KEY}"]
    async with connect(ws_url(url), subprotocols=protocols) as ws:  # type: ignore[arg-type]
        assert ws.subprotocol == "realtime"
        assert (await next_event(ws))["type"] == "session.created"


async def test_sessions_past_the_per_key_cap_get_429(url: str) -> None:
    async with raw(url) as a, raw(url) as b, raw(url) as c:
        for ws in (a, b, c):
            await next_event(ws)
        with pytest.raises(websockets.InvalidStatus) as refused:
            async with raw(url):
                pass
        assert refused.value.response.status_code == 429
    async with raw(url) as again:  # the places are given back on close
        assert (await next_event(again))["type"] == "session.created"


async def test_closing_mid_utterance_cancels_the_triton_request_within_a_second(
    url: str, fake: FakeTriton
) -> None:
    fake.script.hang_after = 2
    async with raw(url, "model=fake-whisper") as ws:
        created = await next_event(ws)
        session_id = created["session"]["id"]
        await ws.send(json.dumps({"type": "session.update", "session": MANUAL}))
        await next_event(ws)
        await ws.send(json.dumps({"type": "input_audio_buffer.append", "audio": b64(bytes(9600))}))
        await ws.send(json.dumps({"type": "input_audio_buffer.commit"}))
        committed = await until(ws, "input_audio_buffer.committed")
        request_id = f"{session_id}-{committed[-1]['item_id']}-w0"
        await fake.wait_started(request_id)
    assert await fake.wait_cancelled(request_id, timeout=1.0)


async def test_an_idle_session_is_closed_normally_and_logged(
    url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="gateway.access")
    async with raw(url) as ws:
        created = await next_event(ws)
        with pytest.raises(websockets.ConnectionClosed):
            await asyncio.wait_for(ws.recv(), 10)
    assert ws.close_code == 1000 and "idle" in (ws.close_reason or "")
    await asyncio.sleep(0.2)
    lines = [r for r in caplog.records if r.getMessage() == "realtime session"]
    fields = next(r.fields for r in lines if r.fields["session"] == created["session"]["id"])
    assert fields["close_code"] == 1000 and fields["utterances"] == 0 and fields["audio_s"] == 0


async def test_the_sdk_reports_refusals_as_openai_errors(url: str) -> None:
    async with sdk(url).realtime.connect(model="fake-whisper") as conn:
        await conn.recv()
        await conn.input_audio_buffer.commit(event_id="c1")
        event = await conn.recv()
        assert event.type == "error"
        assert event.error.code == "input_audio_buffer_commit_empty"  # type: ignore[union-attr]
        assert event.error.event_id == "c1"  # type: ignore[union-attr]


async def test_sigterm_finishes_the_utterance_in_flight_then_closes_with_1012(
    fake: FakeTriton,
) -> None:
    gateway = await start_gateway(fake)
    port = free_loopback_port()
    config = uvicorn.Config(gateway.app, host="127.0.0.1", port=port, log_level="warning")
    server = draining_server(config, gateway.app.state.drain, grace_s=10.0)
    serve = asyncio.create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.02)
    fake.script.transcript = SPOKEN
    fake.script.delay_s = 0.1  # tokens arrive while the server is told to stop
    url = f"ws://127.0.0.1:{port}/v1/realtime?model=fake-whisper&intent=transcription"
    try:
        async with connect(url) as ws:
            await next_event(ws)
            await ws.send(json.dumps({"type": "session.update", "session": MANUAL}))
            await next_event(ws)
            await ws.send(json.dumps({"type": "input_audio_buffer.append",
                                      "audio": b64(bytes(9600))}))  # fmt: skip
            await ws.send(json.dumps({"type": "input_audio_buffer.commit"}))
            await until(ws, "input_audio_buffer.committed")
            # What handle_exit(SIGTERM) does, without uvicorn re-raising the signal at the end
            gateway.app.state.drain.begin(10.0)
            server.should_exit = True
            kinds = []
            with pytest.raises(websockets.ConnectionClosed):
                while True:
                    kinds.append((await next_event(ws))["type"])
        assert kinds[-1] == "conversation.item.input_audio_transcription.completed"
        assert ws.close_code == 1012
        await asyncio.wait_for(serve, 10)
    finally:
        server.should_exit = True
        await asyncio.gather(serve, return_exceptions=True)
        await gateway.aclose()


async def test_sessions_take_a_detector_on_first_audio_and_give_it_back(url: str) -> None:
    async with raw(url) as ws:  # warm: one detector in the pool
        await next_event(ws)
        await ws.send(json.dumps({"type": "input_audio_buffer.append", "audio": b64(bytes(4800))}))
        await ws.send(json.dumps({"type": "input_audio_buffer.clear"}))
        await until(ws, "input_audio_buffer.cleared")
    await asyncio.sleep(0.2)
    made = POOL.made
    for _ in range(3):
        async with raw(url) as ws:
            await next_event(ws)
            await ws.send(json.dumps({"type": "input_audio_buffer.append",
                                      "audio": b64(bytes(4800))}))  # fmt: skip
            await ws.send(json.dumps({"type": "input_audio_buffer.clear"}))
            await until(ws, "input_audio_buffer.cleared")
        await asyncio.sleep(0.2)
    assert POOL.made == made


async def test_a_client_that_does_not_read_does_not_hold_the_triton_request(
    url: str, fake: FakeTriton
) -> None:
    fake.script.delay_s = 0.02
    async with connect(ws_url(url, "model=fake-whisper"),
                       additional_headers={"Authorization": f"Bearer {KEY}"},
                       max_queue=1) as ws:  # fmt: skip
        created = await next_event(ws)
        session = MANUAL
        await ws.send(json.dumps({"type": "session.update", "session": session}))
        await ws.send(json.dumps({"type": "input_audio_buffer.append", "audio": b64(bytes(9600))}))
        await ws.send(json.dumps({"type": "input_audio_buffer.commit"}))
        prefix = created["session"]["id"]
        for _ in range(200):  # the client reads nothing more; Triton's answer runs to its end
            window = [r for r in fake.requests if r.request_id.startswith(prefix)]
            if window and fake.active == 0:
                break
            await asyncio.sleep(0.05)
        assert window and fake.active == 0
        assert not [c for c in fake.cancelled if c.startswith(prefix)]


async def test_sigterm_commits_speech_the_detector_is_still_hearing(fake: FakeTriton) -> None:
    gateway = await start_gateway(fake)
    port = free_loopback_port()
    config = uvicorn.Config(gateway.app, host="127.0.0.1", port=port, log_level="warning")
    server = draining_server(config, gateway.app.state.drain, grace_s=10.0)
    serve = asyncio.create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.02)
    fake.script.transcript = SPOKEN
    url = f"ws://127.0.0.1:{port}/v1/realtime?model=fake-whisper"
    try:
        async with connect(url) as ws:
            await next_event(ws)
            audio = pcm24k(np.concatenate([np.zeros(8000, np.float32), spoken()[: 2 * 16_000]]))
            await ws.send(json.dumps({"type": "input_audio_buffer.append", "audio": b64(audio)}))
            await until(ws, "input_audio_buffer.speech_started")  # and still speaking
            gateway.app.state.drain.begin(10.0)
            server.should_exit = True
            kinds = []
            with pytest.raises(websockets.ConnectionClosed):
                while True:
                    kinds.append((await next_event(ws))["type"])
        assert kinds[:2] == ["input_audio_buffer.speech_stopped", "input_audio_buffer.committed"]
        assert kinds[-1] == "conversation.item.input_audio_transcription.completed"
        assert ws.close_code == 1012
        await asyncio.wait_for(serve, 10)
    finally:
        server.should_exit = True
        await asyncio.gather(serve, return_exceptions=True)
        await gateway.aclose()


def _metric(text: str, prefix: str) -> float:
    return sum(float(line.split()[-1]) for line in text.splitlines() if line.startswith(prefix))


async def test_sessions_audio_and_speech_end_latency_are_metrics(url: str) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=10) as http:
        before = (await http.get("/metrics")).text
        async with raw(url) as ws:
            await next_event(ws)
            during = (await http.get("/metrics")).text
            await ws.send(json.dumps({"type": "session.update", "session": MANUAL}))
            await ws.send(json.dumps({"type": "input_audio_buffer.append",
                                      "audio": b64(bytes(24_000))}))  # 0.5 s  # fmt: skip
            await ws.send(json.dumps({"type": "input_audio_buffer.commit"}))
            await until(ws, "conversation.item.input_audio_transcription.completed")
        after = (await http.get("/metrics")).text
    open_now = "mmgw_realtime_sessions_open "
    assert _metric(during, open_now) == _metric(before, open_now) + 1
    audio = 'mmgw_realtime_audio_seconds_total{model="fake-whisper"}'
    assert _metric(after, audio) - _metric(before, audio) == pytest.approx(0.5)
    done = 'mmgw_realtime_utterances_total{model="fake-whisper",outcome="completed"}'
    assert _metric(after, done) == _metric(before, done) + 1
    latency = 'mmgw_realtime_speech_end_to_completed_seconds_count{model="fake-whisper"}'
    assert _metric(after, latency) == _metric(before, latency) + 1
    accepted = 'mmgw_realtime_sessions_total{outcome="accepted"}'
    assert _metric(after, accepted) >= _metric(before, accepted) + 1


async def test_intent_transcription_without_a_model_uses_the_served_speech_model(url: str) -> None:
    client = sdk(url)
    async with client.realtime.connect(extra_query={"intent": "transcription"}) as conn:
        created = await conn.recv()
        assert created.type == "session.created"
        transcription = created.session.audio.input.transcription  # type: ignore[union-attr]
        assert transcription.model == "fake-whisper"  # type: ignore[union-attr]
