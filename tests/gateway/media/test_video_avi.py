"""AVI and MPEG-4 Part 2 (Xvid, DivX, OpenCV's mp4v): sampled exactly as MP4 is, under the
same budgets; H.264 in AVI (no presentation times) decoded from its start."""

from __future__ import annotations

import io

import av
import av.logging
import pytest

from gateway.errors import MediaDecodeError, MediaTooLarge
from gateway.media._av import open_bytes
from gateway.media.video import FrameSampling, VideoLimits, decode_video, sniff_container
from tests.gateway.media.samples import encode_video, frame_index, frame_pattern

LIMITS = VideoLimits()
B_FRAMES = {"bf": "2"}


@pytest.mark.parametrize(
    ("codec", "container", "options", "gop"),
    [
        ("mpeg4", "avi", None, None),
        ("mpeg4", "avi", B_FRAMES, 6),  # reordered frames, several keyframes
        ("libx264", "avi", None, None),  # x264's default B-frames: AVI keeps no pts for them
        ("libx264", "avi", {"bf": "0"}, 6),
        ("mpeg4", "mp4", B_FRAMES, None),  # mp4v, as OpenCV writes it
        ("mpeg4", "matroska", None, None),
    ],
    ids=["mpeg4-avi", "mpeg4-bframes-avi", "h264-avi", "h264-ip-avi", "mpeg4-mp4", "mpeg4-mkv"],
)
def test_uniform_frames(codec: str, container: str, options: dict | None, gop: int) -> None:
    clip = encode_video(frames=20, codec=codec, container=container, options=options, gop=gop)
    frames = decode_video(clip, LIMITS, FrameSampling(5))
    assert frames.shape == (5, 48, 64, 3)
    assert [frame_index(f) for f in frames] == [0, 5, 10, 14, 19]
    assert (frames[:, :6, :8] > 240).all()  # the top-left marker, upright


def test_sniffed_by_riff_form_type() -> None:
    clip = encode_video(codec="mpeg4", container="avi")
    assert clip[:4] == b"RIFF" and clip[8:12] == b"AVI " and sniff_container(clip) == "avi"
    for other in (b"WAVE", b"WEBP", b"AVIX"):  # WAV, WebP, an OpenDML continuation alone
        assert sniff_container(clip[:8] + other + clip[12:]) is None


def test_mpeg4_in_avi_seeks_to_keyframes() -> None:
    clip = encode_video(frames=60, codec="mpeg4", container="avi", gop=6, options=B_FRAMES)
    frames = decode_video(clip, VideoLimits(max_decoded_frames=36), FrameSampling(4))
    assert [frame_index(f) for f in frames] == [0, 20, 39, 59]


def test_h264_in_avi_is_decoded_from_its_start() -> None:
    clip = encode_video(frames=40, codec="libx264", container="avi", gop=6)
    frames = decode_video(clip, VideoLimits(max_decoded_frames=41), FrameSampling(8))
    assert [frame_index(f) for f in frames] == [0, 6, 11, 17, 22, 28, 33, 39]
    with pytest.raises(MediaTooLarge, match=r"H\.264 in AVI is decoded from its start"):
        decode_video(clip, VideoLimits(max_decoded_frames=30), FrameSampling(8))


def test_fps_and_downscale() -> None:
    clip = encode_video(frames=20, codec="mpeg4", container="avi")
    frames = decode_video(clip, LIMITS, FrameSampling(8, fps=1, max_short_side=24))
    assert frames.shape == (2, 24, 32, 3)  # 2 s at 1 fps; 64 x 48 -> 32 x 24
    assert [frame_index(f) for f in frames] == [0, 19]


@pytest.mark.parametrize("codec", ["mpeg4", "libx264"])
def test_every_budget_holds(codec: str) -> None:
    clip = encode_video(frames=30, codec=codec, container="avi")
    cases = [
        (VideoLimits(max_frames=20), "30 frames, over the limit of 20 frames"),
        (VideoLimits(max_duration_s=1), r"long, over the limit of 1 s"),
        (VideoLimits(max_side=32), "64x48, over the limit of 32 pixels per side"),
        (VideoLimits(max_bytes=100), "bytes, over the limit of 100 bytes"),
    ]
    for limits, words in cases:
        with pytest.raises(MediaTooLarge, match=words):
            decode_video(clip, limits, FrameSampling(4))


def test_a_lying_header_is_caught_by_the_packet_count() -> None:
    clip = bytearray(encode_video(frames=30, codec="mpeg4", container="avi"))
    avih = clip.index(b"avih") + 8
    clip[avih + 16 : avih + 20] = (3).to_bytes(4, "little")  # dwTotalFrames
    strh = clip.index(b"strh") + 8
    clip[strh + 32 : strh + 36] = (3).to_bytes(4, "little")  # dwLength
    with pytest.raises(MediaTooLarge, match="over the limit of 20 frames"):
        decode_video(bytes(clip), VideoLimits(max_frames=20), FrameSampling(4))


def test_truncated_and_corrupt() -> None:
    clip = encode_video(frames=20, codec="mpeg4", container="avi")
    for broken in (clip[:200], clip[:12] + bytes(300)):
        with pytest.raises(MediaDecodeError, match="AVI data is truncated or corrupt") as e:
            decode_video(broken, LIMITS, FrameSampling(4))
        assert e.value.code == "invalid_media"


def two_streams(second: str) -> bytes:
    """An AVI whose first stream is MPEG-4 Part 2 and whose second is ``second``."""
    buffer = io.BytesIO()
    with av.open(buffer, "w", format="avi") as output:
        streams = [output.add_stream(codec, rate=10) for codec in ("mpeg4", second)]
        for stream in streams:
            stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"
        for index in range(10):
            image = frame_pattern(index, 64, 48)
            for stream in streams:
                output.mux(stream.encode(av.VideoFrame.from_ndarray(image, "rgb24")))
        for stream in streams:
            output.mux(stream.encode())
    return buffer.getvalue()


def test_opening_runs_no_decoder_outside_the_allowlist() -> None:
    """FFmpeg decodes a few frames of every stream while opening (to learn its parameters):
    a second stream in a codec outside the allowlist must not get its decoder run."""
    clip = two_streams("msmpeg4v2")
    av.logging.set_level(av.logging.ERROR)
    try:
        with av.logging.Capture() as logs, open_bytes(clip, "avi", ("mpeg4",)) as container:
            names = [stream.codec_context.name for stream in container.streams.video]
    finally:
        av.logging.set_level(None)
    assert names == ["mpeg4", "msmpeg4v2"]
    assert any("(msmpeg4v2) not on whitelist" in message for _, _, message in logs)
    frames = decode_video(clip, LIMITS, FrameSampling(3))
    assert [frame_index(f) for f in frames] == [0, 4, 9]  # the first stream, as ever
