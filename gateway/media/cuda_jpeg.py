"""Still JPEGs decoded on a CUDA device (nvJPEG, through torchvision): ``[decode] device``.

Why: a 1024 px photo takes 6-7 ms to decode on one core of the H100 host (libjpeg's entropy
decoding is serial, and JPEG draft decoding only halves it). nvJPEG decodes it in under a
millisecond, and the family's resize and normalisation follow on the device
(``families/_pixels_torch.py``): the whole job is 1-2 ms of wall time (bench/RESULTS.md,
"Issue 28, fifth round").

What changes is the pixels. nvJPEG's chroma upsampling and inverse DCT are not libjpeg's: a
decoded photo differs from PIL's by about 1.3 of 255 levels on average (up to 11-14 at sharp
colour edges). A downscale averages most of it away: 1024 px to CLIP's 336 differs from PIL's
full decode by 0.24 levels on average, 2 at most, which is closer than the CPU path's draft
decoding gets (0.5, 4). So the content digest names this decoder (``tag``): a KV-reuse id is
never shared between pixels from it and pixels from PIL.

What it takes: what the thread lane takes (a one-pass JPEG the header bounds), in a colour
space PIL reads as greyscale or RGB (YCbCr). CMYK and Adobe YCCK, anything PIL cannot read
the header of, and anything the device fails on are PIL's to decode (``NotForDevice``), and
PIL then has the last word, errors included. EXIF orientation is applied on the device.

The job runs in the thread lane, under its budget; torch releases the GIL in its calls.
torch and torchvision are imported only when a gateway is configured for a device (the
``cuda`` extra), never by worker processes.
"""

from __future__ import annotations

import importlib
import io
import logging
import threading
from dataclasses import dataclass
from typing import Any, Protocol

from PIL import Image

from gateway.errors import MediaError
from gateway.media.image import ImageLimits, jpeg_layout

__all__ = ["CudaJpeg", "DeviceDecoder", "DeviceImage", "NotForDevice", "open_device"]

log = logging.getLogger("mmgw.media")
_DEVICE_MODES = frozenset({"L", "RGB"})  # PIL's modes for greyscale and YCbCr JPEGs


class NotForDevice(Exception):
    """This image is PIL's to decode (not an error of the request)."""


@dataclass(frozen=True)
class DeviceImage:
    """An image decoded on the device, as stored: EXIF orientation not yet applied."""

    pixels: Any  # torch.Tensor, uint8 [3, height, width] on the device
    orientation: int  # EXIF orientation, 1 (upright) to 8


class DeviceDecoder(Protocol):
    """What the pipeline's device job needs of a decoder (``CudaJpeg``, or a test's)."""

    device: str
    tag: str  # names the decoder and its versions in the content digest

    def decode(self, data: bytes, limits: ImageLimits) -> DeviceImage: ...


def open_device(device: str) -> DeviceDecoder | None:
    """The decoder ``[decode] device`` names: None for "cpu", else ``CudaJpeg`` (ValueError
    saying why when the device cannot be used)."""
    return None if device == "cpu" else CudaJpeg(device)


class CudaJpeg:
    """nvJPEG on one CUDA device. Started once per gateway process, warmed at start (the
    CUDA context and nvJPEG's handle take a second or more, which no request should pay)."""

    def __init__(self, device: str) -> None:
        try:
            self._torch = importlib.import_module("torch")
            vision = importlib.import_module("torchvision")
            self._io = importlib.import_module("torchvision.io")
        except ImportError as exc:
            raise ValueError(
                f"[decode] device = {device!r} needs torch and torchvision built for CUDA "
                f"(pip install 'multimodal-gateway[cuda]'): {exc}"
            ) from None
        cuda = self._torch.cuda
        if not cuda.is_available():
            raise ValueError(f"[decode] device = {device!r}, but torch sees no CUDA device")
        self.device = device
        self._device = self._torch.device(device)
        count = cuda.device_count()
        if (self._device.index or 0) >= count:
            raise ValueError(f"[decode] device = {device!r}, but torch sees {count} CUDA device(s)")
        name = cuda.get_device_name(self._device)
        versions = f"torch={self._torch.__version__};torchvision={vision.__version__}"
        self.tag = f"nvjpeg:{versions};cuda={self._torch.version.cuda};gpu={name}"
        self._broken: str | None = None
        self._lock = threading.Lock()
        try:
            self.decode(_tiny_jpeg(), ImageLimits())
        except NotForDevice as exc:  # a torchvision without nvJPEG, a device that fails
            raise ValueError(f"[decode] device = {device!r} cannot decode a JPEG: {exc}") from None
        log.info("decoding still JPEGs on %s (%s)", device, name)

    def decode(self, data: bytes, limits: ImageLimits) -> DeviceImage:
        """``data`` decoded on the device (NotForDevice: PIL's to decode)."""
        if self._broken is not None:
            raise NotForDevice(self._broken)
        try:
            mode, size, orientation = jpeg_layout(data, limits)
        except MediaError as exc:
            raise NotForDevice(exc.message) from None
        if mode not in _DEVICE_MODES:
            raise NotForDevice(f"a {mode} JPEG")
        source = self._torch.frombuffer(bytearray(data), dtype=self._torch.uint8)
        try:
            pixels = self._io.decode_jpeg(
                source, mode=self._io.ImageReadMode.RGB, device=self._device
            )
        except RuntimeError as exc:
            self._check_device(exc)
            raise NotForDevice(f"nvJPEG: {exc}") from None
        if tuple(pixels.shape) != (3, size[1], size[0]):
            raise NotForDevice(f"nvJPEG decoded {tuple(pixels.shape)}, the header says {size}")
        return DeviceImage(pixels, orientation)

    def _check_device(self, error: RuntimeError) -> None:
        """After a failed decode: whether the device itself is lost (a sticky CUDA error), in
        which case every later image goes to PIL at once, said once in the log."""
        try:
            self._torch.cuda.synchronize(self._device)
        except RuntimeError as lost:
            with self._lock:
                if self._broken is None:
                    self._broken = f"the device failed ({lost}); decoding with PIL from now on"
                    log.error("[decode] device %s: %s (after: %s)", self.device, lost, error)


def _tiny_jpeg() -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (64, 48), (90, 140, 200)).save(out, "JPEG", quality=90)
    return out.getvalue()
