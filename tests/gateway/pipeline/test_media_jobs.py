"""The worker jobs: LLaVA's gateway path (decode, JPEG draft, CLIP preprocessing) against the
Hugging Face processor on the same file, and the stated tolerance of draft decoding."""

from __future__ import annotations

import io
from collections.abc import Iterator

import numpy as np
import pytest
from PIL import Image

from gateway.families._pixels import OPENAI_CLIP_STD
from gateway.families.registry import get_family
from gateway.media import stripes
from gateway.media.image import ImageLimits
from gateway.media.video import FrameSampling, VideoLimits
from gateway.pipeline._media_jobs import (
    image_digest_inputs,
    prepare_image,
    prepare_video,
    source_array,
)
from tests.gateway.media.samples import encode_video

# Stated tolerance of the default path (JPEG draft decoding at 1.5x the model's input) against
# HF's full decode, in 8-bit levels of the [0, 255] input: measured max 3-4, mean 0.3-0.5.
DRAFT_MAX_LEVELS = 8
DRAFT_MEAN_LEVELS = 1.0


def photo_jpeg(width: int, height: int, seed: int = 0) -> bytes:
    """Photo-like content: gradients, a smooth texture and mild noise, JPEG quality 90."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width]
    base = np.stack([x * 255 / width, y * 255 / height, (x + y) * 255 / (width + height)], -1)
    coarse = rng.integers(0, 256, (height // 16 + 1, width // 16 + 1, 3), dtype=np.uint8)
    texture = np.asarray(Image.fromarray(coarse).resize((width, height), Image.Resampling.BICUBIC))
    noisy = 0.6 * base + 0.4 * texture + rng.normal(0, 6, (height, width, 3))
    out = io.BytesIO()
    Image.fromarray(np.clip(noisy, 0, 255).astype(np.uint8)).save(out, "JPEG", quality=90)
    return out.getvalue()


def hf_pixels(data: bytes) -> np.ndarray:
    transformers = pytest.importorskip("transformers")
    processor = transformers.CLIPImageProcessorPil(
        size={"shortest_edge": 336},
        crop_size={"height": 336, "width": 336},
        resample=Image.Resampling.BICUBIC,
        image_mean=[0.48145466, 0.4578275, 0.40821073],
        image_std=list(OPENAI_CLIP_STD),
    )
    with Image.open(io.BytesIO(data)) as image:
        return processor(images=[image], return_tensors="np")["pixel_values"][0]


def levels(ours: np.ndarray, theirs: np.ndarray) -> np.ndarray:
    """Differences of normalised pixels, back in 8-bit levels."""
    std = np.asarray(OPENAI_CLIP_STD, np.float32)[:, None, None]
    return np.abs(ours - theirs) * std * 255


@pytest.fixture(params=[0, 2], ids=lambda n: f"stripe-threads-{n}")
def stripe_pool(request: pytest.FixtureRequest) -> Iterator[int]:
    """The job with no stripes' pool (every step in one thread) and with one of 2 threads."""
    before = stripes.stripe_threads()
    stripes.configure(request.param)
    yield request.param
    stripes.configure(before)


@pytest.mark.parametrize("size", [(1024, 1024), (1600, 1200)])
def test_llava_gateway_path_against_hugging_face(size: tuple[int, int], stripe_pool: int) -> None:
    data = photo_jpeg(*size)
    llava = get_family("llava")
    theirs = hf_pixels(data)
    exact = prepare_image(data, ImageLimits(), llava, draft_margin=0).array
    assert exact.dtype == np.float16
    assert np.array_equal(exact, theirs.astype(np.float16))  # no draft: bit-identical in fp16
    drafted = prepare_image(data, ImageLimits(), llava, draft_margin=1.5)
    assert drafted.pixels < size[0] * size[1]  # it did decode at a reduced scale
    diff = levels(drafted.array.astype(np.float32), theirs)
    assert diff.max() <= DRAFT_MAX_LEVELS and diff.mean() <= DRAFT_MEAN_LEVELS


def test_small_images_are_never_drafted(stripe_pool: int) -> None:
    data = photo_jpeg(640, 480)
    item = prepare_image(data, ImageLimits(), get_family("llava"), draft_margin=1.5)
    assert item.pixels == 640 * 480
    assert np.array_equal(item.array, hf_pixels(data).astype(np.float16))


@pytest.mark.parametrize("side", [336, 1024])  # hashed in the job's thread; beside the decode
def test_the_jobs_digest_is_the_source_bytes_digest(side: int, stripe_pool: int) -> None:
    data = photo_jpeg(side, side, seed=side)
    llava = get_family("llava")
    inputs = image_digest_inputs("m", llava, "draft=1.5")
    item = prepare_image(data, ImageLimits(), llava, 1.5, inputs)
    assert item.digest == inputs.digest([source_array(data)])
    assert item.digest != inputs.digest([source_array(data[:-1])])
    assert prepare_image(data, ImageLimits(), llava, 1.5).digest is None


def test_video_job_reports_frames_and_timings() -> None:
    clip = encode_video(frames=12, size=(64, 48))
    item = prepare_video(clip, VideoLimits(), FrameSampling(3), get_family("llava_onevision"))
    assert item.array.shape == (3, 48, 64, 3) and item.pixels == 3 * 48 * 64
    assert item.decode_s > 0 and item.preprocess_s >= 0
