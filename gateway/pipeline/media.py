"""Media parts -> the family's wire tensor and its KV-reuse id.

Everything that can be refused without touching the network was checked before
(``pipeline/admission.py``: kinds the model takes, counts; here, sampling options), so a refused
request costs no fetch. Then every part is
fetched concurrently on the event loop and decoded in the offload pool (worker processes, at
most ``decode_workers`` at a time, each item under ``decode_timeout_s``), so a burst of large
or hostile media cannot starve the token relay of other requests; a still image whose header
bounds its cost (``media/threads.py``) takes the thread lane instead, under the same budget,
without the round trip to a process. A failure names its part.

The content digest covers the tenant salt, the model, the processing options (including
frame sampling and JPEG draft decoding, which change pixels) and every item's kind and content,
in order: for images their validated source bytes with the decoder versions (the same bytes
from any URL give the same id), for videos the sampled frames' array
(``pipeline/_media_jobs.py`` says why).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from gateway.config import ImageSettings, VideoSettings
from gateway.errors import (
    GatewayError,
    InvalidRequest,
    MediaTooLarge,
    MediaURLError,
    TooManyMediaItems,
)
from gateway.families.base import Family
from gateway.media.image import sniff_image_format
from gateway.media.local import FRAME_LIST_TYPE, FrameList, decode_base64_payload
from gateway.media.threads import ThreadLane
from gateway.media.video import FrameSampling
from gateway.observability.tracing import phase
from gateway.pipeline._media_budget import check_header_budget, check_image_budget, media_tokens
from gateway.pipeline._media_jobs import (
    DigestInputs,
    PreparedItem,
    image_digest_inputs,
    prepare_audio,
    prepare_image,
    prepare_video,
    source_array,
    trace_job,
)
from gateway.pipeline.admission import admit
from gateway.pipeline.conversation import MediaPart
from gateway.protocol.chat import MediaIOKwargs
from gateway.protocol.common import MediaTokens
from gateway.served import ServedRuntime
from gateway.services import Media

__all__ = [
    "PreparedMedia",
    "decode_upload",
    "prepare_media",
    "video_sampling",
]

_INLINE_STACK_BYTES = 1 << 20  # a single image's array stacked on the event loop (~0.1 ms)


@dataclass(frozen=True)
class PreparedMedia:
    """A request's media, ready for its family: the image or video tensor (by name) with its
    KV-reuse id, or an audio clip's samples (16 kHz mono float32) for a speech family."""

    tensor: tuple[str, np.ndarray[Any, Any]] | None
    extra_id: int | None  # None: a 64-bit collision, so this request goes without reuse
    items: int
    # (tensor name, array) of the original image sizes, for families whose encoder needs them.
    image_sizes: tuple[str, np.ndarray[Any, Any]] | None = None
    samples: np.ndarray[Any, Any] | None = None
    # The prompt tokens the media become, by modality, as the family counts what it sent.
    tokens: MediaTokens | None = None


def video_sampling(
    options: MediaIOKwargs | None, family: Family, limits: VideoSettings
) -> FrameSampling:
    """Frames to sample: the request's ``media_io_kwargs.video`` within the server's limits."""
    video = options.video if options is not None else None
    num_frames = (video.num_frames if video else None) or limits.num_frames
    if num_frames > limits.max_num_frames:
        raise InvalidRequest(
            f"num_frames is {num_frames}; this server samples at most "
            f"{limits.max_num_frames} frames per video",
            param="media_io_kwargs.video.num_frames",
        )
    fps = video.fps if video else None
    if fps is not None and fps > limits.max_fps:
        raise InvalidRequest(
            f"fps is {fps:g}; this server samples at most {limits.max_fps:g} frames per second",
            param="media_io_kwargs.video.fps",
        )
    return FrameSampling(num_frames, fps, family.video_max_short_side)


async def prepare_media(
    parts: Sequence[MediaPart],
    served: ServedRuntime,
    media: Media,
    options: MediaIOKwargs | None = None,
) -> PreparedMedia | None:
    """Fetch, decode and prepare every part; the first failure is the request's error."""
    if not parts:
        return None
    limits = media.settings
    # The request's preparation admitted these parts with its conversation; admitting them
    # again here (no I/O, no pixels) keeps every caller of this fetch behind the same gate.
    admit(served.capabilities, parts, limits)
    if parts[0].kind == "audio":
        return await _prepare_audio(parts, media)
    family = served.family
    sampling = video_sampling(options, family, limits.video) if parts[0].kind == "video" else None
    name = family.video_tensor if sampling is not None else family.image_tensor
    assert name is not None  # admission.admit refused kinds without a tensor
    salt = limits.content_id_salt
    if sampling is not None:
        processing = f"{family.video_processing_options()}|{sampling!r}"
        digest = DigestInputs(served.config.id, processing, "video", salt)
    else:
        draft = _draft_option(family, limits.image)
        details = [family.detail_key(part.detail) for part in parts]
        if any(details):  # detail changed the pixels of some image: the id must differ
            draft += "|detail=" + ",".join(details)
        digest = image_digest_inputs(served.config.id, family, draft, salt)
    only = digest if len(parts) == 1 else None  # one item: its job hashes it where it runs
    loads = [_load(part, served, media, sampling, only) for part in parts]
    results = await _every(loads)
    items = _successes(results, parts)
    tensor, content = await _stack(family, items, sampling is not None, digest)
    sizes = None
    if sampling is None and family.image_sizes_tensor is not None:
        array = family.image_sizes([item.size for item in items])
        sizes = (family.image_sizes_tensor, array) if array is not None else None
    tokens = media_tokens(family, items, sampling is not None)
    check_image_budget(tokens, served, limits)
    extra_id = media.plane.extra_ids.extra_id(content)
    return PreparedMedia((name, tensor), extra_id, len(parts), sizes, tokens=tokens)


async def _every(
    loads: list[Coroutine[Any, Any, PreparedItem]],
) -> list[PreparedItem | BaseException]:
    """Each load's item or failure, in order. A single part is awaited in the request's own
    task: a task of its own would only start on the loop's next turn, behind every callback
    ready by then (under load, other streams' tokens)."""
    if len(loads) == 1:
        try:
            return [await loads[0]]
        except Exception as exc:  # reported as gather(return_exceptions=True) reports it
            return [exc]
    results: list[PreparedItem | BaseException] = await asyncio.gather(
        *loads, return_exceptions=True
    )
    return results


async def _stack(
    family: Family, items: Sequence[PreparedItem], video: bool, digest: DigestInputs
) -> tuple[np.ndarray[Any, Any], bytes]:
    """The family's tensor and the content digest. A small single image is stacked here on
    the loop (one copy of well under a millisecond costs less than a hop to a thread and
    back); anything larger, and the hashing of several items, in a thread."""
    arrays = [item.array for item in items]
    hashed = items[0].digest if len(items) == 1 else None
    covered = [source_array(i.source) if i.source is not None else i.array for i in items]
    kinds = [digest.decoded_by(i.decoder).kind if i.decoder else digest.kind for i in items]

    def work() -> tuple[np.ndarray[Any, Any], bytes]:
        tensor = family.stack_video(arrays[0]) if video else family.stack_images(arrays)
        return tensor, hashed if hashed is not None else digest.digest(covered, kinds)

    if hashed is not None and not video and arrays[0].nbytes <= _INLINE_STACK_BYTES:
        return work()
    return await asyncio.to_thread(work)


async def _prepare_audio(parts: Sequence[MediaPart], media: Media) -> PreparedMedia:
    """One audio clip -> its samples (the wire carries one clip per request)."""
    if len(parts) > 1:
        raise TooManyMediaItems(
            f"this request has {len(parts)} audio clips; the model takes one per request",
            param="messages",
        )
    part = parts[0]
    limits = media.plane.limits.audio
    try:
        item = await _decode(part, media, await _bytes(part, media), prepare_audio, limits)
    except GatewayError as exc:
        raise exc.located(part.where) from exc  # as every image and video part is named
    return PreparedMedia(None, None, 1, samples=item.array)


async def decode_upload(data: bytes, media: Media) -> np.ndarray[Any, Any]:
    """An uploaded audio file -> 16 kHz mono samples, in the offload pool, within the limits."""
    metrics = media.metrics
    metrics.media_fetched("audio", 0.0, len(data))  # an upload: its bytes are already here
    try:
        item: PreparedItem = await media.plane.decoder.run(
            prepare_audio,
            data,
            media.plane.limits.audio,
            what="the audio",
            on_wait=lambda seconds: metrics.queued("decode", seconds),
        )
    except GatewayError as exc:
        raise exc.located("file") from exc  # the form field the upload came in
    metrics.media_decoded("audio", item.decode_s, 0)
    return item.array


def _draft_option(family: Family, limits: ImageSettings) -> str:
    return f"draft={limits.jpeg_draft_margin:g}" if family.image_decode_size else "draft=off"


async def _load(
    part: MediaPart,
    served: ServedRuntime,
    media: Media,
    sampling: FrameSampling | None,
    digest: DigestInputs | None,
) -> PreparedItem:
    """Fetch one part, then prepare it: a still image the header bounds in the thread lane,
    anything else (or one the lane refuses) in a worker process."""
    data = await _bytes(part, media)
    limits = media.plane.limits  # built once, not for each item
    if part.kind == "video":
        assert sampling is not None
        args: tuple[Any, ...] = (limits.video, sampling, served.family, digest)
        return await _decode(part, media, data, prepare_video, *args)
    assert isinstance(data, bytes)  # a list of frames is refused unless the part is a video
    check_header_budget(data, part, served, media.settings)
    lane = media.plane.decoder.threads
    fit = lane.limits.fit(data) if lane is not None else None
    item = None
    if lane is not None and fit is not None:
        item = await _in_lane(part, served, media, data, digest, lane, fit == "loop")
    if item is None:
        args = (served.family, media.settings.image.jpeg_draft_margin, digest, part.detail)
        item = await _decode(part, media, data, prepare_image, limits.image, *args)
    return replace(item, source=data)  # kept for a several-image request's digest


async def _in_lane(
    part: MediaPart,
    served: ServedRuntime,
    media: Media,
    data: bytes,
    digest: DigestInputs | None,
    lane: ThreadLane,
    small: bool,
) -> PreparedItem | None:
    """A still image the header bounds, in the thread lane (on the event loop where it is
    ``small`` and the lane lets it): on the device where the lane has one and the family's
    recipe runs there, else (or where the device gives it up) with PIL;
    None where PIL saw more than the header said (a worker process decides, under every
    limit)."""
    family, lane_limits = served.family, media.plane.lane_image
    if lane.device is not None and _for_device(family, part, data):
        # imported here: it brings in torch, which only a gateway with a device loads
        from gateway.pipeline._device_jobs import prepare_image_on_device

        submitted, on_loop = time.perf_counter(), lane.on_loop
        job = (data, lane_limits, family, lane.device, digest)
        item = await lane.run(
            prepare_image_on_device, *job, what="the image", on_wait=_on_wait(media), small=small
        )
        media.metrics.media_on_device(item is not None)
        if item is not None:
            _report(part, media, item, submitted, _where(lane, on_loop))
            return item
    args = (lane_limits, family, media.settings.image.jpeg_draft_margin, digest, part.detail)
    try:
        return await _decode(part, media, data, prepare_image, *args, lane=lane, small=small)
    except MediaTooLarge:
        return None


def _where(lane: ThreadLane, on_loop_before: int) -> str:
    """Where a lane job ran: "loop" if the event loop ran it itself, else "thread"."""
    return "loop" if lane.on_loop > on_loop_before else "thread"


def _for_device(family: Family, part: MediaPart, data: bytes) -> bool:
    """A JPEG, for a family whose whole preparation is its pixel recipe, at the one
    resolution it has (``detail`` changes nothing there)."""
    jpeg = sniff_image_format(data) == "JPEG"
    return jpeg and family.pixel_spec is not None and not family.detail_key(part.detail)


async def _bytes(part: MediaPart, media: Media) -> bytes | FrameList:
    """The part's bytes: fetched (http, https, data:, file:) or its base64 ``input_audio``;
    a video's list of frames (``data:video/jpeg``) as it came."""
    started = time.perf_counter()
    data: bytes | FrameList
    try:
        if part.url is not None:
            fetched = await media.plane.fetcher.fetch(part.url)
            data = fetched if isinstance(fetched, FrameList) else fetched.data
            if isinstance(data, FrameList) and part.kind != "video":
                raise MediaURLError(
                    f"A data:{FRAME_LIST_TYPE} URL is a video sent as a list of frames; send "
                    "it in a video_url part."
                )
        else:
            limit = media.plane.limits.max_bytes
            data = decode_base64_payload(part.data or "", limit, "input_audio.data")
    except MediaURLError as exc:
        code = f"invalid_{part.kind}_url" if part.url is not None else "invalid_media"
        raise exc.revised(code=code) from exc
    size = data.size if isinstance(data, FrameList) else len(data)
    media.metrics.media_fetched(part.kind, time.perf_counter() - started, size)
    phase("media.fetch", started, bytes=size)
    return data


async def _decode(
    part: MediaPart,
    media: Media,
    data: bytes | FrameList,
    job: Any,
    *args: Any,
    lane: ThreadLane | None = None,
    small: bool = False,
) -> PreparedItem:
    """Run ``job(data, *args)`` in the offload pool (or ``lane``; on the loop where ``small``
    and the lane lets it) and report its timings."""
    submitted, what, on_wait = time.perf_counter(), f"the {part.kind}", _on_wait(media)
    item: PreparedItem
    if lane is None:
        item = await media.plane.decoder.run(job, data, *args, what=what, on_wait=on_wait)
        _report(part, media, item, submitted, "process")
        return item
    on_loop = lane.on_loop
    item = await lane.run(job, data, *args, what=what, on_wait=on_wait, small=small)
    _report(part, media, item, submitted, _where(lane, on_loop))
    return item


def _on_wait(media: Media) -> Callable[[float], None]:
    metrics = media.metrics
    return lambda seconds: metrics.queued("decode", seconds)


def _report(
    part: MediaPart, media: Media, item: PreparedItem, submitted: float, where: str
) -> None:
    """An item's job in the request's trace and the media metrics; ``where`` it ran: process,
    thread or loop (on the device too where the item names its decoder)."""
    trace_job(item, submitted, f"{where}+device" if item.decoder else where)
    media.metrics.media_item(where)
    media.metrics.media_decoded(part.kind, item.decode_s, item.pixels)
    if item.preprocess_s:
        media.metrics.media_preprocessed(part.kind, item.preprocess_s)


def _successes(
    results: Sequence[PreparedItem | BaseException], parts: Sequence[MediaPart]
) -> list[PreparedItem]:
    """The prepared items, or the first failure, annotated with which part it was."""
    for index, (result, part) in enumerate(zip(results, parts, strict=True)):
        if isinstance(result, GatewayError):
            total = sum(1 for p in parts if p.kind == part.kind)
            number = sum(1 for p in parts[: index + 1] if p.kind == part.kind)
            item = f"{part.kind} {number} of {total}"
            raise result.located(part.where, item=item) from result
        if isinstance(result, BaseException):
            raise result
    return [r for r in results if isinstance(r, PreparedItem)]
