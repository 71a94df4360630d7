"""Speech to text: audio -> windows -> Whisper family -> Triton -> transcript.

``prepare_transcription`` does everything that can fail because of the request (options the
deployment cannot honour, the audio's bytes, its length) before any byte of the response is
sent. ``transcribe`` then runs the windows concurrently (at most ``concurrency`` in flight),
relays their text in order as deltas (window 2's text waits until window 1 has finished), and
ends with the stitched ``Transcript``: window texts joined by one space, segment times shifted
by each window's start (so they stay monotonic across the clip). Formatting is
``streaming/transcript.py``'s job; decoding the upload runs in the media offload pool.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace

import numpy as np

from gateway.errors import GatewayError, InvalidRequest, TooManyMediaItems
from gateway.families._audio_windows import Window, plan_windows
from gateway.families._whisper_tokens import LANGUAGES, language_code
from gateway.families.whisper import (
    SOT_SEQUENCE_TOKENS,
    Segment,
    Task,
    WhisperSpec,
    decoder_prompt,
    resolve,
    segments,
)
from gateway.media.audio import AudioLimits
from gateway.observability.record import RequestRecord
from gateway.pipeline._media_jobs import PreparedItem, prepare_audio
from gateway.pipeline._whisper_calls import (
    DirectPlan,
    WindowOutput,
    bls_window,
    detect_language,
    direct_window,
    window_samples,
)
from gateway.pipeline.conversation import parse_messages
from gateway.pipeline.media import load_audio
from gateway.protocol.chat import ChatCompletionRequest
from gateway.runtime import Runtime, ServedRuntime
from gateway.streaming.chunks import UsageCounts
from gateway.streaming.transcript import StrippedDeltas, TimedSegment, Transcript
from gateway.triton.contract import ModelContract

SAMPLE_RATE = 16_000
DEFAULT_LANGUAGE = "en"  # NVIDIA's whisper_bls default prefix, and the fallback guess


@dataclass(frozen=True)
class TranscriptionJob:
    """What the caller asked for, in neutral terms."""

    task: Task = "transcribe"
    language: str | None = None
    prompt: str | None = None
    temperature: float = 0.0
    timestamps: bool = False


@dataclass(frozen=True)
class PreparedTranscription:
    served: ServedRuntime
    contract: ModelContract
    spec: WhisperSpec
    job: TranscriptionJob
    samples: np.ndarray
    windows: tuple[Window, ...]

    @property
    def duration(self) -> float:
        return self.samples.size / SAMPLE_RATE

    @property
    def media_items(self) -> int:
        return 1


def _language(job: TranscriptionJob, spec: WhisperSpec) -> str | None:
    """The request's language as Whisper's code; BLS translations need one."""
    if job.language is None:
        if spec.contract == "bls" and job.task == "translate":
            raise InvalidRequest(
                "this model's whisper_bls deployment cannot detect the spoken language: pass "
                "'language' to translate",
                param="language",
                code="language_required",
            )
        return DEFAULT_LANGUAGE if spec.contract == "bls" else None
    code = language_code(job.language)
    if code is None or list(LANGUAGES).index(code) >= spec.num_languages:
        raise InvalidRequest(
            f"language {job.language!r} is not one this Whisper model knows (ISO-639-1 codes "
            "such as 'en', 'de', 'zh')",
            param="language",
            code="unsupported_language",
        )
    return code


def _check_bls(job: TranscriptionJob, spec: WhisperSpec) -> None:
    """What NVIDIA's whisper_bls cannot do: a prompt, sampling, timestamps."""
    if spec.contract != "bls":
        return
    for field, used in (("prompt", job.prompt), ("temperature", job.temperature > 0)):
        if used:
            raise InvalidRequest(
                f"'{field}' is not supported by this model's whisper_bls deployment (fixed "
                "prompt, greedy decoding); serve the direct encoder-decoder contract for it",
                param=field,
                code="unsupported_parameter",
            )


async def prepare_transcription(
    served: ServedRuntime, job: TranscriptionJob, samples: np.ndarray
) -> PreparedTranscription:
    """Check the job against the deployment's contract and plan the windows."""
    contract = await served.get_contract()
    spec = resolve(served.config.whisper, contract)
    _check_bls(job, spec)
    job = replace(job, language=_language(job, spec))
    prompt_tokens = SOT_SEQUENCE_TOKENS
    if spec.contract == "direct" and job.prompt:
        prompt_tokens = spec.options.max_prompt_tokens
    windows = plan_windows(samples, spec.window_s(prompt_tokens))
    return PreparedTranscription(served, contract, spec, job, samples, tuple(windows))


async def decode_upload(data: bytes, runtime: Runtime) -> np.ndarray:
    """An uploaded file -> 16 kHz mono samples, in the media offload pool, within the limits."""
    limits = runtime.settings.limits
    metrics = runtime.metrics
    metrics.media_fetched("audio", 0.0, len(data))  # an upload: its bytes are already here
    item: PreparedItem = await runtime.offload.run(
        prepare_audio,
        data,
        AudioLimits(max_bytes=limits.max_media_bytes, max_duration_s=limits.max_audio_duration_s),
        what="the audio",
        on_wait=lambda seconds: metrics.queued("decode", seconds),
    )
    metrics.media_decoded("audio", item.decode_s, 0)
    return item.array


async def _plan_direct(
    prepared: PreparedTranscription, request_id: str, stream: bool
) -> tuple[DirectPlan, str]:
    """The decoder prompt (detecting the language first when none was given)."""
    spec, job = prepared.spec, prepared.job
    tokenizer = spec.tokenizer()
    language = job.language
    if language is None:
        first = window_samples(prepared.samples, prepared.windows[0])
        detected = await detect_language(
            prepared.served, prepared.contract, spec, first, f"{request_id}-lang"
        )
        language = detected or DEFAULT_LANGUAGE
    prompt = decoder_prompt(
        tokenizer, language, job.task, job.timestamps, job.prompt, spec.options.max_prompt_tokens
    )
    return DirectPlan(spec, tokenizer, tuple(prompt), job.temperature, stream), language


def _window_calls(
    prepared: PreparedTranscription, plan: DirectPlan | None, language: str, request_id: str
) -> list[AsyncIterator[str | WindowOutput]]:
    calls = []
    for window in prepared.windows:
        samples = window_samples(prepared.samples, window)
        window_id = f"{request_id}-w{window.index}"
        if plan is not None:
            call = direct_window(prepared.served, prepared.contract, plan, samples, window_id)
        else:
            task = prepared.job.task
            call = bls_window(
                prepared.served, prepared.contract, samples, language, task, window_id
            )
        calls.append(call)
    return calls


async def _pump(
    call: AsyncIterator[str | WindowOutput], queue: asyncio.Queue, slots: asyncio.Semaphore
) -> None:
    """Run one window's call into its queue; a failure is queued as the exception, so the
    reader (which waits on this queue) always wakes up."""
    try:
        async with slots:
            async for item in call:
                await queue.put(item)
    except Exception as exc:
        await queue.put(exc)
    finally:
        await call.aclose()


async def transcribe(
    prepared: PreparedTranscription,
    request_id: str,
    record: RequestRecord | None = None,
    stream: bool = True,
) -> AsyncIterator[str | Transcript]:
    """Text deltas in clip order (when ``stream``), then the whole ``Transcript``."""
    record = record or RequestRecord(request_id, "", "")
    plan, language = None, prepared.job.language or DEFAULT_LANGUAGE
    if prepared.spec.contract == "direct":
        plan, language = await _plan_direct(prepared, request_id, stream)
    calls = _window_calls(prepared, plan, language, request_id)
    queues: list[asyncio.Queue] = [asyncio.Queue() for _ in calls]
    slots = asyncio.Semaphore(prepared.spec.options.concurrency)
    tasks = [asyncio.ensure_future(_pump(c, q, slots)) for c, q in zip(calls, queues, strict=True)]
    deltas = StrippedDeltas()
    outputs: list[WindowOutput] = []
    try:
        for queue in queues:
            deltas.separate()
            while not isinstance(item := await queue.get(), WindowOutput):
                if isinstance(item, BaseException):
                    raise item
                if stream and (text := deltas.feed(item)):
                    record.on_token()
                    yield text
            outputs.append(item)
    except GatewayError as exc:
        record.error_code = exc.code
        raise
    except (GeneratorExit, asyncio.CancelledError):
        record.cancelled = True  # the client left: the windows' Triton calls are cancelled
        raise
    finally:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
    transcript = _stitch(prepared, plan, language, outputs)
    usage = UsageCounts(transcript.prompt_tokens, transcript.completion_tokens)
    record.set_usage(usage, "stop")
    yield transcript


def _window_segments(
    prepared: PreparedTranscription, plan: DirectPlan | None, window: Window, out: WindowOutput
) -> list[Segment]:
    if plan is not None:
        return segments(out.tokens, plan.tokenizer, window.duration_s)
    # whisper_bls strips every timestamp: the window is the finest segment it can give.
    return [Segment(0.0, window.duration_s, out.text, ())] if out.text.strip() else []


def _stitch(
    prepared: PreparedTranscription,
    plan: DirectPlan | None,
    language: str,
    outputs: list[WindowOutput],
) -> Transcript:
    """Windows in order: texts joined by a space, segments shifted to clip time."""
    timed: list[TimedSegment] = []
    for window, out in zip(prepared.windows, outputs, strict=True):
        for segment in _window_segments(prepared, plan, window, out):
            timed.append(
                TimedSegment(
                    id=len(timed),
                    seek=round(window.start_s * 100),
                    start=window.start_s + segment.start,
                    end=window.start_s + segment.end,
                    text=segment.text,
                    tokens=segment.tokens,
                )
            )
    text = " ".join(t for t in (o.text.strip() for o in outputs) if t)
    spoken = "english" if prepared.job.task == "translate" else LANGUAGES[language]
    return Transcript(
        task=prepared.job.task,
        language=spoken,
        duration=prepared.duration,
        text=text,
        segments=timed,
        prompt_tokens=len(plan.prompt) * len(outputs) if plan else 0,
        completion_tokens=sum(o.generated for o in outputs),
    )


async def prepare_chat_transcription(
    request: ChatCompletionRequest, served: ServedRuntime, runtime: Runtime
) -> PreparedTranscription:
    """A chat request to a Whisper model: its one audio part, transcribed as the answer.

    Text parts are not instructions to a speech model and are left out; images and video are
    refused. The audio is fetched and decoded by the media plane, under its limits.
    """
    parsed = parse_messages(request.messages)
    for part in parsed.media:
        if part.kind != "audio":
            raise InvalidRequest(
                f"model '{served.config.id}' takes audio only ({part.where})",
                param=part.where,
                code="unsupported_content_part",
            )
    if not parsed.media:
        raise InvalidRequest(
            f"model '{served.config.id}' transcribes audio: add an input_audio or audio_url part",
            param="messages",
            code="audio_required",
        )
    if len(parsed.media) > 1:
        raise TooManyMediaItems(
            f"this request has {len(parsed.media)} audio clips; a chat request to "
            f"'{served.config.id}' takes one",
            param="messages",
        )
    samples = await load_audio(parsed.media[0], runtime)
    return await prepare_transcription(served, TranscriptionJob(), samples)


async def chat_transcript(
    prepared: PreparedTranscription, request_id: str, record: RequestRecord | None = None
) -> AsyncIterator[str | UsageCounts]:
    """For the chat relay: the transcript's text deltas, then its token usage."""
    async for item in transcribe(prepared, request_id, record, stream=True):
        if isinstance(item, Transcript):
            yield UsageCounts(item.prompt_tokens, item.completion_tokens)
        else:
            yield item
