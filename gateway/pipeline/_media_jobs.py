"""The work a media worker process does for one item: decode, then the family's preparation.

Module-level functions, because the offloader sends them to worker processes by reference
(pickle); the worker imports this module at start, which brings in PIL, PyAV and the
families. The thread lane runs the same functions in the gateway's process. Each returns the
array with its timings, so the gateway's metrics can tell decode time from preprocessing time
although both ran elsewhere; and, for a request of one item, its content digest, hashed here
while the array is at hand rather than in a second pass on the event loop.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from PIL import __version__ as _PILLOW_VERSION
from PIL import features

from gateway.families.base import Family
from gateway.media.audio import AudioLimits, decode_audio
from gateway.media.identity import content_digest
from gateway.media.image import ImageLimits, decode_image
from gateway.media.local import FrameList
from gateway.media.stripes import Pending
from gateway.media.video import FrameSampling, VideoLimits, decode_video
from gateway.media.video_frames import decode_frame_list
from gateway.observability.tracing import phase

__all__ = [
    "DECODERS",
    "IMAGE_SOURCE_KIND",
    "DigestInputs",
    "PreparedItem",
    "image_digest_inputs",
    "prepare_audio",
    "prepare_image",
    "prepare_video",
    "source_array",
    "trace_job",
]

# What turns an image's bytes into pixels: any change here may change the pixels.
DECODERS = "pillow={};jpeg={};webp={};zlib={}".format(
    _PILLOW_VERSION, *(features.version(name) for name in ("jpg", "webp", "zlib"))
)
# The digest's kind for an image hashed by its source bytes (never equal to a hashed array's).
IMAGE_SOURCE_KIND = "image:source"
# Below this, hashing the source beside the decode costs more in hand-offs than it saves
# (a 31 kB JPEG hashes in 0.03 ms; a 282 kB one in 0.2 ms: `python -m bench image-job`).
_OVERLAP_BYTES = 128 * 1024


@dataclass(frozen=True)
class DigestInputs:
    """Everything ``content_digest`` takes but the arrays: the pipeline states it, a job that
    holds a request's only item applies it (``media/identity.py`` says what goes in)."""

    model: str
    options: str
    kind: str
    salt: str = ""

    def digest(self, arrays: list[np.ndarray[Any, Any]], kinds: list[str] | None = None) -> bytes:
        """The digest of ``arrays`` (an image's: its source bytes as a uint8 array), each of
        ``kinds`` (by default, all of this one's)."""
        return content_digest(
            model=self.model,
            options=self.options,
            arrays=arrays,
            kinds=kinds if kinds is not None else [self.kind] * len(arrays),
            salt=self.salt,
        )

    def decoded_by(self, decoder: str) -> DigestInputs:
        """These inputs for items whose pixels ``decoder`` made (not PIL): a kind of their own,
        so no KV-reuse id is shared with the same bytes decoded by PIL."""
        return replace(self, kind=f"{self.kind}|decoder={decoder}")


def image_digest_inputs(model: str, family: Family, draft: str, salt: str = "") -> DigestInputs:
    """What an image request's digest covers besides the source bytes: the model, the family's
    processing options, JPEG draft decoding (``draft``) and the decoder versions."""
    processing = f"{family.processing_options()}|{draft}|{DECODERS}"
    return DigestInputs(model, processing, IMAGE_SOURCE_KIND, salt)


def source_array(data: bytes) -> np.ndarray[Any, Any]:
    """``data`` as the uint8 array the digest frames (a view: no copy)."""
    return np.frombuffer(data, dtype=np.uint8)


@dataclass(frozen=True)
class PreparedItem:
    """One item ready for the family's tensor, and what it cost in the worker."""

    array: np.ndarray[Any, Any]
    decode_s: float
    preprocess_s: float
    pixels: int  # decoded pixels (width x height, summed over frames); 0 for audio
    size: tuple[int, int] = (0, 0)  # (height, width) the family prepared from (detail applied)
    digest: bytes | None = None  # the request's content digest, when this is its only item
    source: bytes | None = None  # an image's source bytes: what a request's digest covers
    started: float = 0.0  # perf_counter when the job began (one clock for threads, processes)
    digest_s: float = 0.0
    # The decoder that made its pixels where not PIL (``DigestInputs.decoded_by``'s name).
    decoder: str | None = None


def trace_job(item: PreparedItem, submitted: float, lane: str) -> None:
    """The job's phases for the request's trace: the hop to the job, its decode, preprocess
    and digest, and the hop back (what the loop waited beyond the job itself)."""
    if not item.started:
        return
    decoded = item.started + item.decode_s
    preprocessed = decoded + item.preprocess_s
    finished = preprocessed + item.digest_s
    phase("media.hop_to_job", submitted, item.started, lane=lane)
    phase("media.decode", item.started, decoded, pixels=item.pixels)
    phase("media.preprocess", decoded, preprocessed)
    if item.digest_s:
        phase("media.digest", preprocessed, finished)
    phase("media.hop_back", finished)


def prepare_image(
    data: bytes,
    limits: ImageLimits,
    family: Family,
    draft_margin: float,
    digest: DigestInputs | None = None,
    detail: str | None = None,
) -> PreparedItem:
    """Decode (in JPEG draft mode when the family's input is much smaller), size as
    ``detail`` asks where the family has a choice, preprocess, and hash the source bytes when
    ``digest`` is given (it covers the detail: ``pipeline/media.py``)."""
    started = time.perf_counter()
    # The digest covers the source bytes, not the pixels: for a large source it runs beside
    # the decode, in the stripes' pool (or here, at the end, if no pool thread took it up).
    hashing = None
    if digest is not None:
        hashing = Pending(digest.digest, [source_array(data)], inline=len(data) < _OVERLAP_BYTES)
    image = decode_image(
        data, limits, target_size=family.image_decode_size, draft_margin=draft_margin
    )
    pixels = image.width * image.height
    image = family.image_for_detail(image, detail)  # the size the family prepares from
    decoded = time.perf_counter()
    array = family.prepare_image(image)
    prepared = time.perf_counter()
    hashed = hashing.result() if hashing is not None else None  # digest_s: what is left of it
    return PreparedItem(
        array,
        decoded - started,
        prepared - decoded,
        pixels,
        (image.height, image.width),
        hashed,
        started=started,
        digest_s=time.perf_counter() - prepared,
    )


def prepare_video(
    data: bytes | FrameList,
    limits: VideoLimits,
    sampling: FrameSampling,
    family: Family,
    digest: DigestInputs | None = None,
) -> PreparedItem:
    """Sample frames (seeking, downscaled by swscale; or, from a list of frames, decoding
    the sampled ones as images) and hand them to the family."""
    started = time.perf_counter()
    if isinstance(data, FrameList):
        frames = decode_frame_list(data, limits, sampling)
    else:
        frames = decode_video(data, limits, sampling)
    decoded = time.perf_counter()
    array = family.prepare_video(frames)
    pixels = int(frames.shape[0] * frames.shape[1] * frames.shape[2])
    prepared = time.perf_counter()
    hashed = digest.digest([array]) if digest is not None else None
    done = time.perf_counter()
    return PreparedItem(
        array, decoded - started, prepared - decoded, pixels, digest=hashed,
        started=started, digest_s=done - prepared,
    )  # fmt: skip


def prepare_audio(data: bytes, limits: AudioLimits) -> PreparedItem:
    """Decode to 16 kHz mono float32 (families that take audio window it themselves)."""
    started = time.perf_counter()
    samples = decode_audio(data, limits)
    return PreparedItem(samples, time.perf_counter() - started, 0.0, 0, started=started)
