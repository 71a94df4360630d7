"""One Realtime transcription session: client events in, server events out.

The socket is the route's (``routes/realtime.py``); this is the state behind it. Appended
audio is converted to 16 kHz as it arrives (``media/pcm.py``), buffered (``buffer.py``) and,
with server VAD, listened to (``media/vad.py``): a detected stop commits the utterance, as
``input_audio_buffer.commit`` does by hand. Each committed utterance goes through the same
pipeline as an uploaded file (``pipeline/transcribe.prepare_samples`` -> ``relay``: Whisper's
quiet-point windows, concurrent windows, streamed text), one utterance at a time in commit
order, on a worker task of the session's own; its text goes out as ``delta`` events and ends
with ``completed`` (or ``failed``). Events go to the ``Outbox``, never straight to the socket.

Closing the session cancels the worker, which closes the relay and so cancels its Triton
requests. ``finish`` (a graceful stop) takes no more audio, lets the utterances already
committed finish, then closes with 1012.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import json
import logging
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
from pydantic import TypeAdapter, ValidationError

from gateway.config import RealtimeSettings
from gateway.errors import ClientError, GatewayError, InvalidRequest, UpstreamUnavailable
from gateway.families.calls import Outcome
from gateway.media.pcm import PcmStream
from gateway.media.vad import (
    FRAME_SAMPLES,
    POOL,
    SpeechStarted,
    TurnDetector,
    VadUnavailable,
    load_detector,
    vad_available,
)
from gateway.observability.realtime_metrics import RealtimeMetrics
from gateway.pipeline.realtime import speech
from gateway.pipeline.realtime.buffer import SAMPLE_RATE, AudioBuffer, to_ms
from gateway.pipeline.realtime.config import SessionConfig
from gateway.pipeline.realtime.outbox import SERVICE_RESTART, Outbox
from gateway.protocol.invalid import invalid_request
from gateway.protocol.realtime import (
    CLIENT_EVENT_TYPES,
    CONVERSATION_EVENT_TYPES,
    AppendAudio,
    ClearAudio,
    ClientEvent,
    CommitAudio,
    SessionUpdate,
    event_type_of,
)
from gateway.served import Models
from gateway.streaming import realtime as events

log = logging.getLogger(__name__)
_EVENTS: TypeAdapter[Any] = TypeAdapter(ClientEvent)
MIN_COMMIT_MS = 100  # OpenAI refuses a commit of less (input_audio_buffer_commit_empty)


@dataclass(frozen=True)
class Utterance:
    item_id: str
    samples: np.ndarray[Any, Any]  # int16, 16 kHz
    speech_end: float  # perf_counter when the speech ended (the commit, or the VAD's stop)


class RealtimeSession:
    def __init__(
        self,
        models: Models,
        limits: RealtimeSettings,
        metrics: RealtimeMetrics,
        config: SessionConfig,
        outbox: Outbox,
    ) -> None:
        self.models = models  # where each utterance's model is looked up (and checked)
        self.limits = limits
        self.metrics = metrics
        self.id = events.new_id("sess")
        self.config = config
        self.outbox = outbox
        self.stream = PcmStream(config.format)
        self.buffer = AudioBuffer(int(self.limits.max_buffer_s * SAMPLE_RATE))
        self.turns: TurnDetector | None = None
        self.speech_item: str | None = None  # announced by speech_started, not yet committed
        self.last_item: str | None = None
        self.pending: asyncio.Queue[Utterance] = asyncio.Queue()
        self.draining = False
        self._worker: asyncio.Task[None] | None = None
        self._unfinished = 0  # utterances committed and not yet completed or failed
        self.opened = time.perf_counter()
        self.audio_samples = 0  # received, at 16 kHz
        self.utterances = 0  # committed

    # -- life -------------------------------------------------------------------------------

    def start(self) -> None:
        """``session.created``, then the worker that transcribes committed utterances."""
        self.outbox.put(events.session_created(self.config.wire(self.id)))
        self._worker = asyncio.create_task(self._work(), name=f"realtime-{self.id}")

    @property
    def busy(self) -> bool:
        """An utterance is waiting or being transcribed."""
        return self._unfinished > 0

    async def aclose(self) -> None:
        """The client is gone: cancel the utterance in flight (and its Triton requests), and
        give the detector back to the pool."""
        if self._worker is not None and not self._worker.done():
            self._worker.cancel()
            await asyncio.gather(self._worker, return_exceptions=True)
        self._drop_detector()

    def log_fields(self) -> dict[str, Any]:
        """What the access log says of a session when it ends."""
        closing = self.outbox.closing
        return {
            "session": self.id,
            "model": self.config.model,
            "duration_ms": round((time.perf_counter() - self.opened) * 1000, 1),
            "audio_s": round(self.audio_samples / SAMPLE_RATE, 3),
            "utterances": self.utterances,
            "close_code": closing.code if closing is not None else None,
            "close_reason": closing.reason if closing is not None else "client closed",
        }

    def _drop_detector(self) -> None:
        if self.turns is not None:
            POOL.give_back(self.turns.detector)
            self.turns = None

    async def finish(self) -> None:
        """Graceful stop: no more audio; speech the detector is still hearing is committed as
        it stands; the committed utterances end; then close 1012."""
        self.draining = True
        turns = self.turns
        if turns is not None and turns.speaking and self.speech_item is not None:
            item, end = self.speech_item, self.buffer.end
            self.outbox.put(events.speech_stopped(item, to_ms(end)))
            self.speech_item = None
            with contextlib.suppress(ClientError):  # too many waiting already: nothing to add
                self._commit(item, self.buffer.take())
        await self.pending.join()
        self.outbox.close(SERVICE_RESTART, "server shutting down")

    # -- client events ----------------------------------------------------------------------

    async def handle(self, message: str | bytes) -> None:
        """One client event; a bad one is answered with an ``error`` event, nothing more."""
        event_id: str | None = None
        try:
            payload = json.loads(message)
            if isinstance(payload, dict) and isinstance(payload.get("event_id"), str):
                event_id = payload["event_id"]
            await self._dispatch(_parse(payload))
        except ClientError as exc:
            self.outbox.put(events.error(exc, event_id))
        except (ValueError, RecursionError):
            error = InvalidRequest("the event is not valid JSON", code="invalid_json")
            self.outbox.put(events.error(error, event_id))

    async def _dispatch(self, event: Any) -> None:
        if isinstance(event, SessionUpdate):
            await self._update(event)
        elif self.draining:
            raise UpstreamUnavailable(
                "the server is shutting down: no more audio is taken", code="server_shutting_down"
            )
        elif isinstance(event, AppendAudio):
            self._append(event.audio)
        elif isinstance(event, CommitAudio):
            self._commit_by_hand()
        elif isinstance(event, ClearAudio):
            self._clear()

    async def _update(self, event: SessionUpdate) -> None:
        config = self.config.updated(event.session)
        await speech.check(self.models, config)  # refuses before anything changes
        if config.turn_detection is not None and not vad_available():
            raise VadUnavailable(
                "server_vad needs the voice-activity detector, which is not installed: "
                "install multimodal-gateway[vad], or set turn_detection to null",
                param="session.audio.input.turn_detection",
            )
        if config.format != self.config.format:
            self.stream = PcmStream(config.format)
        listening = config.turn_detection != self.config.turn_detection
        self.config = config
        if listening:
            self._listen()
        self.outbox.put(events.session_updated(config.wire(self.id)))

    def _listen(self) -> None:
        """Follow a change of turn detection: off, or the detector (kept, if there is one)
        restarted with the new settings. A session makes its detector on its first audio."""
        if self.config.turn_detection is None or self.turns is None:
            self._drop_detector()
            return
        self.turns = TurnDetector(self.config.turn_detection, self.turns.detector)
        self.turns.reset(position=self.buffer.end)
        self.speech_item = None

    def _detector(self) -> TurnDetector | None:
        """The session's turn detector, made on first use (about 2.5 MB: not for sessions
        that never send audio, nor for those with turn detection off)."""
        if self.turns is None and self.config.turn_detection is not None:
            self.turns = TurnDetector(self.config.turn_detection, load_detector())
            self.turns.reset(position=self.buffer.end)
        return self.turns

    def _append(self, audio: str) -> None:
        data = _decode_base64(audio)
        if len(data) > self.limits.max_append_bytes:
            raise InvalidRequest(
                f"one append carries at most {self.limits.max_append_bytes} bytes of audio",
                param="audio",
                code="audio_too_large",
            )
        samples = self.stream.feed(data)
        if not self.buffer.room_for(samples.size):
            raise InvalidRequest(
                f"the input audio buffer holds at most {self.limits.max_buffer_s:g} s: commit "
                "or clear it (this audio was not added)",
                param="audio",
                code="input_audio_buffer_full",
            )
        turns = self._detector()
        self.buffer.append(samples)
        self.audio_samples += int(samples.size)
        self.metrics.audio_seconds.labels(self.config.model or "").inc(samples.size / SAMPLE_RATE)
        if turns is None:
            return
        for turn in turns.feed(samples):
            if isinstance(turn, SpeechStarted):
                self.buffer.drop_before(turn.sample)
                self.speech_item = events.new_id("item")
                self.outbox.put(events.speech_started(self.speech_item, to_ms(turn.sample)))
            else:
                item = self.speech_item or events.new_id("item")
                self.outbox.put(events.speech_stopped(item, to_ms(turn.sample)))
                self.speech_item = None
                self._commit(item, self.buffer.take(turn.sample))
        if not turns.speaking:  # silence: keep only what a speech start could reach back to
            padding = turns.config.prefix_padding_ms * SAMPLE_RATE // 1000
            self.buffer.keep_last(padding + 2 * FRAME_SAMPLES)

    def _commit_by_hand(self) -> None:
        if self.buffer.size < MIN_COMMIT_MS * SAMPLE_RATE // 1000:
            raise InvalidRequest(
                f"the input audio buffer holds {to_ms(self.buffer.size)} ms of audio: a commit "
                f"needs at least {MIN_COMMIT_MS} ms",
                code="input_audio_buffer_commit_empty",
            )
        item = self.speech_item or events.new_id("item")
        self.speech_item = None
        self._commit(item, self.buffer.take())
        if self.turns is not None:
            self.turns.reset(position=self.buffer.end)

    def _commit(self, item: str, samples: np.ndarray[Any, Any]) -> None:
        if self.pending.qsize() >= self.limits.max_pending_utterances:
            raise InvalidRequest(
                f"{self.pending.qsize()} utterances are already waiting for their transcript; "
                "this one was dropped",
                code="too_many_pending_utterances",
            )
        self.outbox.put(events.committed(item, self.last_item))
        self.last_item = item
        self._unfinished += 1
        self.utterances += 1
        self.pending.put_nowait(Utterance(item, samples, time.perf_counter()))

    def _clear(self) -> None:
        self.buffer.clear()
        self.stream.reset()
        self.speech_item = None
        if self.turns is not None:
            self.turns.reset(position=self.buffer.end)
        self.outbox.put(events.cleared())

    # -- transcription ----------------------------------------------------------------------

    async def _work(self) -> None:
        while True:
            utterance = await self.pending.get()
            try:
                await self._transcribe(utterance)
            finally:
                self._unfinished -= 1
                self.pending.task_done()

    async def _transcribe(self, utterance: Utterance) -> None:
        model = self.config.model or ""
        counted = self.metrics
        outcome = "cancelled"
        try:
            text = await self._relay(utterance)
            seconds = utterance.samples.size / SAMPLE_RATE
            self.outbox.put(events.transcription_completed(utterance.item_id, text, seconds))
            counted.speech_end_to_completed.labels(model).observe(
                time.perf_counter() - utterance.speech_end
            )
            outcome = "completed"
        except GatewayError as exc:
            outcome = "failed"
            self.outbox.put(events.transcription_failed(utterance.item_id, exc))
        except Exception:  # a bug must not stop the session's later utterances
            log.exception("realtime transcription failed")
            outcome = "failed"
            error = GatewayError("internal error while transcribing")
            self.outbox.put(events.transcription_failed(utterance.item_id, error))
        finally:
            counted.utterances.labels(model, outcome).inc()

    async def _relay(self, utterance: Utterance) -> str:
        """The utterance's text, sent as deltas while Triton writes it."""
        parts: list[str] = []
        request_id = f"{self.id}-{utterance.item_id}"
        async for piece in speech.transcribe(self.models, self.config, utterance.samples,
                                             request_id):  # fmt: skip
            if isinstance(piece, Outcome):
                whole = piece.transcript.text if piece.transcript is not None else ""
                if not parts and whole.strip():
                    parts.append(whole.strip())
                    self.outbox.put(events.transcription_delta(utterance.item_id, parts[0]))
                continue
            delta = piece if parts else piece.lstrip()  # Whisper starts with a space
            if delta:
                parts.append(delta)
                self.outbox.put(events.transcription_delta(utterance.item_id, delta))
        return "".join(parts)


def _parse(payload: Any) -> Any:
    kind = event_type_of(payload)
    if kind is None:
        raise InvalidRequest("a client event is a JSON object with a 'type'", param="type",
                             code="invalid_event")  # fmt: skip
    if kind in CONVERSATION_EVENT_TYPES:
        raise InvalidRequest(
            f"'{kind}' belongs to speech-to-speech sessions; this endpoint serves "
            "transcription sessions",
            param="type",
            code="unsupported_event",
        )
    if kind not in CLIENT_EVENT_TYPES:
        raise InvalidRequest(f"unknown event type '{kind}'", param="type",
                             code="invalid_event_type")  # fmt: skip
    try:
        return _EVENTS.validate_python(payload)
    except ValidationError as exc:  # its first step is the event type, a union's tag
        error = invalid_request(exc, tags=frozenset({kind}), code="invalid_value")
        raise error.located(None, item=kind) from None


def _decode_base64(audio: str) -> bytes:
    try:
        return base64.b64decode(audio, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidRequest("audio is not valid base64", param="audio",
                             code="invalid_base64") from None  # fmt: skip
