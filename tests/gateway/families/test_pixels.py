"""_pixels against transformers' own slow (PIL backend) CLIP image processor, in-process.

In transformers 5 ``CLIPImageProcessor`` is the torchvision backend; without torchvision it
falls back, with a warning, to ``CLIPImageProcessorPil``, the slow NumPy/PIL processor of
transformers 4. That class is what we compare with, built from parameters (no download).
"""

from __future__ import annotations

import time

import numpy as np
import pytest
from PIL import Image

from gateway.errors import MediaTooLarge
from gateway.families._pixels import (
    CLIP_336,
    MAX_RESIZE_PIXELS,
    OPENAI_CLIP_MEAN,
    OPENAI_CLIP_STD,
    PixelSpec,
    center_crop,
    output_size,
    preprocess,
    resize_to_fit,
    to_fp16_batch,
)

# Reached: bit-identical float32 (max abs difference 0.0) on every comparison below, since we
# repeat HF's arithmetic (float64 rescale, float32 normalise) on the same PIL resampling.
TOLERANCE = 0.0


def noise(size: tuple[int, int], mode: str = "RGB", seed: int = 0) -> Image.Image:
    rng = np.random.default_rng(seed)
    channels = {"RGB": 3, "RGBA": 4, "L": 1, "LA": 2, "CMYK": 4}[mode]
    array = rng.integers(0, 256, (size[1], size[0], channels), dtype=np.uint8)
    return Image.fromarray(array.squeeze(-1) if channels == 1 else array, mode)


def palette_with_transparency() -> Image.Image:
    image = noise((300, 200)).quantize(64)
    image.info["transparency"] = 3
    return image


def hf_processor(**overrides: object) -> object:
    transformers = pytest.importorskip("transformers")
    params: dict[str, object] = {
        "size": {"shortest_edge": 336},
        "crop_size": {"height": 336, "width": 336},
        "resample": Image.Resampling.BICUBIC,
        "do_center_crop": True,
        "rescale_factor": 1 / 255,
        "image_mean": list(OPENAI_CLIP_MEAN),
        "image_std": list(OPENAI_CLIP_STD),
        "do_convert_rgb": True,
    }
    params.update(overrides)
    return transformers.CLIPImageProcessorPil(**params)


def hf_pixels(processor: object, image: Image.Image) -> np.ndarray:
    return processor(images=[image], return_tensors="np")["pixel_values"][0]  # type: ignore[operator]


@pytest.fixture(scope="module")
def clip() -> object:
    return hf_processor()


CASES = [
    noise((640, 480)),
    noise((480, 640), seed=1),
    noise((336, 336), seed=2),
    noise((1000, 337), seed=3),
    noise((337, 1000), seed=4),
    noise((150, 200), seed=5),  # upscaled
    noise((20, 1500), seed=6),  # 1:75, resized to 336 x 25200 (8.5 MP) like HF
    noise((513, 511), "RGBA", seed=7),
    noise((400, 300), "L", seed=8),
    noise((300, 400), "LA", seed=9),
    noise((350, 360), "CMYK", seed=10),
    palette_with_transparency(),
]


@pytest.mark.parametrize("image", CASES, ids=[f"{i.mode}-{i.width}x{i.height}" for i in CASES])
def test_clip_336_matches_transformers(clip: object, image: Image.Image) -> None:
    ours = preprocess(image, CLIP_336)
    theirs = hf_pixels(clip, image)
    assert ours.dtype == np.float32 and ours.shape == theirs.shape == (3, 336, 336)
    assert np.abs(ours - theirs).max() <= TOLERANCE


@pytest.mark.parametrize(
    ("spec", "overrides", "image"),
    [
        (  # exact size, bilinear, no crop, 0.5 mean/std
            PixelSpec(
                size=(224, 300),
                resample=Image.Resampling.BILINEAR,
                image_mean=(0.5,) * 3,
                image_std=(0.5,) * 3,
            ),
            {
                "size": {"height": 224, "width": 300},
                "resample": Image.Resampling.BILINEAR,
                "do_center_crop": False,
                "image_mean": [0.5] * 3,
                "image_std": [0.5] * 3,
            },
            noise((640, 427)),
        ),
        (  # no resize: the crop pads a small image with zeros, as HF does (odd margins)
            PixelSpec(crop_size=(64, 80), image_mean=OPENAI_CLIP_MEAN, image_std=OPENAI_CLIP_STD),
            {"do_resize": False, "crop_size": {"height": 64, "width": 80}},
            noise((45, 51)),
        ),
        (  # rescale only
            PixelSpec(shortest_edge=224, crop_size=(224, 224)),
            {
                "size": {"shortest_edge": 224},
                "crop_size": {"height": 224, "width": 224},
                "do_normalize": False,
            },
            noise((500, 260)),
        ),
    ],
    ids=["exact-size", "pad-crop", "rescale-only"],
)
def test_other_specs_match_transformers(
    spec: PixelSpec, overrides: dict[str, object], image: Image.Image
) -> None:
    ours, theirs = preprocess(image, spec), hf_pixels(hf_processor(**overrides), image)
    assert ours.shape == theirs.shape
    assert np.abs(ours - theirs).max() <= TOLERANCE


def test_thin_strips_resample_only_the_crop_window(clip: object) -> None:
    """1 x 16384 would become 336 x 5.5M px before the crop; we resample 336 x 336 only."""
    strip = noise((16_384, 1), seed=11)
    started = time.monotonic()
    ours = preprocess(strip, CLIP_336)
    assert ours.shape == (3, 336, 336) and time.monotonic() - started < 1.0
    # Same geometry as HF: on smooth content (a gradient) the result is identical.
    ramp = np.linspace(0, 255, 3000).astype(np.uint8)
    gradient = Image.fromarray(np.stack([np.tile(ramp, (20, 1))] * 3, axis=-1))
    assert 336 * int(336 * 3000 / 20) > MAX_RESIZE_PIXELS
    expected = hf_pixels(clip, gradient)
    assert np.abs(preprocess(gradient, CLIP_336) - expected).max() <= TOLERANCE
    with pytest.raises(MediaTooLarge):
        preprocess(strip, PixelSpec(shortest_edge=336))  # no crop: the output itself is huge


def test_output_size_truncates_like_hf() -> None:
    assert output_size(480, 640, CLIP_336) == (336, 448)
    assert output_size(1000, 337, CLIP_336) == (997, 336)  # 336 * 1000 / 337 = 997.03
    assert output_size(5, 7, PixelSpec(size=(2, 3))) == (2, 3)
    assert output_size(5, 7, PixelSpec()) == (5, 7)


def test_center_crop_offsets() -> None:
    array = np.arange(5 * 6).reshape(5, 6, 1)
    assert center_crop(array, (3, 3))[:, :, 0].tolist() == [[7, 8, 9], [13, 14, 15], [19, 20, 21]]
    padded = center_crop(np.ones((2, 2, 1)), (4, 5))
    assert padded.shape == (4, 5, 1) and padded.sum() == 4 and padded[1:3, 2:4].all()


def test_fp16_batch() -> None:
    arrays = [preprocess(noise((400, 300), seed=s), CLIP_336) for s in range(3)]
    batch = to_fp16_batch(arrays)
    assert batch.shape == (1, 3, 3, 336, 336) and batch.dtype == np.float16
    assert np.abs(batch[0, 2].astype(np.float32) - arrays[2]).max() < 2e-3  # fp16 rounding
    with pytest.raises(ValueError):
        to_fp16_batch([])
    with pytest.raises(ValueError):
        to_fp16_batch([arrays[0], arrays[0][:, :300]])


def test_one_fp16_image_becomes_the_batch_without_a_copy() -> None:
    array = preprocess(noise((400, 300), seed=1), CLIP_336, np.float16)
    batch = to_fp16_batch([array])
    assert batch.shape == (1, 1, 3, 336, 336) and np.shares_memory(batch, array)
    single = to_fp16_batch([array.astype(np.float32)])  # another dtype: converted, a copy
    assert single.dtype == np.float16 and np.array_equal(single, batch)


def test_an_image_already_at_the_resize_target_is_not_resampled() -> None:
    from gateway.families._pixels import _resize

    for size in ((336, 336), (337, 336), (336, 1000)):  # the shortest edge is already 336
        image = noise(size, seed=3)
        resized, cropped = _resize(image, CLIP_336)
        assert resized is image and not cropped  # the same object: no copy
    assert _resize(noise((400, 300)), CLIP_336)[0].size == (448, 336)  # others still resize


def test_resize_to_fit_only_downscales() -> None:
    small = Image.new("RGB", (300, 200))
    assert resize_to_fit(small, 512) is small
    assert resize_to_fit(Image.new("RGB", (5000, 2500)), 2304).size == (2304, 1152)
    assert resize_to_fit(Image.new("RGB", (999, 3001)), 1000).size == (333, 1000)
    assert resize_to_fit(Image.new("RGB", (10000, 1)), 100).size == (100, 1)


def test_spec_validation() -> None:
    with pytest.raises(ValueError):
        PixelSpec(shortest_edge=1, size=(1, 1))
    with pytest.raises(ValueError):
        PixelSpec(image_mean=(0.5, 0.5, 0.5))
    with pytest.raises(ValueError):
        PixelSpec(crop_size=(0, 3))


@pytest.mark.parametrize("spec", [CLIP_336, PixelSpec(rescale_factor=None), PixelSpec()])
def test_lookup_table_equals_the_arithmetic(spec: PixelSpec) -> None:
    from gateway.families._pixels import _normalise, _normalise_by_table

    array = np.random.default_rng(0).integers(0, 256, (17, 23, 3), dtype=np.uint8)
    direct = np.ascontiguousarray(_normalise(array, spec).transpose(2, 0, 1), dtype=np.float32)
    assert np.array_equal(_normalise_by_table(array, spec), direct)
    half = _normalise_by_table(array, spec, np.float16)
    assert half.dtype == np.float16 and np.array_equal(half, direct.astype(np.float16))
