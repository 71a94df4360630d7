"""decode_image on real encoded files: formats, budgets, bombs, orientation and modes."""

from __future__ import annotations

import io
import struct
import time
import warnings
import zlib
from collections.abc import Callable

import numpy as np
import pytest
from PIL import Image

from gateway.errors import MediaDecodeError, MediaTooLarge, UnsupportedMedia
from gateway.media.image import ImageLimits, decode_image, jpeg_layout, sniff_image_format

LIMITS = ImageLimits()
RED, BLUE, WHITE = (255, 0, 0), (0, 0, 255), (255, 255, 255)


def encode(image: Image.Image, fmt: str, **params: object) -> bytes:
    out = io.BytesIO()
    image.save(out, fmt, **params)
    return out.getvalue()


def halves(size: tuple[int, int] = (40, 20)) -> Image.Image:
    """Left half red, right half blue: orientation mistakes show."""
    image = Image.new("RGB", size, RED)
    image.paste(BLUE, (size[0] // 2, 0, size[0], size[1]))
    return image


def png_header_only(width: int, height: int) -> bytes:
    """A valid PNG signature and IHDR claiming ``width`` x ``height``, with almost no data."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        crc = struct.pack(">I", zlib.crc32(kind + body))
        return struct.pack(">I", len(body)) + kind + body + crc

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    idat = zlib.compress(b"\0" * 1024)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")


def near(pixel: tuple[int, ...], expected: tuple[int, int, int], tolerance: int = 12) -> bool:
    return all(abs(a - b) <= tolerance for a, b in zip(pixel, expected, strict=True))


@pytest.mark.parametrize(
    ("fmt", "params"),
    [("PNG", {}), ("JPEG", {"quality": 95}), ("WEBP", {"lossless": True}), ("GIF", {})],
)
def test_supported_formats_decode_to_rgb(fmt: str, params: dict[str, object]) -> None:
    data = encode(halves(), fmt, **params)
    assert sniff_image_format(data) == fmt
    image = decode_image(data, LIMITS)
    assert image.mode == "RGB" and image.size == (40, 20)
    assert near(image.getpixel((5, 10)), RED) and near(image.getpixel((35, 10)), BLUE)


@pytest.mark.parametrize(
    "data",
    [
        b"hello, world",
        encode(halves(), "BMP"),
        encode(halves(), "TIFF"),
        b"<svg xmlns='http://www.w3.org/2000/svg'/>",
        b"RIFF\0\0\0\0WAVEfmt ",
    ],
    ids=["text", "bmp", "tiff", "svg", "wav"],
)
def test_not_a_supported_image(data: bytes) -> None:
    with pytest.raises(
        UnsupportedMedia, match=r"not a supported image \(JPEG, PNG, WebP, GIF\)"
    ) as e:
        decode_image(data, LIMITS)
    assert e.value.code == "unsupported_media_type"


def test_empty_bytes_are_invalid_media() -> None:
    with pytest.raises(MediaDecodeError, match=r"empty \(0 bytes\)") as caught:
        decode_image(b"", LIMITS)
    assert caught.value.code == "invalid_media"


@pytest.mark.parametrize("fmt", ["PNG", "JPEG", "GIF", "WEBP"])
def test_truncated_or_corrupt(fmt: str) -> None:
    data = encode(Image.effect_noise((64, 64), 50).convert("RGB"), fmt)
    for broken in (data[: len(data) // 2], data[:16] + b"\x00" * 64):
        with pytest.raises(MediaDecodeError):
            decode_image(broken, LIMITS)


@pytest.mark.parametrize("size", [(50_000, 50_000), (100_000, 100_000), (12_000, 12_000)])
def test_decompression_bomb_refused_from_the_header(size: tuple[int, int]) -> None:
    data = png_header_only(*size)
    started = time.monotonic()
    with pytest.raises(MediaTooLarge):
        decode_image(data, LIMITS)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # PIL's warning, raised, is still ours
        with pytest.raises(MediaTooLarge):
            decode_image(data, LIMITS)
    assert time.monotonic() - started < 0.5


def _jpeg_claiming(width: int, height: int) -> bytes:
    """A real small JPEG whose start-of-frame is edited to claim another size."""
    data = bytearray(encode(halves(), "JPEG", exif=Image.Exif().tobytes()))
    sof = data.index(b"\xff\xc0")
    data[sof + 5 : sof + 9] = struct.pack(">HH", height, width)
    return bytes(data)


def _webp_claiming(width: int, height: int) -> bytes:
    """An extended (VP8X) WebP header claiming a ``width`` x ``height`` canvas."""
    body = b"VP8X" + struct.pack("<I", 10) + b"\0" * 4
    body += (width - 1).to_bytes(3, "little") + (height - 1).to_bytes(3, "little")
    return b"RIFF" + struct.pack("<I", len(body) + 4) + b"WEBP" + body


@pytest.mark.parametrize("make", [_jpeg_claiming, _webp_claiming, png_header_only])
def test_bomb_refused_in_every_format(make: Callable[[int, int], bytes]) -> None:
    started = time.monotonic()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # refused by our header check, PIL never warns
        with pytest.raises(MediaTooLarge, match="megapixels"):
            decode_image(make(30_000, 30_000), LIMITS)
    assert time.monotonic() - started < 0.5


def test_budgets_from_limits() -> None:
    data = encode(Image.new("RGB", (100, 60)), "PNG")
    assert decode_image(data, ImageLimits(max_pixels=6000)).size == (100, 60)
    with pytest.raises(MediaTooLarge, match="megapixels"):
        decode_image(data, ImageLimits(max_pixels=5999))
    with pytest.raises(MediaTooLarge, match="per side"):
        decode_image(data, ImageLimits(max_side=99))
    with pytest.raises(MediaTooLarge, match="bytes"):
        decode_image(data, ImageLimits(max_bytes=len(data) - 1))
    # With our budget lifted, PIL's own guard still answers, and as ours.
    with pytest.raises(MediaTooLarge, match="too many pixels"):
        decode_image(
            png_header_only(100_000, 100_000), ImageLimits(max_pixels=10**12, max_side=None)
        )
    # A 1 x 40M strip is within the pixel budget but not the side limit.
    with pytest.raises(MediaTooLarge, match="per side"):
        decode_image(png_header_only(40_000_000, 1), LIMITS)


@pytest.mark.parametrize(
    ("orientation", "size", "top_left", "bottom_right"),
    [
        (1, (40, 20), RED, BLUE),
        (3, (40, 20), BLUE, RED),  # 180 degrees
        (6, (20, 40), RED, BLUE),  # stored rotated: display turns it 90 degrees clockwise
        (8, (20, 40), BLUE, RED),  # 90 degrees counter-clockwise
    ],
)
def test_exif_orientation_applied(
    orientation: int,
    size: tuple[int, int],
    top_left: tuple[int, int, int],
    bottom_right: tuple[int, int, int],
) -> None:
    exif = Image.Exif()
    exif[0x0112] = orientation
    data = encode(halves(), "JPEG", quality=95, exif=exif.tobytes())
    image = decode_image(data, LIMITS)
    assert image.size == size
    assert near(image.getpixel((2, 2)), top_left)
    assert near(image.getpixel((size[0] - 3, size[1] - 3)), bottom_right)


def test_rgba_composited_on_white() -> None:
    image = Image.new("RGBA", (30, 10), (255, 0, 0, 255))
    image.paste((0, 0, 0, 0), (10, 0, 20, 10))  # transparent black
    image.paste((0, 0, 0, 128), (20, 0, 30, 10))  # half-transparent black
    rgb = decode_image(encode(image, "PNG"), LIMITS)
    assert rgb.getpixel((5, 5)) == RED
    assert rgb.getpixel((15, 5)) == WHITE
    assert near(rgb.getpixel((25, 5)), (127, 127, 127), 1)


def test_palette_transparency_and_la_on_white() -> None:
    palette = Image.new("P", (10, 10), 1)
    palette.putpalette([0, 0, 0, 0, 255, 0] + [0] * 762)
    palette.paste(0, (0, 0, 5, 10))
    for data in (encode(palette, "PNG", transparency=0), encode(palette, "GIF", transparency=0)):
        rgb = decode_image(data, LIMITS)
        assert rgb.getpixel((2, 2)) == WHITE and rgb.getpixel((7, 7)) == (0, 255, 0)
    la = Image.new("LA", (4, 4), (0, 0))
    assert decode_image(encode(la, "PNG"), LIMITS).getpixel((1, 1)) == WHITE
    grey = Image.new("L", (4, 4), 7)
    rgb = decode_image(encode(grey, "PNG", transparency=7), LIMITS)
    assert rgb.getpixel((1, 1)) == WHITE


def test_other_modes_become_rgb() -> None:
    cmyk = Image.new("CMYK", (8, 8), (0, 255, 255, 0))  # red in CMYK
    assert near(decode_image(encode(cmyk, "JPEG", quality=95), LIMITS).getpixel((4, 4)), RED)
    bilevel = Image.new("1", (8, 8), 1)
    assert decode_image(encode(bilevel, "PNG"), LIMITS).getpixel((4, 4)) == WHITE
    sixteen = Image.fromarray(np.array([[0, 32768, 65535]], dtype=np.uint16))
    rgb = decode_image(encode(sixteen, "PNG"), LIMITS)
    assert [rgb.getpixel((x, 0)) for x in range(3)] == [(0, 0, 0), (128,) * 3, WHITE]
    grey = decode_image(encode(Image.new("L", (3, 3), 99), "JPEG"), LIMITS)
    assert grey.mode == "RGB" and near(grey.getpixel((1, 1)), (99, 99, 99), 2)


@pytest.mark.parametrize("fmt", ["GIF", "WEBP", "PNG"])
def test_animation_gives_the_first_frame(fmt: str) -> None:
    frames = [Image.new("RGB", (16, 16), RED), Image.new("RGB", (16, 16), BLUE)]
    data = encode(frames[0], fmt, save_all=True, append_images=frames[1:], duration=100, loop=0)
    assert near(decode_image(data, LIMITS).getpixel((8, 8)), RED)


def test_jpeg_draft_only_when_much_larger() -> None:
    data = encode(halves((2000, 1000)), "JPEG", quality=90)
    assert decode_image(data, LIMITS).size == (2000, 1000)
    reduced = decode_image(data, LIMITS, target_size=(448, 224), draft_margin=2)
    assert reduced.size == (1000, 500)  # 1/2 scale: still >= 2x the target on both sides
    assert decode_image(data, LIMITS, target_size=(448, 224)).size == (1000, 500)
    assert decode_image(data, LIMITS, target_size=(336, 168)).size == (1000, 500)  # not 1/4
    assert decode_image(data, LIMITS, target_size=(448, 224), draft_margin=0).size == (2000, 1000)
    assert near(reduced.getpixel((10, 10)), RED) and near(reduced.getpixel((990, 490)), BLUE)
    assert decode_image(data, LIMITS, target_size=(1500, 700)).size == (2000, 1000)
    assert decode_image(data, LIMITS, target_size=(330, 165)).size == (500, 250)  # 1/4


def test_jpeg_draft_respects_orientation() -> None:
    exif = Image.Exif()
    exif[0x0112] = 6
    data = encode(halves((2000, 1000)), "JPEG", quality=90, exif=exif.tobytes())
    # Upright it is 1000 x 2000; a target of 250 x 500 allows 1/2 scale on the stored image.
    assert decode_image(data, LIMITS, target_size=(250, 500)).size == (500, 1000)


def test_result_outlives_the_buffer() -> None:
    image = decode_image(encode(halves(), "PNG"), LIMITS)
    assert np.asarray(image).shape == (20, 40, 3)


def test_an_rgb_jpeg_is_handed_back_as_decoded_not_copied() -> None:
    # A copy of the decoded image (one pass over its pixels) would carry no format.
    image = decode_image(encode(halves((64, 32)), "JPEG", quality=95), LIMITS)
    assert image.format == "JPEG" and image.mode == "RGB"
    pixels = np.asarray(image)  # usable: the source was not closed under it
    assert pixels.shape == (32, 64, 3) and near(tuple(pixels[4, 4]), RED)


def test_jpeg_layout_reads_mode_size_and_orientation_from_the_header() -> None:
    exif = Image.Exif()
    exif[0x0112] = 6
    turned = encode(halves((40, 20)), "JPEG", exif=exif.tobytes())
    assert jpeg_layout(turned, LIMITS) == ("RGB", (40, 20), 6)  # as stored: not turned
    assert jpeg_layout(encode(halves((40, 20)), "JPEG"), LIMITS) == ("RGB", (40, 20), 1)
    grey = encode(Image.new("L", (30, 10), 128), "JPEG")
    assert jpeg_layout(grey, LIMITS) == ("L", (30, 10), 1)
    cmyk = encode(Image.new("CMYK", (16, 24), (0, 50, 100, 0)), "JPEG")
    assert jpeg_layout(cmyk, LIMITS) == ("CMYK", (16, 24), 1)


def test_jpeg_layout_holds_the_size_to_the_limits() -> None:
    data = encode(Image.new("RGB", (100, 60)), "JPEG")
    assert jpeg_layout(data, ImageLimits(max_pixels=6000))[1] == (100, 60)
    with pytest.raises(MediaTooLarge, match="megapixels"):
        jpeg_layout(data, ImageLimits(max_pixels=5999))
    with pytest.raises(MediaTooLarge, match="per side"):
        jpeg_layout(data, ImageLimits(max_side=99))
    with pytest.raises(MediaTooLarge, match="megapixels"):
        jpeg_layout(_jpeg_claiming(8_000, 8_000), LIMITS)  # 64 MP: past ours, not PIL's


def test_jpeg_layout_refuses_a_bomb_past_pils_own_guard_as_too_large() -> None:
    with pytest.raises(MediaTooLarge):
        jpeg_layout(_jpeg_claiming(30_000, 30_000), LIMITS)


@pytest.mark.parametrize(
    "data",
    [b"\xff\xd8" + bytes(range(256)) * 4, b"\xff\xd8\xff", encode(halves(), "PNG")],
    ids=["garbage_after_soi", "soi_only", "a_png"],
)
def test_jpeg_layout_refuses_what_pil_cannot_read_as_a_jpeg(data: bytes) -> None:
    with pytest.raises(MediaDecodeError):
        jpeg_layout(data, LIMITS)
