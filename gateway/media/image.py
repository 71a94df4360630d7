"""Turn untrusted image bytes into an upright RGB ``PIL.Image``, or a clear 4xx error.

Only JPEG, PNG, WebP and GIF are accepted, recognised by their magic bytes (not by the declared
content type, which the sender controls). The pixel budget is checked from the header, before
any pixel is decoded, so a tiny file claiming 50k x 50k costs nothing. EXIF orientation is
applied, and every mode ends as RGB with transparency composited on white, as Hugging Face's
``convert_to_rgb`` does. PIL's errors are translated here, once.

Synchronous on purpose: decoding is CPU work, and the caller runs it in a bounded worker pool.
Model-specific resizing and normalisation belong to ``families/``.
"""

from __future__ import annotations

import contextlib
import io
import math
import struct
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
from PIL import Image, ImageOps

from gateway.errors import MediaDecodeError, MediaError, MediaTooLarge, UnsupportedMedia
from gateway.media import limits

__all__ = [
    "DEFAULT_DRAFT_MARGIN",
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_PIXELS",
    "DEFAULT_MAX_SIDE",
    "ImageHeader",
    "ImageLimits",
    "decode_image",
    "jpeg_layout",
    "read_header",
    "sniff_image_format",
    "to_rgb",
]

DEFAULT_MAX_BYTES = limits.DEFAULT_MAX_BYTES
DEFAULT_MAX_PIXELS = limits.DEFAULT_MAX_PIXELS
DEFAULT_MAX_SIDE = limits.DEFAULT_MAX_IMAGE_SIDE

SUPPORTED_FORMATS = "JPEG, PNG, WebP, GIF"
_EXIF_ORIENTATION = 0x0112
_SWAPS_AXES = frozenset({5, 6, 7, 8})  # orientations that rotate by 90 or 270 degrees
# Decode JPEGs at >= 1.5x the target size, so the final resize still filters (measured against
# a full decode: within 4-7 of 255 levels at worst, ~0.5 on average, on photographic content).
DEFAULT_DRAFT_MARGIN = limits.DEFAULT_DRAFT_MARGIN
_WHITE = (255, 255, 255, 255)
_HEADER_STEPS = 256  # JPEG segments read_header walks before giving up
# Start-of-frame markers of one-pass JPEGs: baseline and extended sequential, Huffman-coded.
_SEQUENTIAL_HUFFMAN = frozenset({0xC0, 0xC1})

# What PIL raises on malformed input; it has no common base class for "bad file".
_PIL_ERRORS = (
    OSError,
    SyntaxError,
    ValueError,
    EOFError,
    struct.error,
    IndexError,
    KeyError,
    TypeError,
    ZeroDivisionError,
)


@dataclass(frozen=True)
class ImageLimits:
    """What one image may cost: encoded bytes, decoded pixels, and the longest side."""

    max_bytes: int = DEFAULT_MAX_BYTES
    max_pixels: int = DEFAULT_MAX_PIXELS
    max_side: int | None = DEFAULT_MAX_SIDE


def sniff_image_format(data: bytes) -> str | None:
    """The PIL format name of ``data`` from its magic bytes, if it is one we accept."""
    if data.startswith(b"\xff\xd8\xff"):
        return "JPEG"
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "PNG"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "GIF"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "WEBP"
    return None


@dataclass(frozen=True)
class ImageHeader:
    """What the first bytes of an image say, read without PIL: its format (None: not one we
    accept), its (width, height) when the header states it, and whether its pixel data is
    coded in one pass (every format but progressive, arithmetic-coded or lossless JPEG, whose
    decoding time grows with the number of scans as well as the pixels)."""

    format: str | None
    size: tuple[int, int] | None
    single_pass: bool


def read_header(data: bytes) -> ImageHeader:
    """The format, declared size and coding of ``data``, from its header alone (no PIL).

    Cheap enough for the event loop: a JPEG's marker walk stops after ``_HEADER_STEPS``
    segments (real files reach their frame header in a dozen or so), saying "size unknown".
    """
    image_format = sniff_image_format(data)
    if image_format is None:
        return ImageHeader(None, None, single_pass=False)
    if image_format == "JPEG":
        frame = _jpeg_frame(data, _HEADER_STEPS)
        if frame is None:
            return ImageHeader(image_format, None, single_pass=False)
        marker, size = frame
        return ImageHeader(image_format, size, single_pass=marker in _SEQUENTIAL_HUFFMAN)
    return ImageHeader(image_format, _header_size(data, image_format), single_pass=True)


def decode_image(
    data: bytes,
    limits: ImageLimits,
    *,
    target_size: tuple[int, int] | None = None,
    draft_margin: float = DEFAULT_DRAFT_MARGIN,
) -> Image.Image:
    """Decode ``data`` to an upright RGB image (the first frame of an animation).

    ``target_size`` is the (width, height) the caller will resize to next, upright. When a
    JPEG is much larger, it is decoded at a reduced scale (JPEG draft mode, 1/2 to 1/8), which
    is several times faster; the result is then at least ``draft_margin`` times
    ``target_size`` on both sides. Leave it None (or the margin 0) when pixels must match a
    full-resolution decode exactly.

    Raises MediaTooLarge (bytes or pixels over ``limits``), UnsupportedMedia (not one of
    the accepted formats) or MediaDecodeError (empty, truncated, corrupt).
    """
    if not data:
        raise MediaDecodeError("The image is empty (0 bytes).")
    if len(data) > limits.max_bytes:
        raise MediaTooLarge(
            f"The image is {len(data)} bytes, over the limit of {limits.max_bytes} bytes."
        )
    image_format = sniff_image_format(data)
    if image_format is None:
        raise UnsupportedMedia(f"The media is not a supported image ({SUPPORTED_FORMATS}).")
    header_size = _header_size(data, image_format)
    if header_size is not None and min(header_size) > 0:  # 0 (a GIF may say so): let PIL judge
        _check_pixel_budget(header_size, limits)  # before PIL: WebP allocates its canvas on open
    image: Image.Image | None = None
    rgb: Image.Image | None = None
    corrupt = f"the {_display(image_format)} data is truncated or corrupt"
    try:
        with _pil_failures(corrupt):
            image = Image.open(io.BytesIO(data), formats=[image_format])
            _check_pixel_budget(image.size, limits)  # again, as PIL read it
            if image_format == "JPEG" and target_size is not None and draft_margin > 0:
                _draft(image, target_size, draft_margin)
            image.load()
            rgb = to_rgb(_upright(image))
            return rgb
    finally:
        # Closing drops the decoded pixels, so the source is left open when it is the result
        # (an RGB file, the usual case) instead of copying it: once loaded, PIL reads no more
        # from the in-memory file, which the result alone keeps alive.
        if image is not None and image is not rgb:
            image.close()


def jpeg_layout(data: bytes, limits: ImageLimits) -> tuple[str, tuple[int, int], int]:
    """A JPEG's mode, (width, height) and EXIF orientation as PIL reads its header, without
    decoding a pixel; the size held to ``limits``. For a decoder other than PIL's
    (``media/cuda_jpeg.py``), which must turn out the image PIL would: upright and RGB.

    Raises MediaTooLarge past the limits, MediaDecodeError where PIL cannot read the header.
    """
    with (
        _pil_failures("the JPEG header is corrupt"),
        Image.open(io.BytesIO(data), formats=["JPEG"]) as image,
    ):
        _check_pixel_budget(image.size, limits)
        return image.mode, image.size, _orientation(image)


@contextlib.contextmanager
def _pil_failures(corrupt: str) -> Iterator[None]:
    """PIL's failures as the gateway's: its own bomb guard (a warning counts if warnings are
    errors) -> MediaTooLarge, a malformed file -> MediaDecodeError saying ``corrupt``."""
    try:
        yield
    except (Image.DecompressionBombError, Image.DecompressionBombWarning):
        raise MediaTooLarge("The image has too many pixels to decode.") from None
    except MediaError:
        raise
    except _PIL_ERRORS as exc:
        raise MediaDecodeError(f"The image could not be decoded: {corrupt}.") from exc


def _display(image_format: str) -> str:
    return "WebP" if image_format == "WEBP" else image_format


def _header_size(data: bytes, image_format: str) -> tuple[int, int] | None:
    """(width, height) as the file header declares it, read without PIL; None if unclear."""
    if image_format == "PNG" and len(data) >= 24:
        return struct.unpack(">II", data[16:24])
    if image_format == "GIF" and len(data) >= 10:
        return struct.unpack("<HH", data[6:10])
    if image_format == "WEBP":
        return _webp_size(data)
    if image_format == "JPEG":
        frame = _jpeg_frame(data)
        return frame[1] if frame is not None else None
    return None


def _webp_size(data: bytes) -> tuple[int, int] | None:
    """Canvas size from the first chunk: extended (VP8X), lossy (VP8) or lossless (VP8L)."""
    chunk = data[12:16]
    if chunk == b"VP8X" and len(data) >= 30:
        width = 1 + int.from_bytes(data[24:27], "little")
        return width, 1 + int.from_bytes(data[27:30], "little")
    if chunk == b"VP8 " and len(data) >= 30:
        width, height = struct.unpack("<HH", data[26:30])
        return width & 0x3FFF, height & 0x3FFF
    if chunk == b"VP8L" and len(data) >= 25:
        bits = int.from_bytes(data[21:25], "little")
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    return None


def _jpeg_frame(data: bytes, max_steps: int | None = None) -> tuple[int, tuple[int, int]] | None:
    """Walk the JPEG markers to the first start-of-frame: its marker and dimensions.

    ``max_steps`` bounds the walk (None when nothing else bounds it than the caller's time
    budget): a crafted file of zero-length segments or fill bytes takes a step per 1-2 bytes.
    """
    offset = 2
    steps = 0
    while offset + 9 <= len(data):
        steps += 1
        if max_steps is not None and steps > max_steps:
            return None
        if data[offset] != 0xFF:
            return None
        marker = data[offset + 1]
        if marker == 0xFF:  # fill byte
            offset += 1
        elif marker == 0x01 or 0xD0 <= marker <= 0xD8:  # markers without a length
            offset += 2
        elif 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            height, width = struct.unpack(">HH", data[offset + 5 : offset + 9])
            return marker, (width, height)
        else:
            offset += 2 + int.from_bytes(data[offset + 2 : offset + 4], "big")
    return None


def _check_pixel_budget(size: tuple[int, int], limits: ImageLimits) -> None:
    """Refuse by the header's dimensions, before a single pixel is allocated."""
    width, height = size
    if width <= 0 or height <= 0:
        raise MediaDecodeError(f"The image has an invalid size {width}x{height}.")
    if width * height > limits.max_pixels:
        raise MediaTooLarge(
            f"The image is {width}x{height} ({width * height / 1e6:.1f} megapixels), over the "
            f"limit of {limits.max_pixels / 1e6:g} megapixels."
        )
    if limits.max_side is not None and max(width, height) > limits.max_side:
        raise MediaTooLarge(
            f"The image is {width}x{height}, over the limit of {limits.max_side} pixels per side."
        )


def _orientation(image: Image.Image) -> int:
    try:
        return int(image.getexif().get(_EXIF_ORIENTATION, 1))
    except _PIL_ERRORS:
        return 1  # unreadable EXIF: treat as upright rather than refuse the picture


def _draft(image: Image.Image, target_size: tuple[int, int], margin: float) -> None:
    """Ask the JPEG decoder for a reduced scale that still covers ``margin`` x the target."""
    width, height = target_size
    if _orientation(image) in _SWAPS_AXES:
        width, height = height, width  # the target is upright; the stored image is not
    image.draft(image.mode, (math.ceil(width * margin), math.ceil(height * margin)))


def _upright(image: Image.Image) -> Image.Image:
    """Apply the EXIF orientation; a corrupt EXIF block leaves the image as stored."""
    if _orientation(image) == 1:
        return image
    try:
        return ImageOps.exif_transpose(image)
    except _PIL_ERRORS:
        return image


def to_rgb(image: Image.Image) -> Image.Image:
    """Any PIL mode to RGB; alpha and palette/tRNS transparency are composited on white.

    16-bit greyscale keeps its top 8 bits (PIL's own conversion clips it to 255 instead).
    """
    if image.mode == "RGB":
        return image
    if image.mode.startswith("I"):
        image = _sixteen_bit_to_l(image)
    has_alpha = any(band in ("A", "a") for band in image.getbands())
    if has_alpha or image.info.get("transparency") is not None:
        rgba = image.convert("RGBA")
        white = Image.new("RGBA", rgba.size, _WHITE)
        return Image.alpha_composite(white, rgba).convert("RGB")
    return image.convert("RGB")


def _sixteen_bit_to_l(image: Image.Image) -> Image.Image:
    """16-bit (``I;16*``) or 32-bit integer greyscale from a 16-bit PNG, scaled to 8 bits."""
    values = np.asarray(image).astype(np.int64)
    scaled = (np.clip(values, 0, 65535) >> 8).astype(np.uint8)
    result = Image.fromarray(scaled)
    transparency = image.info.get("transparency")
    if isinstance(transparency, int):
        result.info["transparency"] = transparency >> 8
    return result
