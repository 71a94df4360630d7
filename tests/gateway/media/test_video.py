"""decode_video on PyAV-generated clips: allowlists, limits, and frame sampling by seeking."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from gateway.errors import MediaDecodeError, MediaTooLarge, UnsupportedMedia
from gateway.media.video import (
    FrameSampling,
    VideoLimits,
    decode_video,
    sample_indices,
    sniff_container,
)
from tests.gateway.media.samples import encode_video, frame_index

LIMITS = VideoLimits()


@pytest.fixture(scope="module")
def clip() -> bytes:
    return encode_video(frames=20)  # 64 x 48, 10 fps, H.264 in MP4


@pytest.mark.parametrize("codec", ["libx264", "libvpx-vp9", "libvpx"])
def test_uniform_frames_from_each_codec(codec: str) -> None:
    frames = decode_video(encode_video(frames=20, codec=codec), LIMITS, FrameSampling(5))
    assert frames.dtype == np.uint8 and frames.shape == (5, 48, 64, 3)
    assert [frame_index(f) for f in frames] == [0, 5, 10, 14, 19]
    assert (frames[:, :6, :8] > 240).all()  # the top-left marker, upright


def test_sample_indices() -> None:
    assert sample_indices(20, 2.0, FrameSampling(5)) == [0, 5, 10, 14, 19]
    assert sample_indices(3, 0.3, FrameSampling(8)) == [0, 1, 2]  # never more than exist
    assert sample_indices(100, 10.0, FrameSampling(1)) == [0]
    assert sample_indices(100, 9.9, FrameSampling(32, fps=0.5)) == [0, 33, 66, 99]  # 4 frames
    assert sample_indices(100, 0.5, FrameSampling(32, fps=1)) == [0]
    with pytest.raises(ValueError):
        FrameSampling(0)


def test_fps_and_downscale(clip: bytes) -> None:
    frames = decode_video(clip, LIMITS, FrameSampling(8, fps=1, max_short_side=24))
    assert frames.shape == (2, 24, 32, 3)  # 1.9 s at 1 fps; 64 x 48 -> 32 x 24
    assert [frame_index(f) for f in frames] == [0, 19]


def test_seeking_decodes_only_what_sampling_needs() -> None:
    clip = encode_video(frames=60, gop=6)
    # Four frames need at most ~4 GOPs (plus reorder delay), far fewer than all 60.
    budget = VideoLimits(max_decoded_frames=36)
    frames = decode_video(clip, budget, FrameSampling(4))
    assert [frame_index(f) for f in frames] == [0, 20, 39, 59]


def test_sparse_keyframes_never_decode_twice() -> None:
    clip = encode_video(frames=40, gop=1000)  # one keyframe: every target decodes from it
    frames = decode_video(clip, VideoLimits(max_decoded_frames=42), FrameSampling(8))
    assert [frame_index(f) for f in frames] == [0, 6, 11, 17, 22, 28, 33, 39]
    with pytest.raises(MediaTooLarge, match="more than 20 decoded frames"):
        decode_video(clip, VideoLimits(max_decoded_frames=20), FrameSampling(8))


@pytest.mark.parametrize("codec", ["libx264", "libvpx-vp9"])  # MP4 declares a count, WebM not
def test_too_many_frames(codec: str) -> None:
    clip = encode_video(frames=30, codec=codec)
    with pytest.raises(MediaTooLarge, match="over the limit of 20 frames") as caught:
        decode_video(clip, VideoLimits(max_frames=20), FrameSampling(4))
    assert caught.value.code == "media_too_large"


def test_too_long_and_too_wide(clip: bytes) -> None:
    with pytest.raises(MediaTooLarge, match=r"long, over the limit of 1 s"):
        decode_video(clip, VideoLimits(max_duration_s=1), FrameSampling(4))
    with pytest.raises(MediaTooLarge, match="64x48, over the limit of 32 pixels per side"):
        decode_video(clip, VideoLimits(max_side=32), FrameSampling(4))
    with pytest.raises(MediaTooLarge, match="bytes, over the limit of 100 bytes"):
        decode_video(clip, VideoLimits(max_bytes=100), FrameSampling(4))


@pytest.mark.parametrize(
    "data",
    [
        b"#EXTM3U\n#EXT-X-VERSION:3\n#EXTINF:10,\nhttp://169.254.169.254/seg.ts\n",
        b"ffconcat version 1.0\nfile '/etc/passwd'\n",
        b'<?xml version="1.0"?><MPD xmlns="urn:mpeg:dash:schema:mpd:2011"></MPD>',
        b"\x00\x00\x01\xba" + b"\x00" * 60,  # MPEG-PS
        b"GIF89a" + b"\x00" * 60,
    ],
    ids=["hls", "concat", "dash", "mpeg-ps", "gif"],
)
def test_playlists_and_other_containers_are_refused(data: bytes) -> None:
    assert sniff_container(data) is None
    with pytest.raises(UnsupportedMedia, match="not a supported video") as e:
        decode_video(data, LIMITS, FrameSampling(4))
    assert "(MP4, WebM/Matroska or AVI)" in e.value.message
    assert e.value.code == "unsupported_media_type"


@pytest.mark.parametrize(
    ("codec", "container", "allowed"),
    [
        ("mpeg2video", "mp4", "H.264, HEVC, VP8, VP9, AV1, MPEG-4 Part 2"),
        ("msmpeg4v2", "avi", "MPEG-4 Part 2, H.264"),  # DivX 3: not MPEG-4 Part 2
        ("libvpx-vp9", "avi", "MPEG-4 Part 2, H.264"),  # allowed in MP4/WebM, not in AVI
    ],
)
def test_codec_outside_the_allowlist(codec: str, container: str, allowed: str) -> None:
    clip = encode_video(codec=codec, container=container)
    with pytest.raises(UnsupportedMedia, match="codec is not supported") as e:
        decode_video(clip, LIMITS, FrameSampling(4))
    assert e.value.message.endswith(f"(allowed: {allowed}).")


def test_empty_truncated_and_corrupt(clip: bytes) -> None:
    with pytest.raises(MediaDecodeError, match="empty"):
        decode_video(b"", LIMITS, FrameSampling(4))
    for broken in (clip[: len(clip) // 2], clip[:40] + bytes(200)):
        with pytest.raises(MediaDecodeError, match="MP4 data is truncated or corrupt") as e:
            decode_video(broken, LIMITS, FrameSampling(4))
        assert e.value.code == "invalid_media"


def test_display_matrix_rotation_is_applied(clip: bytes) -> None:
    """A phone's portrait clip: stored landscape, with a 'rotate 90 degrees clockwise' matrix."""
    box = clip.index(b"tkhd")
    matrix_at = box + 4 + 4 + 5 * 4 + 8 + 4 * 2  # version/flags, 5 fields, reserved, 4 shorts
    matrix = struct.pack(">9i", 0, 0x10000, 0, -0x10000, 0, 0, 0, 0, 0x40000000)
    rotated = clip[:matrix_at] + matrix + clip[matrix_at + 36 :]
    frames = decode_video(rotated, LIMITS, FrameSampling(1))
    assert frames.shape == (1, 64, 48, 3)
    assert (frames[0, :6, -8:] > 240).all() and (frames[0, :6, :8] < 20).all()  # now top-right
