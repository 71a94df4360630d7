"""Untrusted video bytes -> N uniformly sampled RGB frames, decoding as little as possible.

PyAV (FFmpeg) only ever sees the fetched bytes in memory, never a URL or a path. The container
is recognised by its magic bytes and its demuxer is then named explicitly (and is the only
format FFmpeg may open, so a demuxer cannot probe its way into another: a playlist (HLS, DASH),
a concat list, an image sequence, AVI's embedded GAB2 subtitles); nested opens are refused too.
Accepted: MP4/QuickTime and Matroska/WebM holding H.264, HEVC, VP8, VP9, AV1 or MPEG-4 Part 2,
and AVI holding MPEG-4 Part 2 or H.264 (vLLM's CVE-2026-22778 came in through a video URL).

MPEG-4 Part 2 (``mpeg4``: Xvid, DivX, OpenCV's ``mp4v``) and the AVI demuxer (``avi``) are the
two additions of issue 14; both are old, heavily fuzzed FFmpeg code (OSS-Fuzz fuzzes FFmpeg's
decoders, this one among them, and its demuxers). Their public record: the MPEG-4 decoder had
CVE-2018-12459 (an assertion failure from an inconsistent bits-per-sample in
``ff_mpeg4_decode_picture_header``) and CVE-2018-12460 (a NULL dereference on a misdetected
studio profile), both fixed in 4.0.1, then fuzzer-found bounds fixes in its studio-profile path
(``mpeg4_decode_studio_block``, 4.1.2); the AVI demuxer had buffer overflows in 2006 (GLSA
200609-09), and its GAB2 subtitle path, which probed any demuxer over data embedded in the
file, was limited to SRT and ASS in 2017 (an information-disclosure fix, CWE-200). Crashes and
assertions dominate that record; what bounds them here: the decode runs in a worker process
with an address-space cap and a time budget (killed and replaced on overrun, so a crash or a
hang costs one item), the demuxer is named and is the only format allowed, only the listed
codecs are decoded, with one decoding thread (no frame threading, whose races are a class of
their own), and every budget below is checked before decoding. MJPEG, MPEG-1/2, MS-MPEG-4,
H.263 and the rest of what AVI can hold stay refused.

Limits are checked from the header before decoding (resolution, duration, frame count), and
again from the packet index. Sampling reads the packets once without decoding (cheap: the
bytes are in memory), then decodes only from the keyframe before each chosen frame to that
frame, in order, never twice; a budget caps the frames decoded in all. AVI stores no
presentation times, only a frame counter in decode order: FFmpeg recovers them for MPEG-4
Part 2, not for H.264 with B-frames, so H.264 in AVI is decoded from its start and frames are
told apart by their order out of the decoder. Frames are converted (and downscaled when
asked) by swscale in one pass, and turned upright per the stream's display matrix. PyAV's
errors are translated here, once. Synchronous: the caller offloads it.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from gateway.errors import MediaDecodeError, MediaError, MediaTooLarge, UnsupportedMedia
from gateway.media import limits
from gateway.media._av import av_errors, codec_ids, open_bytes, pyav

__all__ = [
    "VIDEO_CODECS",
    "FrameSampling",
    "VideoLimits",
    "decode_video",
    "output_size",
    "sample_indices",
    "sniff_container",
]

VIDEO_CODECS = ("h264", "hevc", "vp8", "vp9", "av1", "mpeg4")
_CODEC_NAMES = {
    **{"h264": "H.264", "hevc": "HEVC", "vp8": "VP8", "vp9": "VP9", "av1": "AV1"},
    "mpeg4": "MPEG-4 Part 2",
}
_MP4_BOXES = (b"ftyp", b"moov", b"mdat", b"free", b"wide", b"skip")
_EBML_MAGIC = b"\x1a\x45\xdf\xa3"
SUPPORTED = "MP4, WebM/Matroska or AVI"


@dataclass(frozen=True)
class _Container:
    demuxer: str  # FFmpeg's, named explicitly: never probed
    display: str  # for messages
    codecs: tuple[str, ...]
    # Codecs whose presentation times the container cannot carry: frames are told apart by
    # their order out of the decoder, decoding from the start (no seeking).
    ordinal: frozenset[str] = frozenset()


_CONTAINERS = {
    "mp4": _Container("mov", "MP4", VIDEO_CODECS),
    "matroska": _Container("matroska", "WebM/Matroska", VIDEO_CODECS),
    "avi": _Container("avi", "AVI", ("mpeg4", "h264"), ordinal=frozenset({"h264"})),
}


@dataclass(frozen=True)
class VideoLimits:
    """What one video may cost. ``max_frames``: frames in the file; ``max_decoded_frames``:
    frames the sampler may decode (sparse keyframes make sampling cost more than N)."""

    max_bytes: int = limits.DEFAULT_MAX_BYTES
    max_duration_s: float = limits.DEFAULT_MAX_VIDEO_DURATION_S
    max_frames: int = limits.DEFAULT_MAX_VIDEO_FRAMES
    max_side: int = limits.DEFAULT_MAX_VIDEO_SIDE
    max_pixels: int = limits.DEFAULT_MAX_VIDEO_PIXELS
    max_decoded_frames: int = limits.DEFAULT_MAX_DECODED_FRAMES
    decoder_threads: int = 1


@dataclass(frozen=True)
class FrameSampling:
    """``num_frames`` uniformly over the video; with ``fps``, at most ``fps`` per second of
    video (so a short clip gets fewer). ``max_short_side`` downscales frames (never up) so
    their shorter side is at most that, keeping the aspect ratio."""

    num_frames: int = limits.DEFAULT_VIDEO_FRAMES
    fps: float | None = None
    max_short_side: int | None = None

    def __post_init__(self) -> None:
        if self.num_frames < 1 or (self.fps is not None and self.fps <= 0):
            raise ValueError("num_frames must be >= 1 and fps > 0")


def sniff_container(data: bytes) -> str | None:
    """``"mp4"`` (MP4/QuickTime), ``"matroska"`` (Matroska/WebM), ``"avi"`` (``RIFF....AVI
    ``) or None, by magic bytes."""
    if data[4:8] in _MP4_BOXES:
        return "mp4"
    if data.startswith(_EBML_MAGIC):
        return "matroska"
    if data[:4] == b"RIFF" and data[8:12] == b"AVI ":
        return "avi"
    return None


def sample_indices(total_frames: int, duration_s: float, sampling: FrameSampling) -> list[int]:
    """Which frames (presentation order) to keep: evenly spaced, first and last included."""
    count = min(sampling.num_frames, total_frames)
    if sampling.fps is not None:
        count = min(count, max(1, math.floor(duration_s * sampling.fps + 1e-9)))
    if count == 1:
        return [0]
    return [round(i * (total_frames - 1) / (count - 1)) for i in range(count)]


def decode_video(data: bytes, limits: VideoLimits, sampling: FrameSampling) -> np.ndarray[Any, Any]:
    """Sampled frames as uint8 ``[frames, H, W, 3]`` RGB.

    Raises UnsupportedMedia (container or codec not allowed), MediaTooLarge (a limit) or
    MediaDecodeError (empty, truncated, corrupt).
    """
    if not data:
        raise MediaDecodeError("The video is empty (0 bytes).")
    if len(data) > limits.max_bytes:
        raise MediaTooLarge(
            f"The video is {len(data)} bytes, over the limit of {limits.max_bytes} bytes."
        )
    kind = sniff_container(data)
    if kind is None:
        raise UnsupportedMedia(f"The media is not a supported video ({SUPPORTED}).")
    spec = _CONTAINERS[kind]
    try:
        with open_bytes(data, spec.demuxer, spec.codecs) as container:
            return _sample(container, spec, limits, sampling)
    except MediaError:
        raise
    except av_errors() as exc:
        raise MediaDecodeError(
            f"The video could not be decoded: the {spec.display} data is truncated or corrupt."
        ) from exc


def _sample(
    container: Any, spec: _Container, limits: VideoLimits, sampling: FrameSampling
) -> np.ndarray[Any, Any]:
    if not container.streams.video:
        raise UnsupportedMedia("The media has no video stream.")
    stream = container.streams.video[0]
    codec = _check_stream(stream, container, spec, limits)
    stream.thread_type = "AUTO" if limits.decoder_threads > 1 else "SLICE"
    stream.codec_context.thread_count = limits.decoder_threads
    packets, keyframes = _index(container, stream, limits)
    presentation = sorted(p.pts for p in packets if p.pts is not None)
    if not presentation or not keyframes:
        raise MediaDecodeError("The video has no decodable frames.")
    span = (presentation[-1] - presentation[0]) * float(stream.time_base or 0)
    count = len(presentation)
    duration_s = span * count / (count - 1) if count > 1 else 0.0  # plus the last frame's
    _check_duration(duration_s, limits)
    chosen = sample_indices(len(presentation), duration_s, sampling)
    budget = limits.max_decoded_frames
    if codec in spec.ordinal:  # no presentation times: the decoder's output order says
        why = f"{_CODEC_NAMES[codec]} in {spec.display} is decoded from its start"
        frames = _FrameSeeker(stream, packets, keyframes, budget, ordinal=why).frames_at(chosen)
    else:
        wanted = [presentation[i] for i in chosen]
        frames = _FrameSeeker(stream, packets, keyframes, budget).frames_at(wanted)
    width, height = output_size(frames[0].width, frames[0].height, sampling.max_short_side)
    return np.stack([_to_rgb(frame, width, height) for frame in frames])


def _check_stream(stream: Any, container: Any, spec: _Container, limits: VideoLimits) -> str:
    """Codec, resolution, duration and frame count as the header declares them; the codec."""
    codec = codec_ids(VIDEO_CODECS).get(stream.codec_context.codec.id)
    if codec not in spec.codecs:
        allowed = ", ".join(_CODEC_NAMES[name] for name in spec.codecs)
        raise UnsupportedMedia(
            f"The video codec is not supported in {spec.display} (allowed: {allowed})."
        )
    width, height = stream.codec_context.width, stream.codec_context.height
    if width <= 0 or height <= 0:
        raise MediaDecodeError("The video has no valid frame size.")
    if max(width, height) > limits.max_side or width * height > limits.max_pixels:
        raise MediaTooLarge(
            f"The video is {width}x{height}, over the limit of {limits.max_side} pixels per "
            f"side and {limits.max_pixels / 1e6:g} megapixels per frame."
        )
    if stream.duration is not None and stream.time_base:
        _check_duration(float(stream.duration * stream.time_base), limits)
    elif container.duration is not None:
        _check_duration(container.duration / pyav().time_base, limits)
    _check_frame_count(stream.frames, limits)
    return codec


def _check_duration(seconds: float, limits: VideoLimits) -> None:
    if seconds > limits.max_duration_s:
        raise MediaTooLarge(
            f"The video is {seconds:.1f} s long, over the limit of {limits.max_duration_s:g} s."
        )


def _check_frame_count(frames: int, limits: VideoLimits) -> None:
    if frames > limits.max_frames:
        raise MediaTooLarge(
            f"The video has {frames} frames, over the limit of {limits.max_frames} frames."
        )


def _index(container: Any, stream: Any, limits: VideoLimits) -> tuple[list[Any], list[int]]:
    """Every packet of the stream in decode order (no decoding), and the keyframe positions.

    Stops as soon as the count passes ``max_frames``: a header can lie, the packets cannot.
    """
    packets: list[Any] = []
    keyframes: list[int] = []
    for packet in container.demux(stream):
        if packet.size == 0:
            continue  # the demuxer's end-of-stream marker
        if packet.is_keyframe:
            keyframes.append(len(packets))
        packets.append(packet)
        if len(packets) > limits.max_frames:
            _check_frame_count(len(packets), limits)
    return packets, keyframes


class _FrameSeeker:
    """Decodes the frames at given presentation times, jumping to the keyframe before each.

    Moving forward within reach is done by decoding on; a target whose keyframe lies ahead
    of the decoder is reached by a jump (flush the decoder, feed from that keyframe). Frames
    leave the decoder in presentation order, a few at a time (B-frames), so the ones past the
    current target wait in ``_pending`` for the next.

    ``ordinal`` (why, for the budget's message): the container has no presentation times, so
    targets are frame numbers, frames are numbered as they leave the decoder, and decoding
    runs from the first keyframe on, never jumping (a jump would lose the count).
    """

    def __init__(
        self,
        stream: Any,
        packets: list[Any],
        keyframes: list[int],
        budget: int,
        ordinal: str | None = None,
    ):
        self._codec = stream.codec_context
        self._packets = packets
        self._key_positions = keyframes[:1] if ordinal else keyframes
        self._key_pts = [0.0] if ordinal else [_pts_or_inf(packets[i]) for i in keyframes]
        self._budget = budget
        self._why = ordinal or "its keyframes are too far apart"
        self._count: int | None = 0 if ordinal else None  # frames out of the decoder so far
        self._next = 0  # next packet to feed
        self._decoded = 0
        self._pending: list[Any] = []
        self._last: Any = None

    def frames_at(self, targets: list[int]) -> list[Any]:
        return [self._frame_at(pts) for pts in targets]

    def _frame_at(self, target: int) -> Any:
        key = max(0, bisect.bisect_right(self._key_pts, target) - 1)
        start = self._key_positions[key]
        if start > self._next:  # the keyframe is ahead: jump rather than decode up to it
            self._codec.flush_buffers()
            self._pending.clear()
            self._next = start
        for frame in self._decode_on():
            if frame.pts is not None and frame.pts >= target:
                return frame
        if self._last is None:
            raise MediaDecodeError("The video has no decodable frames.")
        return self._last  # the stream ended early (truncated): the nearest earlier frame

    def _decode_on(self) -> Iterator[Any]:
        """Frames from where the decoder stands: pending ones first, then newly decoded."""
        while True:
            while self._pending:
                frame = self._pending.pop(0)
                self._last = frame
                yield frame
            if self._next > len(self._packets):
                return
            packet = self._packets[self._next] if self._next < len(self._packets) else None
            self._next += 1
            self._decoded += 1
            if self._decoded > self._budget:
                raise MediaTooLarge(
                    f"Sampling this video needs more than {self._budget} decoded frames "
                    f"({self._why})."
                )
            frames = self._codec.decode(packet)
            if self._count is not None:
                for frame in frames:
                    frame.pts, self._count = self._count, self._count + 1
            self._pending.extend(frames)


def _pts_or_inf(packet: Any) -> float:
    return packet.pts if packet.pts is not None else math.inf


def output_size(width: int, height: int, max_short_side: int | None) -> tuple[int, int]:
    """Downscale (never up) so the shorter side is at most ``max_short_side``; even sizes."""
    short = min(width, height)
    if max_short_side is None or short <= max_short_side:
        return width, height
    scale = max_short_side / short
    return max(1, round(width * scale)), max(1, round(height * scale))


def _to_rgb(frame: Any, width: int, height: int) -> np.ndarray[Any, Any]:
    """One frame to upright RGB at ``width`` x ``height`` (swscale: convert and scale in one)."""
    rotation = int(getattr(frame, "rotation", 0) or 0) % 360
    array: np.ndarray[Any, Any] = frame.to_ndarray(
        format="rgb24", width=width, height=height, interpolation="BICUBIC"
    )
    if rotation:
        array = np.ascontiguousarray(np.rot90(array, k=rotation // 90))
    return array
