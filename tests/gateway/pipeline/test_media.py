"""prepare_media: checks before fetching, per-kind codes, video tensors, content identity."""

from __future__ import annotations

import base64
import io
from collections.abc import AsyncIterator

import numpy as np
import pytest
from PIL import Image

from gateway.config import (
    AudioSettings,
    MediaSettings,
    ServedModel,
    Settings,
)
from gateway.errors import GatewayError, InvalidRequest, TooManyMediaItems
from gateway.families.registry import get_family
from gateway.location import Location
from gateway.media.fetch import MediaFetcher
from gateway.media.identity import ExtraIdRegistry
from gateway.media.offload import Offloader, OffloadLimits
from gateway.observability.metrics import GatewayMetrics
from gateway.pipeline._media_jobs import image_digest_inputs
from gateway.pipeline.conversation import MediaPart
from gateway.pipeline.media import prepare_media
from gateway.protocol.chat import MediaIOKwargs
from gateway.served import ServedRuntime
from gateway.services import Media
from tests.gateway.media.samples import encode_audio, encode_video, frame_index, sine


def data_url(data: bytes, media_type: str) -> str:
    return f"data:{media_type};base64," + base64.b64encode(data).decode()


def picture(fmt: str, seed: int = 0, **save: object) -> bytes:
    rng = np.random.default_rng(seed)
    pixels = rng.integers(0, 256, (48, 64, 3), dtype=np.uint8)
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, fmt, **save)
    return out.getvalue()


def image(url: str, where: Location = ("messages", 0, "content", 0)) -> MediaPart:
    return MediaPart("image", where, url=url)


def video(url: str, where: Location = ("messages", 0, "content", 0)) -> MediaPart:
    return MediaPart("video", where, url=url)


@pytest.fixture(scope="module")
async def media() -> AsyncIterator[Media]:
    settings = Settings(media=MediaSettings(max_images_per_request=2, content_id_salt=""))
    offload = Offloader(OffloadLimits(workers=1), preload=("gateway.pipeline._media_jobs",))
    await offload.start()
    fetcher = MediaFetcher()
    yield Media.of(fetcher, offload, settings.media, GatewayMetrics())
    await fetcher.aclose()
    await offload.aclose()


def served(family: str, model_id: str = "m") -> ServedRuntime:
    config = ServedModel(id=model_id, family=family, triton_model="t", triton_url="fake:1")
    return ServedRuntime(config, get_family(family), client=None)  # type: ignore[arg-type]


async def extra_id(media: Media, *urls: str, model: str = "m") -> int | None:
    prepared = await prepare_media([image(u) for u in urls], served("llava", model), media)
    assert prepared is not None
    return prepared.extra_id


async def test_same_bytes_same_id_and_any_difference_a_new_one(media: Media) -> None:
    png = await extra_id(media, data_url(picture("PNG"), "image/png"))
    assert png is not None
    assert await extra_id(media, data_url(picture("PNG"), "application/octet-stream")) == png
    # The digest covers the source bytes: identical pixels in another encoding get another id
    # (no reuse, never a wrong one); other pixels, another model, two images: all differ.
    webp = await extra_id(media, data_url(picture("WEBP", lossless=True), "image/webp"))
    other = await extra_id(media, data_url(picture("PNG", seed=1), "image/png"))
    other_model = await extra_id(media, data_url(picture("PNG"), "image/png"), model="m2")
    two = await extra_id(media, *[data_url(picture("PNG"), "image/png")] * 2)
    pair = await extra_id(
        media, data_url(picture("PNG"), "image/png"), data_url(picture("PNG", 1), "image/png")
    )
    swapped = await extra_id(
        media, data_url(picture("PNG", 1), "image/png"), data_url(picture("PNG"), "image/png")
    )
    assert len({png, webp, other, other_model, two, pair, swapped}) == 7


def test_the_image_digest_names_the_decoders() -> None:
    from PIL import __version__ as pillow

    digest = image_digest_inputs("m", get_family("llava"), "draft=1.5")
    assert f"pillow={pillow};jpeg=" in digest.options and "draft=1.5" in digest.options
    assert digest.kind == "image:source"


async def test_tenant_salt_changes_the_id(media: Media) -> None:
    url = data_url(picture("PNG"), "image/png")
    plain = await extra_id(media, url)
    salted_settings = Settings(media=MediaSettings(content_id_salt="tenant-a"))
    plane = media.plane
    salted = Media.of(plane.fetcher, plane.decoder, salted_settings.media, media.metrics)
    assert await extra_id(salted, url) not in (plain, None)


async def test_a_64_bit_collision_sends_no_id(media: Media) -> None:
    url = data_url(picture("PNG", seed=5), "image/png")
    first = await extra_id(media, url)
    assert first is not None
    registry = ExtraIdRegistry()
    registry.extra_id(first.to_bytes(8, "big") + b"another content".ljust(24, b"\0"))
    plane = media.plane
    colliding = Media.of(plane.fetcher, plane.decoder, media.settings, media.metrics, registry)
    assert await extra_id(colliding, url) is None
    assert registry.collisions == 1


@pytest.mark.parametrize(
    ("part", "family"),
    [
        (video("http://127.0.0.1:9/v.mp4"), "llava"),
        (
            MediaPart("audio", ("messages", 0, "content", 0), url="http://127.0.0.1:9/a.wav"),
            "llava",
        ),
        (MediaPart("audio", ("messages", 0, "content", 0), data="AAAA"), "llava_onevision"),
    ],
)
async def test_kinds_a_model_does_not_take_are_refused_before_fetching(
    media: Media, part: MediaPart, family: str
) -> None:
    with pytest.raises(InvalidRequest, match=f"does not accept {part.kind} input") as caught:
        await prepare_media([part], served(family), media)
    assert caught.value.code == "unsupported_content_part"
    assert caught.value.param == "messages[0].content[0]"


async def test_counts_and_mixes(media: Media) -> None:
    url = "http://127.0.0.1:9/x"
    with pytest.raises(TooManyMediaItems, match="3 images; model 'm' accepts at most 2") as e:
        await prepare_media([image(url)] * 3, served("llava"), media)
    assert e.value.code == "too_many_media_items"
    with pytest.raises(TooManyMediaItems, match="2 videos"):
        await prepare_media([video(url)] * 2, served("llava_onevision"), media)
    with pytest.raises(InvalidRequest, match="mixes image and video"):
        await prepare_media([image(url), video(url)], served("llava_onevision"), media)


@pytest.mark.parametrize("family", ["mllama", "llava_onevision", "qwen2_vl"])
async def test_a_second_raw_image_is_refused_naming_the_part_and_the_limit(
    media: Media, family: str
) -> None:
    """NVIDIA's preprocessing reads one image_bytes_input image per request for these
    families (tensorrtllm_backend all_models/inflight_batcher_llm/preprocessing/1/model.py
    @c2e65b88d85255be30cf50440a91662abeb497dd): the second fails inside Triton, so the gateway
    refuses it first, naming it."""
    url = "http://127.0.0.1:9/x"
    parts = [image(url, ("messages", 1, "content", 0)), image(url, ("messages", 1, "content", 2))]
    with pytest.raises(TooManyMediaItems) as info:
        await prepare_media(parts, served(family), media)
    assert info.value.param == "messages[1].content[2]" and info.value.status_code == 400
    assert info.value.message.startswith("messages[1].content[2] is image 2 of this request")
    assert "at most 1 per request" in info.value.message
    assert "image_bytes_input" in info.value.message


@pytest.mark.parametrize(
    ("part", "code"),
    [
        (image("ftp://example.com/a.png"), "invalid_image_url"),
        (video("http://169.254.169.254/latest"), "invalid_video_url"),
        (video("data:video/mp4;base64,@@@"), "invalid_video_url"),
    ],
)
async def test_url_refusals_name_the_kind(media: Media, part: MediaPart, code: str) -> None:
    family = "llava" if part.kind == "image" else "llava_onevision"
    with pytest.raises(GatewayError) as caught:
        await prepare_media([part], served(family), media)
    assert caught.value.code == code and caught.value.status_code == 400


async def test_failures_name_the_part(media: Media) -> None:
    good = image(data_url(picture("PNG"), "image/png"), ("messages", 0, "content", 0))
    bad = image(data_url(b"not an image", "image/png"), ("messages", 1, "content", 2))
    with pytest.raises(GatewayError) as caught:
        await prepare_media([good, bad], served("llava"), media)
    assert caught.value.code == "unsupported_media_type"
    assert caught.value.message.startswith("image 2 of 2: ")
    assert caught.value.param == "messages[1].content[2]"


async def test_video_becomes_video_bytes_input(media: Media) -> None:
    clip = data_url(encode_video(frames=30, size=(64, 48)), "video/mp4")
    options = MediaIOKwargs.model_validate({"video": {"num_frames": 4}})
    prepared = await prepare_media([video(clip)], served("llava_onevision"), media, options)
    assert prepared is not None and prepared.tensor is not None
    name, tensor = prepared.tensor
    assert name == "video_bytes_input"
    assert tensor.shape == (1, 4, 48, 64, 3) and tensor.dtype == np.uint8
    assert [frame_index(f) for f in tensor[0]] == [0, 10, 19, 29]
    default = await prepare_media([video(clip)], served("llava_onevision"), media)
    assert default is not None and default.tensor is not None
    assert default.tensor[1].shape[1] == 8  # video_num_frames
    assert default.extra_id not in (None, prepared.extra_id)


@pytest.mark.parametrize(
    ("options", "param"),
    [
        ({"video": {"num_frames": 33}}, "media_io_kwargs.video.num_frames"),
        ({"video": {"fps": 60}}, "media_io_kwargs.video.fps"),
    ],
)
async def test_sampling_options_within_server_limits(
    media: Media, options: dict, param: str
) -> None:
    parsed = MediaIOKwargs.model_validate(options)
    with pytest.raises(InvalidRequest) as caught:
        await prepare_media(
            [video("http://127.0.0.1:9/v")], served("llava_onevision"), media, parsed
        )
    assert caught.value.param == param


async def test_load_audio_from_input_audio(media: Media) -> None:
    wav = encode_audio(sine(0.5, 16_000), 16_000, "wav")
    part = MediaPart("audio", ("w",), data=base64.b64encode(wav).decode(), format="wav")
    prepared = await prepare_media([part], served("whisper"), media)
    assert prepared is not None and prepared.samples is not None and prepared.tensor is None
    assert prepared.samples.dtype == np.float32 and prepared.samples.shape == (8000,)
    with pytest.raises(GatewayError) as caught:
        bad = MediaPart("audio", ("w",), data="!!", format="wav")
        await prepare_media([bad], served("whisper"), media)
    assert caught.value.code == "invalid_media"


async def test_audio_over_the_duration_limit(media: Media) -> None:
    short = Settings(media=MediaSettings(audio=AudioSettings(max_duration_s=1)))
    plane = media.plane
    limited = Media.of(plane.fetcher, plane.decoder, short.media, media.metrics)
    wav = encode_audio(sine(2.0, 16_000), 16_000, "wav")
    part = MediaPart("audio", ("w",), url=data_url(wav, "audio/wav"))
    with pytest.raises(GatewayError, match=r"2\.0 s long, over the limit of 1 s") as caught:
        await prepare_media([part], served("whisper"), limited)
    assert caught.value.code == "media_too_large"
