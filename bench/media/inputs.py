"""The benchmark's inputs, generated once (PIL, PyAV) and cached: no downloads.

Content is photo-like rather than flat, because decoders are fast on flat colour: gradients,
a smooth random texture and mild noise for the JPEGs; a moving gradient with a moving block
and noise for the clip, encoded like web video (H.264 High, a keyframe every 2 s, B-frames).
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image

DEFAULT_CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "mmgw" / "bench"


@dataclass(frozen=True)
class Inputs:
    jpeg_1024: bytes
    jpeg_12mp: bytes
    clip: bytes
    labels: tuple[str, str, str]  # how the cases name the two JPEGs and the clip


def photo_jpeg(width: int, height: int, seed: int = 0) -> bytes:
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    base = np.stack([x * 255 / width, y * 255 / height, (x + y) * 255 / (width + height)], -1)
    coarse = rng.integers(0, 256, (height // 16 + 1, width // 16 + 1, 3), dtype=np.uint8)
    texture = np.asarray(Image.fromarray(coarse).resize((width, height), Image.Resampling.BICUBIC))
    noise = rng.normal(0, 6, (height, width, 3)).astype(np.float32)
    pixels = np.clip(0.6 * base + 0.4 * texture + noise, 0, 255).astype(np.uint8)
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, "JPEG", quality=90)
    return out.getvalue()


def h264_clip(seconds: int, width: int, height: int, fps: int = 30) -> bytes:
    """An MP4 with H.264 High (x264 veryfast, crf 23), keyframes every 2 s, B-frames."""
    rng = np.random.default_rng(1)
    y, x = np.mgrid[0:height, 0:width]
    base = np.stack([x * 255 // width, y * 255 // height, (x + y) * 255 // (width + height)], -1)
    base = base.astype(np.uint8)
    grain = rng.integers(0, 12, (8, height, width, 3), dtype=np.uint8)
    out = io.BytesIO()
    import av  # here, not at the top: the image inputs need no PyAV (the GPU host has none)

    with av.open(out, "w", format="mp4") as container:
        stream = container.add_stream("libx264", rate=fps)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        stream.options = {"preset": "veryfast", "crf": "23", "g": str(2 * fps)}
        for index in range(seconds * fps):
            frame = np.roll(base, index * 4, axis=1) + grain[index % 8]
            top = (index * 5) % max(1, height - height // 6)
            frame[top : top + height // 6, width // 6 : width // 3] = (240, index % 256, 30)
            container.mux(stream.encode(av.VideoFrame.from_ndarray(frame, "rgb24")))
        container.mux(stream.encode())
    return out.getvalue()


def _cached(path: Path, make: Callable[[], bytes], progress: Callable[[str], None]) -> bytes:
    if path.is_file():
        return path.read_bytes()
    progress(f"generating {path.name} (once; cached in {path.parent})")
    data = make()
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    partial.write_bytes(data)
    partial.replace(path)  # atomic: a run cut short leaves no half file behind
    return data


def load(cache: Path, *, tiny: bool, progress: Callable[[str], None]) -> Inputs:
    """The inputs, from the cache or generated into it. ``tiny``: small stand-ins, for the
    smoke test (nothing cached)."""
    if tiny:
        labels = ("256x256 JPEG", "640x480 JPEG", "2 s 64x48")
        return Inputs(photo_jpeg(256, 256), photo_jpeg(640, 480), h264_clip(2, 64, 48), labels)
    return Inputs(
        _cached(cache / "photo-1024.jpg", lambda: photo_jpeg(1024, 1024), progress),
        _cached(cache / "photo-4000x3000.jpg", lambda: photo_jpeg(4000, 3000), progress),
        _cached(cache / "clip-60s-720p-h264.mp4", lambda: h264_clip(60, 1280, 720), progress),
        ("1024x1024 JPEG", "12 MP JPEG (4000x3000)", "60 s 1280x720"),
    )
