"""AVI / MPEG-4 Part 2 and vLLM's frame-list video through the gateway: the sampled frames
reach Triton's video_bytes_input; malformed ones are 400s that name the part."""

from __future__ import annotations

import httpx
import numpy as np
import pytest

from tests.fakes.app import assert_openai_error, chat, data_url, image_part
from tests.fakes.triton import FakeTriton
from tests.gateway.media.frame_lists import frame_images, frame_list_url
from tests.gateway.media.samples import encode_video, frame_index

URL = "/v1/chat/completions"


def ask_video(url: str, num_frames: int = 4, **fields: object) -> dict:
    content = [{"type": "video_url", "video_url": {"url": url}}, {"type": "text", "text": "?"}]
    body = chat(content, "fake-onevision", max_tokens=2, **fields)
    body["media_io_kwargs"] = {"video": {"num_frames": num_frames}}
    return body


def sent_frames(fake: FakeTriton) -> np.ndarray:
    (request,) = fake.requests
    video = request.inputs["video_bytes_input"]
    assert video.dtype == np.uint8 and video.ndim == 5 and video.shape[0] == 1
    return video[0]


@pytest.mark.parametrize(
    ("codec", "options"),
    [("mpeg4", None), ("mpeg4", {"bf": "2"}), ("libx264", None)],
    ids=["xvid-like", "b-frames", "h264"],
)
async def test_avi_video(
    http: httpx.AsyncClient, fake: FakeTriton, codec: str, options: dict | None
) -> None:
    clip = encode_video(frames=20, codec=codec, container="avi", options=options)
    response = await http.post(URL, json=ask_video(data_url(clip, "video/x-msvideo")))
    assert response.status_code == 200, response.text
    frames = sent_frames(fake)
    assert frames.shape == (4, 48, 64, 3)
    assert [frame_index(f) for f in frames] == [0, 6, 13, 19]


async def test_mpeg4_in_mp4(http: httpx.AsyncClient, fake: FakeTriton) -> None:
    clip = encode_video(frames=20, codec="mpeg4", container="mp4")  # OpenCV's "mp4v"
    response = await http.post(URL, json=ask_video(data_url(clip, "video/mp4")))
    assert response.status_code == 200, response.text
    assert [frame_index(f) for f in sent_frames(fake)] == [0, 6, 13, 19]


async def test_a_codec_avi_may_hold_but_we_do_not(http: httpx.AsyncClient) -> None:
    clip = encode_video(codec="msmpeg4v2", container="avi")
    response = await http.post(URL, json=ask_video(data_url(clip, "video/avi")))
    error = assert_openai_error(response, 400, "unsupported_media_type")
    assert error["param"] == "messages[0].content[0]"
    assert error["message"] == (
        "video 1 of 1: The video codec is not supported in AVI (allowed: MPEG-4 Part 2, H.264)."
    )


async def test_frame_list_video(http: httpx.AsyncClient, fake: FakeTriton) -> None:
    url = frame_list_url(frame_images(20))
    response = await http.post(URL, json=ask_video(url, num_frames=5))
    assert response.status_code == 200, response.text
    frames = sent_frames(fake)
    assert frames.shape == (5, 48, 64, 3)
    assert [frame_index(f) for f in frames] == [0, 5, 10, 14, 19]


async def test_the_same_frames_reuse_the_same_id(http: httpx.AsyncClient, fake: FakeTriton) -> None:
    """A frame list's content id is its sampled pixels': the same list twice, the same id."""
    url = frame_list_url(frame_images(6))
    for _ in range(2):
        assert (await http.post(URL, json=ask_video(url))).status_code == 200
    first, second = (r.scalar("prompt_table_extra_id") for r in fake.requests)
    assert first is not None and first == second


@pytest.mark.parametrize(
    ("url", "code", "words"),
    [
        ("data:video/jpeg;base64,QUJD,,QUJD", "invalid_video_url", "an empty frame"),
        ("data:video/jpeg,abc", "invalid_video_url", "a list of base64 frames"),
        ("data:video/png;base64,QUJD,QUJD", "invalid_video_url", "media type video/jpeg"),
        ("data:video/jpeg;base64,{jpeg},@@@@", "invalid_video_url", "2 of 2 in the video/jpeg"),
        ("data:video/jpeg;base64,QUJD,QUJD", "unsupported_media_type", "not a supported image"),
    ],
)
async def test_malformed_frame_lists(
    http: httpx.AsyncClient, fake: FakeTriton, url: str, code: str, words: str
) -> None:
    url = url.format(jpeg=frame_list_url(frame_images(1)).partition(",")[2])
    error = assert_openai_error(await http.post(URL, json=ask_video(url)), 400, code)
    assert words in error["message"] and error["param"] == "messages[0].content[0]"
    assert fake.requests == []


async def test_a_frame_list_in_an_image_part(http: httpx.AsyncClient, fake: FakeTriton) -> None:
    body = chat([image_part(frame_list_url(frame_images(2)))], "fake-llava", max_tokens=2)
    error = assert_openai_error(await http.post(URL, json=body), 400, "invalid_image_url")
    assert "send it in a video_url part" in error["message"]
    assert fake.requests == []
