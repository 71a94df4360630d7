"""``[decode] device``: nvJPEG through torchvision (``media/cuda_jpeg.py``).

Here (no GPU, no torchvision) what is checked is that a gateway configured for a device it
cannot use fails at start with a message saying what is missing. The decoding tests run where
torch sees a CUDA device and torchvision imports; elsewhere they skip.
"""

from __future__ import annotations

import importlib.util
import io
import sys
import types
from typing import Any

import numpy as np
import pytest
from PIL import Image

from bench.media.inputs import photo_jpeg
from gateway.media.cuda_jpeg import CudaJpeg, NotForDevice, open_device
from gateway.media.image import ImageLimits
from gateway.media.threads import ThreadLane, ThreadLimits


def _cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


CUDA = _cuda()
VISION = importlib.util.find_spec("torchvision") is not None
needs_nvjpeg = pytest.mark.skipif(
    not (CUDA and VISION), reason="nvJPEG needs a CUDA device and torchvision"
)
without_cuda = pytest.mark.skipif(CUDA and VISION, reason="this machine can decode on CUDA")
MISSING = r"torch and torchvision built for CUDA|torch sees no CUDA device"


def encode(image: Image.Image, **params: object) -> bytes:
    out = io.BytesIO()
    image.save(out, "JPEG", **params)
    return out.getvalue()


def test_cpu_opens_no_device() -> None:
    assert open_device("cpu") is None


@without_cuda
def test_a_device_that_cannot_be_used_says_what_is_missing() -> None:
    with pytest.raises(ValueError, match=MISSING) as caught:
        CudaJpeg("cuda")
    assert "'cuda'" in str(caught.value)  # the configured device is named
    with pytest.raises(ValueError, match=MISSING):
        open_device("cuda:1")


def test_a_device_index_past_the_hosts_devices_is_refused(monkeypatch: Any) -> None:
    """``cuda:1`` on a one-GPU host: a ValueError naming it, not torch's error at start-up.
    torch sees one device here because the test says so (no GPU on this machine), and a stand-in
    torchvision module is put in place: the check comes before any decoding."""
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    for name in ("torchvision", "torchvision.io"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    with pytest.raises(ValueError, match=r"'cuda:1', but torch sees 1 CUDA device"):
        CudaJpeg("cuda:1")


def test_a_torchvision_that_cannot_decode_there_is_refused_at_start(monkeypatch: Any) -> None:
    """The start-up decode fails (a torchvision built without nvJPEG): a ValueError saying so.
    The device and torchvision are stand-ins here (no GPU on this machine)."""
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "a stand-in GPU")
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)
    vision, io_module = types.ModuleType("torchvision"), types.ModuleType("torchvision.io")
    vision.__version__ = "0.0-stand-in"  # type: ignore[attr-defined]

    def decode_jpeg(*args: object, **kwargs: object) -> None:
        raise RuntimeError("torchvision.io.decode_jpeg: not compiled with nvJPEG support")

    io_module.decode_jpeg = decode_jpeg  # type: ignore[attr-defined]
    io_module.ImageReadMode = types.SimpleNamespace(RGB="RGB")  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "torchvision", vision)
    monkeypatch.setitem(sys.modules, "torchvision.io", io_module)
    with pytest.raises(ValueError, match=r"'cuda' cannot decode a JPEG: nvJPEG: .*nvJPEG support"):
        CudaJpeg("cuda")


@without_cuda
def test_a_lane_for_a_device_that_cannot_be_used_refuses_to_start() -> None:
    """How a gateway start fails for ``[decode] device = "cuda"`` here: building its lane."""
    with pytest.raises(ValueError, match=MISSING):
        ThreadLane(ThreadLimits(threads=1, device="cuda"), 5.0)
    lane = ThreadLane(ThreadLimits(threads=1), 5.0)  # the default: PIL, no device
    try:
        assert lane.device is None
    finally:
        lane.close()


@pytest.fixture(scope="module")
def nvjpeg() -> CudaJpeg:
    return CudaJpeg("cuda")


def pil_pixels(data: bytes) -> np.ndarray[Any, Any]:
    with Image.open(io.BytesIO(data)) as image:
        return np.asarray(image.convert("RGB")).transpose(2, 0, 1)


@needs_nvjpeg
def test_a_photo_decodes_as_pil_decodes_it_within_a_few_levels(nvjpeg: CudaJpeg) -> None:
    data = photo_jpeg(1024, 1024, seed=1024)
    decoded = nvjpeg.decode(data, ImageLimits())
    pixels = decoded.pixels
    assert tuple(pixels.shape) == (3, 1024, 1024)
    assert str(pixels.dtype) == "torch.uint8" and pixels.device.type == "cuda"
    assert decoded.orientation == 1
    ours = pixels.cpu().numpy().astype(np.int16)
    off = np.abs(ours - pil_pixels(data).astype(np.int16))
    assert off.mean() < 3
    assert off.max() <= 32


@needs_nvjpeg
def test_cmyk_is_pils_to_decode(nvjpeg: CudaJpeg) -> None:
    data = encode(Image.new("CMYK", (64, 48), (10, 200, 30, 40)))
    with pytest.raises(NotForDevice):
        nvjpeg.decode(data, ImageLimits())


@needs_nvjpeg
def test_a_grey_jpeg_decodes_to_three_equal_channels(nvjpeg: CudaJpeg) -> None:
    grey = Image.fromarray(np.tile(np.arange(64, dtype=np.uint8) * 4, (48, 1)), "L")
    pixels = nvjpeg.decode(encode(grey, quality=95), ImageLimits()).pixels.cpu().numpy()
    assert pixels.shape == (3, 48, 64)
    np.testing.assert_array_equal(pixels[0], pixels[1])
    np.testing.assert_array_equal(pixels[0], pixels[2])
    assert int(pixels[0, :, -1].mean()) > int(pixels[0, :, 0].mean()) + 100  # a ramp, not flat


@needs_nvjpeg
def test_the_exif_orientation_comes_back_with_the_stored_pixels(nvjpeg: CudaJpeg) -> None:
    exif = Image.Exif()
    exif[0x0112] = 6
    data = encode(Image.new("RGB", (80, 40), (200, 30, 30)), exif=exif.tobytes())
    decoded = nvjpeg.decode(data, ImageLimits())
    assert decoded.orientation == 6
    assert tuple(decoded.pixels.shape) == (3, 40, 80)  # as stored: turning is the recipe's


@needs_nvjpeg
def test_the_tag_names_the_decoder_and_its_versions(nvjpeg: CudaJpeg) -> None:
    assert "nvjpeg" in nvjpeg.tag and "torchvision=" in nvjpeg.tag
    assert nvjpeg.device == "cuda"
