"""vLLM's frame-list video, ``data:video/jpeg;base64,<f1>,<f2>,...``, built for tests."""

from __future__ import annotations

import base64
import io

from PIL import Image

from tests.gateway.media.samples import frame_pattern


def frame_images(
    frames: int = 20, size: tuple[int, int] = (64, 48), fmt: str = "JPEG"
) -> list[bytes]:
    """Frame i is ``frame_pattern(i)``, encoded as ``fmt``."""
    encoded = []
    for index in range(frames):
        out = io.BytesIO()
        Image.fromarray(frame_pattern(index, *size)).save(out, fmt, quality=95)
        encoded.append(out.getvalue())
    return encoded


def frame_list_url(images: list[bytes], media_type: str = "video/jpeg") -> str:
    """As vLLM's ``VideoMediaIO.encode_base64`` joins them."""
    return f"data:{media_type};base64," + ",".join(base64.b64encode(i).decode() for i in images)
