"""vLLM's frame-list video (``data:video/jpeg;base64,<f1>,<f2>,...``): parsed into a distinct
kind, each frame decoded as an image under the video's limits, sampled like a video."""

from __future__ import annotations

import base64

import pytest

from gateway.errors import MediaDecodeError, MediaTooLarge, MediaURLError, UnsupportedMedia
from gateway.media.local import FrameList, decode_data_url
from gateway.media.video import FrameSampling, VideoLimits
from gateway.media.video_frames import decode_frame_list
from tests.gateway.media.frame_lists import frame_images, frame_list_url
from tests.gateway.media.samples import frame_index

LIMITS = VideoLimits()
MAX_BYTES = 1 << 20


def frame_list(images: list[bytes], media_type: str = "video/jpeg") -> FrameList:
    parsed = decode_data_url(frame_list_url(images, media_type), MAX_BYTES)
    assert isinstance(parsed, FrameList)
    return parsed


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def test_a_frame_list_is_its_own_kind() -> None:
    parsed = frame_list(frame_images(3), "VIDEO/JPEG")  # media types are case-insensitive
    assert parsed.count == 3 and parsed.url == "data:video/jpeg"
    single = decode_data_url("data:video/jpeg;base64," + b64(frame_images(1)[0]), MAX_BYTES)
    assert isinstance(single, FrameList) and single.count == 1


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("data:video/jpeg,abc,def", "a list of base64 frames"),
        ("data:video/jpeg;base64,", "holds no frames"),
        ("data:video/jpeg;base64,QUJD,", "an empty frame"),
        ("data:video/jpeg;base64,,QUJD", "an empty frame"),
        ("data:video/jpeg;base64,QUJD,,QUJD", "an empty frame"),
        ("data:video/png;base64,QUJD,QUJD", "takes the media type video/jpeg"),  # not vLLM's
        ("data:image/jpeg;base64,QUJD,QUJD", "takes the media type video/jpeg"),
    ],
)
def test_malformed_lists_are_refused_by_form(url: str, words: str) -> None:
    with pytest.raises(MediaURLError, match=words):
        decode_data_url(url, MAX_BYTES)


def test_frames_are_sampled_like_a_video() -> None:
    frames = decode_frame_list(frame_list(frame_images(20)), LIMITS, FrameSampling(5))
    assert frames.shape == (5, 48, 64, 3)
    assert [frame_index(f) for f in frames] == [0, 5, 10, 14, 19]
    assert (frames[:, :6, :8] > 240).all()


def test_fewer_frames_than_asked_and_no_timing() -> None:
    short = decode_frame_list(frame_list(frame_images(3)), LIMITS, FrameSampling(8))
    assert [frame_index(f) for f in short] == [0, 1, 2]
    # The frames carry no timing: fps has nothing to act on; num_frames alone samples.
    frames = decode_frame_list(frame_list(frame_images(20)), LIMITS, FrameSampling(4, fps=0.1))
    assert [frame_index(f) for f in frames] == [0, 6, 13, 19]


def test_downscaled_and_other_image_formats() -> None:
    images = frame_images(10, size=(128, 96), fmt="PNG")  # vLLM's loader opens any image
    frames = decode_frame_list(frame_list(images), LIMITS, FrameSampling(3, max_short_side=48))
    assert frames.shape == (3, 48, 64, 3)
    assert [frame_index(f) for f in frames] == [0, 4, 9]


def test_budgets() -> None:
    images = frame_images(30)
    with pytest.raises(MediaTooLarge, match="has 30 frames, over the limit of 20 frames"):
        decode_frame_list(frame_list(images), VideoLimits(max_frames=20), FrameSampling(4))
    with pytest.raises(MediaTooLarge, match="frame 1 of 30: The image is 64x48, over the lim"):
        decode_frame_list(frame_list(images), VideoLimits(max_side=32), FrameSampling(4))
    with pytest.raises(MediaTooLarge, match=r"frame 1 of 30: The image is 64x48 .* megapixels"):
        decode_frame_list(frame_list(images), VideoLimits(max_pixels=1000), FrameSampling(4))
    size = sum(map(len, images))
    with pytest.raises(MediaTooLarge, match=f"over the limit of {size - 1} bytes"):
        decode_frame_list(frame_list(images), VideoLimits(max_bytes=size - 1), FrameSampling(4))
    with pytest.raises(MediaTooLarge, match="more than 2 decoded frames"):
        decode_frame_list(frame_list(images), VideoLimits(max_decoded_frames=2), FrameSampling(4))


def test_every_frame_is_checked_only_the_sampled_decoded() -> None:
    images = frame_images(5)
    bad_base64 = FrameList(",".join([*map(b64, images[:2]), "@@@@", b64(images[3])]), 4)
    with pytest.raises(MediaURLError, match=r"Frame 3 of 4 .* is not valid base64") as e:
        decode_frame_list(bad_base64, LIMITS, FrameSampling(2))  # frame 3 is not sampled
    assert e.value.code == "invalid_video_url"
    blank = FrameList(f"{b64(images[0])}, \n,{b64(images[1])}", 3)
    with pytest.raises(MediaURLError, match=r"Frame 2 of 3 .* is empty") as e:
        decode_frame_list(blank, LIMITS, FrameSampling(2))
    assert e.value.code == "invalid_video_url"
    text = FrameList(",".join([b64(images[0]), b64(b"plain text"), b64(images[1])]), 3)
    with pytest.raises(UnsupportedMedia, match=r"Frame 2 of 3 .* not a supported image"):
        decode_frame_list(text, LIMITS, FrameSampling(2))
    truncated = [*images[:4], images[4][: len(images[4]) // 3]]
    with pytest.raises(MediaDecodeError, match="frame 5 of 5: The image could not be decoded"):
        decode_frame_list(frame_list(truncated), LIMITS, FrameSampling(2))
    decode_frame_list(frame_list(truncated), LIMITS, FrameSampling(1))  # frame 5 not sampled


def test_frames_of_one_video_share_one_size() -> None:
    mixed = frame_images(3) + frame_images(1, size=(32, 32))
    with pytest.raises(MediaDecodeError, match="frame 1 is 64x48, frame 4 is 32x32"):
        decode_frame_list(frame_list(mixed), LIMITS, FrameSampling(4))
