"""Speech to text on the same skeleton as chat: check -> decode -> plan -> relay.

``prepare_transcription`` asks the model's family whether it can take the job (a family that
does not transcribe refuses here, before the upload is decoded), decodes the upload in the media
offload pool, and lets the family plan its calls; ``relay.relay`` runs them and ends with an
``Outcome`` carrying the ``Transcript``. Formatting is ``streaming/transcript.py``'s job.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import partial
from typing import Any

import numpy as np

from gateway.families.base import SpeechOptions
from gateway.families.calls import GenerationRequest, Sampling
from gateway.media.vad import TurnDetection, speech_spans
from gateway.pipeline.media import decode_upload
from gateway.pipeline.relay import Prepared, family_plan, prepared
from gateway.served import ServedRuntime
from gateway.services import Media


@dataclass(frozen=True)
class TranscriptionJob:
    """What the caller asked for, in neutral terms."""

    speech: SpeechOptions
    sampling: Sampling
    # chunking_strategy "auto" / server_vad: long audio cut where the detector hears no speech
    chunking: TurnDetection | None = None


async def check_transcription(served: ServedRuntime, job: TranscriptionJob) -> TranscriptionJob:
    """The family's refusals, before any decoding (a model that does not transcribe, a
    language it does not know, options its deployment cannot honour)."""
    await served.get_contract()  # a family with several contracts knows its own after this
    speech = served.family.check_speech(job.speech, job.sampling)
    return TranscriptionJob(speech, job.sampling, job.chunking)


async def prepare_transcription(
    served: ServedRuntime, job: TranscriptionJob, upload: bytes, media: Media, stream: bool
) -> Prepared:
    """Check the job, decode the upload and plan the calls (all before the first byte).
    ``stream``: the caller streams, so Triton is asked to (when the deployment is decoupled)."""
    job = await check_transcription(served, job)
    samples = await decode_upload(upload, media)
    return await prepare_samples(served, job, samples, stream)


async def prepare_samples(
    served: ServedRuntime,
    job: TranscriptionJob,
    samples: np.ndarray[Any, Any],
    stream: bool,
) -> Prepared:
    """Plan the calls for audio already decoded (16 kHz mono float32): an upload's, or an
    utterance of a realtime session (``pipeline/realtime``). ``job`` is already checked."""
    contract = await served.get_contract()
    if job.chunking is not None:  # asked by the family's window planner, off the event loop
        finder = partial(speech_spans, config=job.chunking)
        job = replace(job, speech=replace(job.speech, find_speech=finder))
    draft = GenerationRequest(
        text_input="",
        max_tokens=served.policy.max_tokens,
        stream=stream and contract.decoupled,
        sampling=job.sampling,
    )
    plan = await family_plan(served, draft, samples, job.speech)
    timeouts = served.policy.timeouts
    return prepared(served, contract, plan, media_items=1, timeouts=timeouts)
