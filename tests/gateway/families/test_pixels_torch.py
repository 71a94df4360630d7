"""A pixel recipe on a device tensor (here torch on the CPU) against PIL's: the device path's
resize may round a pixel a level or two off PIL's fixed point, nothing more."""

from __future__ import annotations

import io
from typing import Any

import numpy as np
import pytest
from PIL import Image, ImageOps

from bench.media.inputs import photo_jpeg
from gateway.families._pixels import CLIP_336, PixelSpec, preprocess
from gateway.families.registry import get_family
from gateway.media.cuda_jpeg import NotForDevice

torch = pytest.importorskip("torch")
from gateway.families._pixels_torch import on_device, preprocess_tensor, upright  # noqa: E402

RECIPES = ["llava", "blip2_opt", "vila", "cogvlm", "kosmos2", "internlm_xcomposer2"]


def as_tensor(image: Image.Image) -> Any:
    return torch.from_numpy(np.asarray(image.convert("RGB")).copy()).permute(2, 0, 1)


def levels_off(ours: np.ndarray, pil: np.ndarray, spec: PixelSpec) -> np.ndarray:
    """|difference| in uint8 levels (one level is 1 / 255 / std after normalisation)."""
    assert spec.image_std is not None
    level = 1 / 255 / np.asarray(spec.image_std).reshape(3, 1, 1)
    return np.abs(ours.astype(np.float32) - pil.astype(np.float32)) / level


def noise(width: int, height: int) -> Image.Image:
    rng = np.random.default_rng(width * height)
    return Image.fromarray(rng.integers(0, 256, (height, width, 3), dtype=np.uint8))


def photo(width: int, height: int) -> Image.Image:
    return Image.open(io.BytesIO(photo_jpeg(width, height, seed=width))).convert("RGB")


# Downscales both ways, the pass order PIL flips (a tall image), no resize, upscale with padding.
SIZES = [(1024, 1024), (640, 480), (300, 900), (336, 336), (200, 100)]


@pytest.mark.parametrize("family", RECIPES)
@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("content", [noise, photo])
def test_a_recipe_on_the_device_is_pils_within_two_levels(
    family: str, size: tuple[int, int], content: Any
) -> None:
    spec = get_family(family).pixel_spec
    assert spec is not None and on_device(spec)
    image = content(*size)
    ours, prepared_from = preprocess_tensor(as_tensor(image), 1, spec)
    pil = preprocess(image, spec, np.float16)
    assert ours.dtype == np.float16 and ours.shape == pil.shape
    assert prepared_from == (size[1], size[0])
    off = levels_off(ours, pil, spec)
    # Rounding: PIL's fixed point rounds half up, torch's float rounds half to even, and a
    # level's difference after the first pass can become two after the second.
    assert off.max() <= 2.1
    assert off.mean() < 0.01


@pytest.mark.parametrize("orientation", range(1, 9))
def test_exif_orientations_turn_as_pil_turns_them(orientation: int) -> None:
    stored = noise(40, 24)
    exif = Image.Exif()
    exif[0x0112] = orientation
    out = io.BytesIO()
    stored.save(out, "PNG", exif=exif.tobytes())
    turned = ImageOps.exif_transpose(Image.open(io.BytesIO(out.getvalue())))
    ours = upright(as_tensor(stored), orientation).permute(1, 2, 0).numpy()
    np.testing.assert_array_equal(ours, np.asarray(turned.convert("RGB")))


def test_a_turned_image_is_prepared_upright() -> None:
    stored = photo(480, 640)  # stored tall; orientation 6 makes it wide
    ours, prepared_from = preprocess_tensor(as_tensor(stored), 6, CLIP_336)
    pil = preprocess(stored.transpose(Image.Transpose.ROTATE_270), CLIP_336, np.float16)
    assert prepared_from == (480, 640)
    assert levels_off(ours, pil, CLIP_336).max() <= 2.1


def test_a_filter_torch_does_not_do_as_pil_is_declined() -> None:
    lanczos = PixelSpec(shortest_edge=336, resample=Image.Resampling.LANCZOS, crop_size=(336, 336))
    assert not on_device(lanczos)
    with pytest.raises(NotForDevice):
        preprocess_tensor(as_tensor(noise(64, 64)), 1, lanczos)


def test_an_extreme_aspect_ratio_is_declined() -> None:
    strip = torch.zeros((3, 1, 40_000), dtype=torch.uint8)  # PIL resamples its crop window alone
    with pytest.raises(NotForDevice):
        preprocess_tensor(strip, 1, CLIP_336)
