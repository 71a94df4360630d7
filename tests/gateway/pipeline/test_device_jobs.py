"""Still JPEGs prepared on a device (``[decode] device``): the job, and the pipeline's use of it.

nvJPEG cannot run here, so a fake decoder stands in for ``CudaJpeg`` behind the
``DeviceDecoder`` seam (``ThreadLane.device``); the family's recipe runs in torch on the CPU,
as ``_pixels_torch`` would on the GPU. What is checked: the device's pixels are PIL's within the
recipe's rounding, every declined image still goes to PIL, and a KV-reuse id is never shared
between pixels from the device and pixels from PIL.
"""

from __future__ import annotations

import base64
import io
import struct
import threading
from collections.abc import AsyncIterator
from typing import Any

import numpy as np
import pytest
from PIL import Image

from bench.media.inputs import photo_jpeg
from gateway.config import MediaSettings, ServedModel
from gateway.errors import MediaError, MediaTooLarge
from gateway.families._pixels import CLIP_336, PixelSpec
from gateway.families.llava import Llava
from gateway.families.registry import get_family
from gateway.media.cuda_jpeg import DeviceImage, NotForDevice
from gateway.media.decoder import InProcessDecoder
from gateway.media.fetch import MediaFetcher
from gateway.media.identity import ExtraIdRegistry
from gateway.media.image import ImageLimits, jpeg_layout
from gateway.media.offload import OffloadLimits
from gateway.media.threads import ThreadLimits
from gateway.observability.metrics import GatewayMetrics
from gateway.pipeline import _media_jobs
from gateway.pipeline._media_jobs import DigestInputs, image_digest_inputs
from gateway.pipeline.conversation import MediaPart
from gateway.pipeline.media import prepare_media
from gateway.served import ServedRuntime
from gateway.services import Media

torch = pytest.importorskip("torch")
from gateway.pipeline._device_jobs import prepare_image_on_device  # noqa: E402

TAG = "fake-nvjpeg:1"
LLAVA = get_family("llava")


class FakeNvJpeg:
    """Stands in for CudaJpeg (nvJPEG cannot run here); the contract is DeviceDecoder's: uint8
    [3, H, W] as stored plus its EXIF orientation; declines (NotForDevice) what CudaJpeg
    declines: a header PIL cannot read, a mode other than L or RGB."""

    device = "cpu"
    tag = TAG

    def __init__(self) -> None:
        self.calls = 0
        self._lock = threading.Lock()

    def decode(self, data: bytes, limits: ImageLimits) -> DeviceImage:
        with self._lock:
            self.calls += 1
        try:
            mode, _, orientation = jpeg_layout(data, limits)
        except MediaError as exc:
            raise NotForDevice(exc.message) from None
        if mode not in ("L", "RGB"):
            raise NotForDevice(f"a {mode} JPEG")
        with Image.open(io.BytesIO(data)) as image:
            stored = np.asarray(image.convert("RGB")).copy()  # not turned: the recipe turns it
        return DeviceImage(torch.from_numpy(stored).permute(2, 0, 1), orientation)


class LanczosLlava(Llava):
    """A recipe whose filter torch does not antialias as PIL does: never the device's."""

    pixel_spec = PixelSpec(
        shortest_edge=336,
        resample=Image.Resampling.LANCZOS,
        crop_size=(336, 336),
        image_mean=CLIP_336.image_mean,
        image_std=CLIP_336.image_std,
    )


def levels_off(ours: np.ndarray[Any, Any], pil: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """|difference| in uint8 levels (one level is 1 / 255 / std after normalisation)."""
    assert CLIP_336.image_std is not None
    level = 1 / 255 / np.asarray(CLIP_336.image_std).reshape(3, 1, 1)
    off: np.ndarray[Any, Any] = np.abs(ours.astype(np.float32) - pil.astype(np.float32)) / level
    return off


def encode(image: Image.Image, fmt: str = "JPEG", **params: object) -> bytes:
    out = io.BytesIO()
    image.save(out, fmt, **params)
    return out.getvalue()


def turned_jpeg() -> bytes:
    """Stored 480 wide, 640 tall; EXIF orientation 6 makes it 640 x 480 upright."""
    stored = Image.open(io.BytesIO(photo_jpeg(480, 640, seed=7))).convert("RGB")
    exif = Image.Exif()
    exif[0x0112] = 6
    return encode(stored, quality=90, exif=exif.tobytes())


PHOTO = photo_jpeg(640, 480, seed=640)
PHOTO_2 = photo_jpeg(500, 400, seed=5)
CMYK = encode(Image.new("CMYK", (64, 48), (10, 200, 30, 40)))
GREY = encode(Image.fromarray(np.tile(np.arange(64, dtype=np.uint8) * 4, (48, 1)), "L"))
PNG = encode(Image.new("RGB", (64, 48), (20, 120, 220)), "PNG")
DIGEST = image_digest_inputs("m", LLAVA, "draft=off")


# --- the job ----------------------------------------------------------------------------------


@pytest.mark.parametrize("data", [PHOTO, turned_jpeg(), GREY], ids=["photo", "exif_6", "grey"])
def test_the_device_job_gives_pils_pixels_within_two_levels(data: bytes) -> None:
    device = prepare_image_on_device(data, ImageLimits(), LLAVA, FakeNvJpeg(), DIGEST)
    cpu = _media_jobs.prepare_image(data, ImageLimits(), LLAVA, 0.0, DIGEST)  # no draft
    assert device is not None
    assert device.array.dtype == np.float16 and device.array.shape == (3, 336, 336)
    assert device.array.shape == cpu.array.shape
    assert device.size == cpu.size  # (height, width) prepared from, upright
    assert levels_off(device.array, cpu.array).max() <= 2.1
    assert device.decoder == TAG and cpu.decoder is None


def test_the_device_jobs_digest_is_a_kind_of_its_own() -> None:
    device = prepare_image_on_device(PHOTO, ImageLimits(), LLAVA, FakeNvJpeg(), DIGEST)
    cpu = _media_jobs.prepare_image(PHOTO, ImageLimits(), LLAVA, 0.0, DIGEST)
    assert device is not None and device.digest is not None and cpu.digest is not None
    assert device.digest != cpu.digest  # same bytes, same inputs: other pixels, other id
    assert device.digest == DIGEST.decoded_by(TAG).digest([np.frombuffer(PHOTO, np.uint8)])
    assert cpu.digest == DIGEST.digest([np.frombuffer(PHOTO, np.uint8)])
    assert DIGEST.decoded_by(TAG).kind != DIGEST.kind
    assert DIGEST.decoded_by(TAG) != DIGEST.decoded_by("another-decoder:2")


def test_without_digest_inputs_the_job_hashes_nothing() -> None:
    device = prepare_image_on_device(PHOTO, ImageLimits(), LLAVA, FakeNvJpeg())
    assert device is not None and device.digest is None and device.decoder == TAG


@pytest.mark.parametrize(
    "data",
    [CMYK, b"\xff\xd8" + bytes(range(256)) * 4],
    ids=["cmyk", "unreadable_header"],
)
def test_what_the_device_declines_is_pils(data: bytes) -> None:
    fake = FakeNvJpeg()
    assert prepare_image_on_device(data, ImageLimits(), LLAVA, fake, DIGEST) is None
    assert fake.calls == 1


class OutOfMemory(FakeNvJpeg):
    """The fake, on a device whose memory has run out (torch raises a RuntimeError)."""

    def decode(self, data: bytes, limits: ImageLimits) -> DeviceImage:
        image = super().decode(data, limits)
        return DeviceImage(_Exhausted(image.pixels), image.orientation)


class _Exhausted:
    """Pixels whose first use on the device fails as torch.OutOfMemoryError does."""

    def __init__(self, pixels: Any) -> None:
        self.shape = pixels.shape

    def __getattr__(self, name: str) -> Any:
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 MiB")

    def __getitem__(self, index: Any) -> Any:
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 MiB")


def test_a_device_failure_is_pils_to_decode_not_the_clients_error() -> None:
    assert prepare_image_on_device(PHOTO, ImageLimits(), LLAVA, OutOfMemory(), DIGEST) is None


def test_over_the_limits_the_device_declines_and_pil_refuses() -> None:
    fake = FakeNvJpeg()
    small = ImageLimits(max_pixels=640 * 480 - 1)
    assert prepare_image_on_device(PHOTO, small, LLAVA, fake, DIGEST) is None
    with pytest.raises(MediaError, match="megapixels"):
        _media_jobs.prepare_image(PHOTO, small, LLAVA, 0.0, DIGEST)  # PIL has the last word


@pytest.mark.parametrize(
    "family", [get_family("qwen2_vl"), LanczosLlava()], ids=["none", "lanczos"]
)
def test_a_recipe_the_device_cannot_run_never_reaches_it(family: Any) -> None:
    fake = FakeNvJpeg()
    assert prepare_image_on_device(PHOTO, ImageLimits(), family, fake, DIGEST) is None
    assert fake.calls == 0  # declined before decoding


# --- the pipeline -----------------------------------------------------------------------------


def data_url(data: bytes) -> str:
    media_type = "image/png" if data.startswith(b"\x89PNG") else "image/jpeg"
    return f"data:{media_type};base64," + base64.b64encode(data).decode()


def served(family: str) -> ServedRuntime:
    config = ServedModel(id="m", family=family, triton_model="t", triton_url="fake:1")
    return ServedRuntime(config, get_family(family), client=None)  # type: ignore[arg-type]


def parts(*images: bytes) -> list[MediaPart]:
    return [
        MediaPart("image", ("messages", 0, "content", i), url=data_url(b))
        for i, b in enumerate(images)
    ]


def tally(media: Media, fake: FakeNvJpeg) -> tuple[float, float, int]:
    """Images decoded on the device and declined by it (the metric), and the fake's calls."""
    return counted(media, "decoded"), counted(media, "declined"), fake.calls


def grown(before: tuple[float, ...], after: tuple[float, ...]) -> tuple[float, ...]:
    return tuple(a - b for a, b in zip(after, before, strict=True))


def counted(media: Media, outcome: str) -> float:
    registry = media.metrics.registry  # type: ignore[attr-defined]
    value = registry.get_sample_value("mmgw_media_device_images_total", {"outcome": outcome})
    return value or 0.0


async def extra_id(media: Media, *images: bytes, family: str = "llava") -> int | None:
    prepared = await prepare_media(parts(*images), served(family), media)
    assert prepared is not None
    return prepared.extra_id


def lane_limits() -> OffloadLimits:
    return OffloadLimits(workers=1, threads=ThreadLimits(threads=2))


@pytest.fixture(scope="module")
async def fetcher() -> AsyncIterator[MediaFetcher]:
    fetcher = MediaFetcher()
    yield fetcher
    await fetcher.aclose()


@pytest.fixture(scope="module")
async def on_device(fetcher: MediaFetcher) -> AsyncIterator[tuple[Media, FakeNvJpeg]]:
    decoder = InProcessDecoder(lane_limits())
    assert decoder.threads is not None and decoder.threads.device is None  # device = "cpu"
    fake = FakeNvJpeg()
    decoder.threads.device = fake  # the seam: what ThreadLane builds for device = "cuda"
    settings = MediaSettings(max_images_per_request=2, content_id_salt="")
    yield Media.of(fetcher, decoder, settings, GatewayMetrics()), fake
    await decoder.aclose()


@pytest.fixture(scope="module")
async def on_cpu(fetcher: MediaFetcher) -> AsyncIterator[Media]:
    decoder = InProcessDecoder(lane_limits())
    settings = MediaSettings(max_images_per_request=2, content_id_salt="")
    yield Media.of(fetcher, decoder, settings, GatewayMetrics())
    await decoder.aclose()


def expected_id(images: list[bytes], kinds: list[str]) -> int | None:
    """The id from the digest's definition: model "m", llava, the default draft margin."""
    digest = image_digest_inputs("m", LLAVA, f"draft={MediaSettings().image.jpeg_draft_margin:g}")
    arrays = [np.frombuffer(image, np.uint8) for image in images]
    return ExtraIdRegistry().extra_id(digest.digest(arrays, kinds))


def kinds(*decoders: str | None) -> list[str]:
    base = DigestInputs("", "", _media_jobs.IMAGE_SOURCE_KIND)
    return [base.decoded_by(d).kind if d else base.kind for d in decoders]


async def test_a_jpeg_is_decoded_on_the_device_under_an_id_of_its_own(
    on_device: tuple[Media, FakeNvJpeg], on_cpu: Media
) -> None:
    media, fake = on_device
    before = tally(media, fake)
    device_id = await extra_id(media, PHOTO)
    assert grown(before, tally(media, fake)) == (1, 0, 1)  # decoded, declined, fake's calls
    cpu_id = await extra_id(on_cpu, PHOTO)
    assert device_id is not None and cpu_id is not None
    assert device_id != cpu_id  # KV safety: other pixels never reuse PIL's cache
    assert device_id == expected_id([PHOTO], kinds(TAG))
    assert cpu_id == expected_id([PHOTO], kinds(None))
    assert await extra_id(media, PHOTO) == device_id  # the same bytes again: the same id
    assert counted(media, "decoded") == before[0] + 2


async def test_the_device_gives_the_tensor_pil_gives_within_the_recipes_rounding(
    on_device: tuple[Media, FakeNvJpeg], on_cpu: Media
) -> None:
    media, _ = on_device
    ours = await prepare_media(parts(PHOTO), served("llava"), media)
    pil = await prepare_media(parts(PHOTO), served("llava"), on_cpu)
    assert ours is not None and pil is not None
    assert ours.tensor is not None and pil.tensor is not None
    assert ours.tensor[0] == pil.tensor[0] == "image_input"
    a, b = ours.tensor[1], pil.tensor[1]
    assert a.shape == b.shape == (1, 1, 3, 336, 336) and a.dtype == b.dtype == np.float16
    # PIL here decodes in draft mode (halving 640 x 480): a level or so more than full decoding
    assert levels_off(a.reshape(3, 336, 336), b.reshape(3, 336, 336)).mean() < 1.0


async def test_several_images_are_hashed_each_under_its_decoders_kind(
    on_device: tuple[Media, FakeNvJpeg], on_cpu: Media
) -> None:
    media, _ = on_device
    decoded = counted(media, "decoded")
    two = await extra_id(media, PHOTO, PHOTO_2)
    assert counted(media, "decoded") == decoded + 2
    cpu_two = await extra_id(on_cpu, PHOTO, PHOTO_2)
    assert two is not None and cpu_two is not None and two != cpu_two
    assert two == expected_id([PHOTO, PHOTO_2], kinds(TAG, TAG))
    assert cpu_two == expected_id([PHOTO, PHOTO_2], kinds(None, None))
    # A PNG beside a JPEG: PIL's kind for the one, the device's for the other.
    mixed = await extra_id(media, PNG, PHOTO)
    assert mixed == expected_id([PNG, PHOTO], kinds(None, TAG))
    assert mixed != await extra_id(on_cpu, PNG, PHOTO)


async def test_a_png_goes_to_pil(on_device: tuple[Media, FakeNvJpeg], on_cpu: Media) -> None:
    media, fake = on_device
    before = tally(media, fake)
    png_id = await extra_id(media, PNG)
    assert grown(before, tally(media, fake)) == (0, 0, 0)
    assert png_id is not None and png_id == await extra_id(on_cpu, PNG)


async def test_a_jpeg_the_device_declines_is_decoded_by_pil_under_pils_id(
    on_device: tuple[Media, FakeNvJpeg], on_cpu: Media
) -> None:
    media, fake = on_device
    before = tally(media, fake)
    cmyk_id = await extra_id(media, CMYK)
    assert grown(before, tally(media, fake)) == (0, 1, 1)
    assert cmyk_id is not None and cmyk_id == await extra_id(on_cpu, CMYK)


@pytest.mark.parametrize("family", ["llava_onevision", "qwen2_vl"])
async def test_a_family_without_a_pixel_recipe_never_touches_the_device(
    on_device: tuple[Media, FakeNvJpeg], family: str
) -> None:
    media, fake = on_device
    before = tally(media, fake)
    prepared = await prepare_media(parts(PHOTO), served(family), media)
    assert prepared is not None
    assert grown(before, tally(media, fake)) == (0, 0, 0)


def two_frames(width: int, height: int) -> bytes:
    """A small start-of-frame (64 x 48, what the lane reads) in front of one claiming
    ``width`` x ``height`` (what PIL reads): the lane takes it, PIL sees the larger size."""
    real = bytearray(encode(Image.new("RGB", (64, 48), (1, 2, 3))))
    sof = real.index(b"\xff\xc0")
    real[sof + 5 : sof + 9] = struct.pack(">HH", height, width)
    small = b"\xff\xc0" + struct.pack(">HBHHB", 11, 8, 48, 64, 1) + b"\x01\x11\x00"
    return bytes(real[:2] + small + real[2:])


async def test_a_header_that_lied_is_refused_as_pil_refuses_it(
    on_device: tuple[Media, FakeNvJpeg], on_cpu: Media
) -> None:
    media, _ = on_device
    lied = two_frames(9000, 9000)  # 81 MP: past the limits, within PIL's own guard
    assert media.plane.decoder.threads is not None
    assert media.plane.decoder.threads.limits.takes(lied)
    declined = counted(media, "declined")
    with pytest.raises(MediaTooLarge) as on_cpus:
        await prepare_media(parts(lied), served("llava"), on_cpu)
    with pytest.raises(MediaTooLarge) as on_devices:
        await prepare_media(parts(lied), served("llava"), media)
    assert on_devices.value.message == on_cpus.value.message
    assert counted(media, "declined") == declined + 1


async def test_a_header_that_lied_past_pils_guard_is_refused_as_pil_refuses_it(
    on_device: tuple[Media, FakeNvJpeg], on_cpu: Media
) -> None:
    media, _ = on_device
    lied = two_frames(30_000, 30_000)  # 900 MP: PIL's Image.open raises, not warns
    with pytest.raises(MediaTooLarge):
        await prepare_media(parts(lied), served("llava"), on_cpu)
    with pytest.raises(MediaTooLarge):
        await prepare_media(parts(lied), served("llava"), media)
