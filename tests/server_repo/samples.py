"""Deterministic media samples for the reference-model tests."""

from __future__ import annotations

import numpy as np


def llava_pixels(seed: int, count: int = 1) -> np.ndarray:
    """CLIP-like normalised pixels ``[count, 3, 336, 336]`` fp16, deterministic per seed."""
    rng = np.random.default_rng(seed)
    return rng.standard_normal((count, 3, 336, 336)).astype(np.float16)


def rgb_image(seed: int, height: int = 48, width: int = 64, count: int = 1) -> np.ndarray:
    """Gradient-plus-noise RGB ``uint8 [count, H, W, 3]`` (also used as video frames)."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width]
    base = np.stack([x * 4 % 256, y * 4 % 256, (x + y) * 2 % 256], axis=-1)
    noise = rng.integers(-40, 40, (count, height, width, 3))
    return np.clip(base[None] + noise, 0, 255).astype(np.uint8)
